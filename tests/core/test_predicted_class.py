"""The event field `predicted_class`: decoded by both paths and the schema alike, counted in the window's summaries.

The window state keeps, per score bin, the rows that carried the model's decision and those it called positive;
the label summary does the same per label, so realized and estimated threshold metrics follow the decision.
"""
from __future__ import annotations

import jsonschema
import numpy as np
import orjson
import pytest

from driftline.baseline import LabelSummary
from driftline.baseline.decisions import decision_values, split_decisions, with_decisions
from driftline.detectors.stats.quality import quality_metrics
from driftline.events import INFERENCE_SCHEMA, EventError, json_schema, parse_inference, validate_inference
from driftline.vocabulary import ACCURACY, PRECISION, PREDICTED_CLASS
from driftline.window_state import EventBatch, WindowState

T0 = 1_796_040_000_000
_VALIDATOR = jsonschema.Draft202012Validator(json_schema("inference"))


def event(i: int, score: float, decision, **extra) -> dict:
    doc = {"schema": INFERENCE_SCHEMA, "event_id": f"e-{i}", "request_id": f"r-{i}", "ts": T0 + i, "model": "m",
           "version": "1", "features": {"x": float(i)}, "prediction": score, "latency_ms": {"total": 5.0}, **extra}
    if decision is not None:
        doc[PREDICTED_CLASS] = decision
    return doc


@pytest.mark.parametrize("decision", [1, 0, True, False, 1.0, "1", "approve", None])
def test_a_decision_is_kept_by_both_paths_and_the_schema_agrees(decision):
    doc = event(1, 0.3, decision)
    parsed = parse_inference(orjson.dumps(doc))  # the fast path
    assert parsed == validate_inference(orjson.loads(orjson.dumps(doc)))  # the precise checks
    assert parsed.raw.get(PREDICTED_CLASS) == decision
    assert _VALIDATOR.is_valid(doc)


@pytest.mark.parametrize("decision, fragment", [
    ([1], "expected the model's decision"), ({"a": 1}, "expected the model's decision"),
    ("", "class label of 1 to"), ("x" * 300, "class label of 1 to"),
])
def test_a_malformed_decision_is_refused_by_name(decision, fragment):
    doc = event(1, 0.3, decision)
    with pytest.raises(EventError) as info:
        parse_inference(orjson.dumps(doc))
    assert info.value.field == PREDICTED_CLASS and fragment in info.value.reason
    assert not _VALIDATOR.is_valid(doc)


def test_decisions_read_as_one_zero_or_none():
    assert decision_values([True, False, 1, 0, 1.0, "1", "TRUE", "false", "0", None, "approve", 2]).tolist()[:9] == \
        [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert np.isnan(decision_values([None, "approve", 2])).all()
    stored = with_decisions([0.3, 0.8, None], np.array([1.0, np.nan, 1.0]))
    assert stored == [{"prediction": 0.3, "predicted_class": 1.0}, 0.8, None]
    predictions, decisions = split_decisions(orjson.loads(orjson.dumps(stored)))  # as the label join reads them
    assert predictions == [0.3, 0.8, None] and decisions[0] == 1.0 and np.isnan(decisions[1:]).all()


def test_the_window_state_counts_decisions_per_score_bin_and_keeps_them():
    rng = np.random.default_rng(1)
    scores = rng.uniform(size=400)
    decided = scores >= 0.3
    docs = [event(i, float(s), int(d) if i % 4 else None) for i, (s, d) in enumerate(zip(scores, decided))]
    events = [parse_inference(orjson.dumps(doc)) for doc in docs]
    batch = EventBatch.from_events(events)
    assert np.isnan(batch.decisions[::4]).all() and (batch.decisions[1::4] == decided[1::4]).all()
    state = WindowState.empty(None).add_batch(batch)
    given = np.arange(400) % 4 != 0
    assert state.decisions.rows.sum() == given.sum()
    assert state.decisions.called.sum() == (given & decided).sum()
    bins = np.minimum((scores * state.decisions.bins).astype(int), state.decisions.bins - 1)
    assert state.decisions.called[bins[given & decided]].min() >= 1
    again = WindowState.from_bytes(state.to_bytes())
    assert (again.decisions.rows == state.decisions.rows).all()
    assert (again.decisions.called == state.decisions.called).all()
    merged = state.merge(WindowState.empty(None).add_batch(EventBatch.from_events(docs)))  # dicts: the same counts
    assert (merged.decisions.rows == 2 * state.decisions.rows).all()
    assert WindowState.empty(None).add_batch(EventBatch.from_events([event(0, 0.3, None)])).decisions is None


def test_labels_joined_with_decided_predictions_follow_the_decision():
    rng = np.random.default_rng(2)
    scores = rng.uniform(size=2000)
    labels = (rng.uniform(size=2000) < scores).astype(int)
    decided = (scores >= 0.3).astype(float)
    state = WindowState.empty(None)
    state.add_labels(orjson.loads(orjson.dumps(with_decisions(scores.tolist(), decided))), labels.tolist())
    summary = state.labels
    assert summary.decided_positives.sum() == labels.sum() and summary.called_positives.sum() == (
        labels * decided).sum()
    realized = quality_metrics(summary)
    assert realized[ACCURACY] == pytest.approx(float((decided == labels).mean()))
    assert realized[PRECISION] == pytest.approx(float(labels[decided == 1].mean()))
    plain = quality_metrics(LabelSummary().add(scores, labels))  # no decisions: the 0.5 threshold, as before
    assert plain[ACCURACY] == pytest.approx(float(((scores >= 0.5) == labels).mean()))
    again = LabelSummary.from_dict(orjson.loads(orjson.dumps(summary.to_dict())))
    assert quality_metrics(again) == realized and quality_metrics(summary.merge(LabelSummary())) == realized


def test_the_logging_client_sends_the_decision_beside_the_score():
    from driftline.client.inference_call import InferenceCall, LoggerIdentity

    logger = LoggerIdentity(model="m", version="1")
    doc = InferenceCall({"x": 1.0}, 0.31, 5.0, T0, "e-1", request_id="r-1", predicted_class=1).event(logger)
    assert doc[PREDICTED_CLASS] == 1
    assert parse_inference(orjson.dumps(doc)).raw[PREDICTED_CLASS] == 1
    without = InferenceCall({"x": 1.0}, 0.31, 5.0, T0, "e-1", request_id="r-1").event(logger)
    assert PREDICTED_CLASS not in without
