"""Values that once stopped the pipeline: a huge number, a fold that fails, a state that cannot be encoded.

Each is isolated: the value is counted as a data-quality problem or its record dead-lettered
with the reason (the bounds table, driftline/value_bounds.py, says which), and the collector goes on
storing (with and without decoder processes).
"""
from __future__ import annotations

import tracemalloc

import orjson
import pytest
from sqlalchemy import select

import driftline.collector.folding as folding
from driftline.collector.flush import FlushSetup, PartitionFlush, flush
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.collector.windows import PartitionWindows
from driftline.config import TOPIC_INFERENCE
from driftline.events import encode_event, parse_inference
from driftline.store import db as store_db
from driftline.store.models import DeadLetter, WindowStateRecord
from driftline.window_state import EventBatch, WindowState
from tests.support.collector_helpers import T0_MS, collector_thread, config, event, events, merged, produce
from tests.support.waiting import wait_until


@pytest.mark.parametrize("decoders", [0, 2])
def test_a_huge_value_is_counted_out_of_range_and_the_collector_keeps_storing(broker, db_url, unique_id, decoders):
    model = f"huge-{unique_id}"
    first = [event(model, i) for i in range(20)]
    first[5]["features"]["x"] = 1e200  # its square overflows a float
    first[6]["prediction"] = -1e300
    first[7]["latency_ms"] = {"total": 1e300}  # past the latency bound: no measurement, dead-lettered
    produce(broker, [encode_event(d) for d in first])
    with collector_thread(config(broker, db_url, decoders=decoders)) as collector:
        wait_until(lambda: events(db_url, model) == 19, timeout=90,
                   message="the first events, the huge ones among them")  # start-up: group join, decoders
        produce(broker, [encode_event(event(model, i)) for i in range(20, 30)])
        wait_until(lambda: events(db_url, model) == 29, message="events sent after the huge ones")
        assert collector.consumed >= 30
    (state,) = merged(db_url, model).values()  # every stored row decodes
    x = state.features["x"]
    assert (x.nonfinite, x.above_max, x.count) == (1, 1, 28)  # a model input: counted out of range
    assert x.total == sum(float(i) for i in range(30) if i not in (5, 7))
    assert (state.prediction.nonfinite, state.prediction.count) == (1, 28)
    assert state.latency["total"].out_of_range == 0 and state.latency["total"].count == 29
    with store_db.session_scope(db_url) as session:
        (letter,) = session.scalars(select(DeadLetter).where(DeadLetter.model == model))
    assert letter.field == "latency_ms.total" and "outside 0 .. 86400000 ms" in letter.reason


def _folder() -> InferenceFolder:
    return InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000), baseline_for=lambda m, v: None,
                           stored_watermark=lambda m, v: None)


@pytest.mark.parametrize("columnar", [True, False])
def test_a_batch_that_cannot_be_folded_dead_letters_only_its_culprit(monkeypatch, columnar):
    values = [encode_event(event("fold-model", i)) for i in range(10)]
    culprit = event("fold-model", 99)
    culprit["features"]["x"] = 4242.0
    values.insert(4, encode_event(culprit))
    original = WindowState.add_batch

    def add_batch(self, batch):
        if 4242.0 in batch.features["x"].tolist():
            raise RuntimeError("a folding bug")
        return original(self, batch)

    monkeypatch.setattr(WindowState, "add_batch", add_batch)
    if not columnar:
        monkeypatch.setattr(folding, "parse_inference_columns", lambda values, max_ts_ms=None: None)
    folder = _folder()
    folder.process(list(range(100, 111)), values)
    delta = folder.take()
    assert delta.valid == 10
    (partial,) = delta.windows.values()
    assert partial.events == partial.state.events == 10  # nothing of the failed attempt was kept
    assert 4242.0 not in [r["features"]["x"] for r in partial.state.sample]
    (letter,) = delta.dead_letters
    assert (letter.offset, letter.raw) == (104, values[4])
    assert "could not be folded" in letter.reason and "a folding bug" in letter.reason


def test_an_event_stamped_far_ahead_of_the_clock_is_dead_lettered():
    folder = InferenceFolder(TOPIC_INFERENCE, 0, FolderSetup(60_000, 30_000, 1_000, max_future_ms=3_600_000,
                                                             clock=lambda: T0_MS / 1000),
                             baseline_for=lambda m, v: None, stored_watermark=lambda m, v: None)
    ahead = [event("future-model", i, ts_ms=T0_MS + 3_600_000 + 1 if i == 2 else None) for i in range(5)]
    folder.process(list(range(5)), [encode_event(d) for d in ahead])
    delta = folder.take()
    assert delta.valid == 4
    (letter,) = delta.dead_letters
    assert (letter.offset, letter.field) == (2, "ts") and "in the future" in letter.reason
    # The watermark did not jump ahead: an event of the next minute is not late.
    assert delta.watermarks[("future-model", "1")] == T0_MS + 4


def test_a_window_that_cannot_be_encoded_does_not_stop_the_flush(db_url):
    def parsed(i: int, model: str):
        return parse_inference(orjson.dumps({
            "schema": "driftline.inference/v1", "event_id": f"{model}-{i}", "ts": 1_790_000_040_000 + i,
            "model": model, "version": "1", "features": {"x": float(i)}, "prediction": 0.5,
            "latency_ms": {"total": 1.0}}))

    windows = PartitionWindows(60_000, 30_000)
    for model in ("good", "poisoned"):
        windows.fold(model, "1", EventBatch.from_events([parsed(i, model) for i in range(5)]), None, None)
    poisoned = next(p for key, p in windows.windows.items() if key.model == "poisoned")
    poisoned.state.features["x"].total_sq = float("inf")  # what a bug could leave behind
    part = PartitionFlush(TOPIC_INFERENCE, 0, 0, None, 10, "tid-1", windows.windows, [], {}, {})
    result = flush(FlushSetup(store_db.get_engine(db_url), "g", 60_000, lambda m, v: None), [part],
                   now_ms=1_790_000_100_000)
    assert result.dead_letters == 1
    with store_db.session_scope(db_url) as session:
        rows = {r.model: r for r in session.scalars(select(WindowStateRecord))}
        letters = list(session.scalars(select(DeadLetter)))
    assert set(rows) == {"good"} and WindowState.from_bytes(rows["good"].state).events == 5
    assert len(letters) == 1 and "poisoned" in letters[0].reason and "cannot be encoded" in letters[0].reason


# -- the bounds table at the collector ---------------------------------------------------------------------------
@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("part", ["total", "ttft"])
def test_a_forged_latency_is_dead_lettered_alone_on_either_path(monkeypatch, columnar, part):
    """A response stamped in the year 9999 made latency_ms.total 2.5e14 ms, which passed and could page."""
    if not columnar:
        monkeypatch.setattr(folding, "parse_inference_columns", lambda values, max_ts_ms=None: None)
    docs = [event("latency-model", i, latency_ms={"total": 4.0, "ttft": 2.0}) for i in range(10)]
    docs[4]["latency_ms"][part] = 2.5e14
    folder = _folder()
    folder.process(list(range(10)), [encode_event(d) for d in docs])
    delta = folder.take()
    (letter,) = delta.dead_letters
    assert (letter.offset, letter.field) == (4, f"latency_ms.{part}")
    assert "outside 0 .. 86400000 ms" in letter.reason and "forged" in letter.reason
    (partial,) = delta.windows.values()
    assert partial.events == 9 and partial.state.latency[part].max == (4.0 if part == "total" else 2.0)


def test_a_poll_of_unique_feature_age_names_stays_small_and_counts_only_served_features():
    """600 events of 1 000 feature_age_ms names each, all but one unique: the per-event path made a column per name
    for every event (peak 3 GB, 16 s; ~1 000 such events ran a decoder out of memory, and it re-read the same offsets)."""
    values = [encode_event(event("fresh-model", i, feature_age_ms={"x": 5.0, **{f"n{i}_{j}": 1.0
                                                                                for j in range(999)}}))
              for i in range(600)]
    folder = _folder()
    tracemalloc.start()
    try:
        folder.process(list(range(600)), values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6, f"decoding the poll peaked at {peak / 1e6:.0f} MB"  # 9 MB here; 3 035 MB before
    delta = folder.take()
    assert delta.valid == 600 and not delta.dead_letters
    (partial,) = delta.windows.values()
    assert set(partial.state.feature_age) == {"x"} and partial.state.feature_age["x"].count == 600


def test_both_paths_drop_the_ages_of_features_the_event_does_not_carry(monkeypatch):
    docs = [event("fresh-model", i, feature_age_ms={"x": 5.0 + i, "gone": 7.0}, feature_ts={"gone": T0_MS})
            for i in range(50)]
    states = []
    values = [encode_event(d) for d in docs]
    assert folding.parse_inference_columns(values) is not None  # the columnar path takes this poll whole
    for columnar in (True, False):
        if not columnar:
            monkeypatch.setattr(folding, "parse_inference_columns", lambda values, max_ts_ms=None: None)
        folder = _folder()
        folder.process(list(range(50)), values)
        (partial,) = folder.take().windows.values()
        states.append(partial.state)
    columnar_state, per_event_state = states
    for state in states:
        assert set(state.feature_age) == {"x"} and state.feature_age["x"].count == 50
    assert (columnar_state.feature_age["x"].counts == per_event_state.feature_age["x"].counts).all()
