"""Feature freshness: the events' `feature_ts` / `feature_age_ms`, their ages folded into window states (per
event and columnar, as the collector folds them), merged and stored, and the `stale_features` check."""
from __future__ import annotations

import numpy as np
import orjson
import pytest

from driftline.collector.event_columns import parse_inference_columns
from driftline.detectors.families.freshness import stale_features
from driftline.detectors.families.window import evaluate_window
from driftline.detectors.thresholds.freshness import FreshnessThresholds
from driftline.errors import UserError
from driftline.events import INFERENCE_SCHEMA, EventError, parse_inference
from driftline.vocabulary import DATA_QUALITY, STALE_FEATURES
from driftline.window_state import EventBatch, WindowState
from driftline.window_state.freshness import AgeHistogram

T0 = 1_796_040_000_000


def event(i: int, **fields):
    doc = {"schema": INFERENCE_SCHEMA, "event_id": f"e-{i}", "request_id": f"r-{i}", "ts": T0 + i,
           "model": "m", "version": "1", "features": {"score": 600.0 + i % 7, "late": 1.0},
           "prediction": 0.5, "latency_ms": {"total": 3.0}}
    doc.update(fields)
    return doc


def messages(docs):
    return [orjson.dumps(d) for d in docs]


def fold(docs, columnar: bool) -> WindowState:
    if columnar:
        columns = parse_inference_columns(messages(docs))
        assert columns is not None, "the columnar path refused the batch"
        batch = columns.batch
    else:
        batch = EventBatch.from_events([parse_inference(m) for m in messages(docs)])
    return WindowState.empty(None).add_batch(batch)


# -- the contract ---------------------------------------------------------------------------
def test_feature_times_and_ages_are_valid_event_fields():
    parsed = parse_inference(orjson.dumps(event(1, feature_ts={"score": "2026-11-30T11:59:00.000Z", "late": T0},
                                                feature_age_ms={"late": 5})))
    assert parsed.raw["feature_ts"]["late"] == T0


@pytest.mark.parametrize("fields, field", [
    ({"feature_ts": {"score": "yesterday"}}, "feature_ts.score"),
    ({"feature_ts": {"score": 1_796_040_000}}, "feature_ts.score"),  # seconds
    ({"feature_ts": ["score"]}, "feature_ts"),
    ({"feature_age_ms": {"score": -1}}, "feature_age_ms.score"),
    ({"feature_age_ms": {"score": "old"}}, "feature_age_ms.score"),
    ({"feature_age_ms": {"score": True}}, "feature_age_ms.score"),
    ({"feature_age_ms": {f"f{i}": 1 for i in range(1001)}}, "feature_age_ms"),
])
def test_a_bad_freshness_field_is_refused_naming_it(fields, field):
    with pytest.raises(EventError) as caught:
        parse_inference(orjson.dumps(event(1, **fields)))
    assert caught.value.field == field


# -- the window state ---------------------------------------------------------------------------
def docs_with_ages(n: int, rng: np.random.Generator):
    ages = rng.exponential(20_000.0, n)
    docs = [event(i, feature_ts={"score": int(T0 + i - age)}, feature_age_ms={"late": float(age / 10)})
            for i, age in enumerate(ages)]
    return docs, ages


@pytest.mark.parametrize("columnar", [False, True])
def test_ages_are_folded_into_a_sketch_per_feature(columnar):
    docs, ages = docs_with_ages(2_000, np.random.default_rng(3))
    state = fold(docs, columnar)
    whole = np.floor(ages)  # feature_ts is whole milliseconds
    for q in (0.5, 0.95, 0.99):
        assert state.feature_age["score"].quantile(q) == pytest.approx(np.quantile(whole, q, method="lower"), rel=0.021)
        assert state.feature_age["late"].quantile(q) == pytest.approx(np.quantile(ages / 10, q, method="lower"),
                                                                       rel=0.021)
    assert state.feature_age["score"].count == 2_000


def test_columnar_and_per_event_folding_agree():
    docs, _ = docs_with_ages(500, np.random.default_rng(4))
    docs[7]["feature_ts"]["score"] = T0 + 60_000  # stamped after its event (clock skew): age 0
    a, b = fold(docs, False), fold(docs, True)
    for name in ("score", "late"):
        assert np.array_equal(a.feature_age[name].counts, b.feature_age[name].counts)
        assert a.feature_age[name].sum == pytest.approx(b.feature_age[name].sum)
    assert a.feature_age["score"].min == 0.0


def test_rfc3339_feature_times_take_the_per_event_path_and_are_counted():
    docs = [event(i, feature_ts={"score": "2026-11-30T11:59:00.000Z"}) for i in range(10)]
    assert parse_inference_columns(messages(docs)) is None
    state = fold(docs, False)
    assert state.feature_age["score"].count == 10
    assert state.feature_age["score"].max == pytest.approx(T0 - 1_796_039_940_000 + 9)


def test_only_the_windows_features_get_a_sketch():
    docs = [event(i, feature_age_ms={"score": 5.0, "not_a_feature": 7.0}) for i in range(20)]
    assert set(fold(docs, False).feature_age) == {"score"}


def test_age_sketches_merge_and_survive_storage():
    docs, _ = docs_with_ages(900, np.random.default_rng(5))
    whole = fold(docs, False)
    parts = [fold(docs[:300], True), fold(docs[300:600], False), fold(docs[600:], True)]
    merged = parts[2].merge(parts[0]).merge(parts[1])
    stored = WindowState.from_bytes(merged.to_bytes())
    for name in ("score", "late"):
        assert np.array_equal(stored.feature_age[name].counts, whole.feature_age[name].counts)
        assert stored.feature_age[name].max == whole.feature_age[name].max
    assert WindowState.from_bytes(fold([event(1)], False).to_bytes()).feature_age == {}


def test_ages_beyond_the_latency_range_keep_their_order_of_magnitude():
    sketch = AgeHistogram()
    sketch.add(np.array([3 * 86_400_000.0] * 10))  # three days: beyond the latency sketch's 1e7 ms
    assert sketch.quantile(0.5) == pytest.approx(3 * 86_400_000.0, rel=0.01)


def test_share_above_counts_the_ages_past_the_limit():
    sketch = AgeHistogram()
    sketch.add(np.concatenate([np.full(90, 1_000.0), np.full(10, 60_000.0)]))
    assert sketch.share_above(5_000.0) == (10, 0.1)
    assert sketch.share_above(100_000.0) == (0, 0.0)
    assert sketch.share_above(10.0) == (100, 1.0)


# -- the check ---------------------------------------------------------------------------
def test_stale_features_breaches_above_the_share_and_is_off_without_a_max_age():
    docs = [event(i, feature_age_ms={"score": 90_000.0 if i % 10 == 0 else 1_000.0, "late": 1_000.0})
            for i in range(500)]
    state = fold(docs, True)
    assert stale_features(state, FreshnessThresholds(), 100) == []
    results = {r.feature: r for r in stale_features(state, FreshnessThresholds(max_age={"score": 60, "late": 60}), 100)}
    score = results["score"]
    assert (score.detector, score.metric) == (DATA_QUALITY, STALE_FEATURES)
    assert score.value == pytest.approx(0.1) and score.breached
    assert score.details["stale"] == 50 and score.details["aged"] == 500
    assert score.details["age_p99_ms"] == pytest.approx(90_000.0, rel=0.01)
    assert not results["late"].breached and results["late"].value == 0.0
    # a higher tolerated share: the same window passes
    assert not stale_features(state, FreshnessThresholds(max_age={"score": 60}, stale_share=0.2), 100)[0].breached


def test_too_few_aged_requests_is_insufficient_data_never_a_breach():
    state = fold([event(i, feature_age_ms={"score": 1e9}) for i in range(50)], False)
    (result,) = stale_features(state, FreshnessThresholds(max_age={"score": 1, "late": 1}), 100)[:1]
    assert not result.breached and result.insufficient_data


def test_freshness_section_is_strict_and_has_per_model_overrides():
    mapping = {"max_age": {"score": 60}, "models": {"m": {"max_age": {"late": 5}, "stale_share": 0.5}}}
    assert FreshnessThresholds.from_mapping(mapping).max_age_s == {"score": 60}
    other = FreshnessThresholds.from_mapping(mapping, model="m")
    assert other.max_age_s == {"late": 5} and other.stale_share == 0.5
    for bad, message in (({"max_ages": {}}, "unknown key"), ({"max_age": {"score": 0}}, "max_age"),
                         ({"max_age": {"score": "1m"}}, "max_age"), ({"stale_share": 2}, "stale_share")):
        with pytest.raises(UserError, match=message):
            FreshnessThresholds.from_mapping(bad)


def test_evaluate_window_reports_stale_features_with_data_quality(tiny_baseline_and_state):
    baseline, state = tiny_baseline_and_state
    results = evaluate_window(baseline, state, freshness=FreshnessThresholds(max_age={"score": 60})).results
    stale = [r for r in results if r.metric == STALE_FEATURES]
    assert len(stale) == 1 and stale[0].breached
    assert not [r for r in evaluate_window(baseline, state).results if r.metric == STALE_FEATURES]


@pytest.fixture
def tiny_baseline_and_state():
    import pandas as pd

    from driftline.baseline import compute_baseline

    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"score": 600 + rng.integers(0, 7, 2_000).astype(float), "late": np.ones(2_000)})
    baseline = compute_baseline(frame)
    docs = [event(i, feature_age_ms={"score": 120_000.0}) for i in range(300)]
    columns = parse_inference_columns(messages(docs))
    return baseline, WindowState.empty(baseline).add_batch(columns.batch)


def test_up_configures_freshness_for_the_stale_features_scenario_unless_the_user_did(tmp_path):
    from driftline import serving_defaults
    from driftline.commands.up import _scenario_config
    from driftline.config import load_settings
    from driftline.private_files import private_dir
    from driftline.scheduler.evaluation_config import EvaluationConfig

    settings = load_settings(None, home=tmp_path / "a")
    private_dir(settings.home)
    written = _scenario_config(settings, "stale_features", (), True)
    freshness = EvaluationConfig.from_settings(load_settings(written)).freshness_for("credit-default")
    age = serving_defaults.REPLAY_FEATURE_MAX_AGE_SECONDS
    assert freshness.max_age_s == {"credit_score": age, "num_late_payments": age}
    mine = tmp_path / "mine.toml"
    mine.write_text("[freshness]\nmax_age = {credit_score = 60}\n")
    settings = load_settings(mine, home=tmp_path / "b")
    assert _scenario_config(settings, "stale_features", (), True) == mine
