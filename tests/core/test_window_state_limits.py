"""Window states under hostile input: huge numbers, non-finite sums, older blobs, category floods."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from driftline.detectors.families.data_quality import data_quality
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.detectors.families.window import evaluate_window
from driftline import defaults
from driftline.baseline import LabelSummary, category_key, compute_baseline
from driftline.window_state import OTHER_CATEGORY, EventBatch, WindowState, WindowStateError

OLD_BLOB = Path(__file__).parent / "data" / "window_state_overflowed_v1.bin"


def _events(features: list[dict], predictions=None, latency=None) -> list[dict]:
    return [{"schema": "driftline.inference/v1", "event_id": f"e{i}", "ts_ms": 1_790_000_000_000 + i, "model": "m",
             "version": "1", "features": f, "prediction": 0.5 if predictions is None else predictions[i],
             "latency_ms": {"total": 2.0 if latency is None else latency[i]}, "status": "ok"}
            for i, f in enumerate(features)]


def _numeric_baseline():
    rng = np.random.default_rng(1)
    return compute_baseline(pd.DataFrame({"x": rng.normal(size=2_000)}), predictions=rng.random(2_000))


def test_a_huge_number_is_out_of_range_not_summed_and_the_detector_sees_it():
    baseline = _numeric_baseline()
    values = [0.1 * i for i in range(200)]
    values[7], values[8], values[9] = 1e200, -1e300, defaults.VALUE_MAX_ABS  # the last is still a number
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(_events([{"x": v} for v in values])))
    x = state.features["x"]
    assert (x.nonfinite, x.below_min, x.count) == (2, 1, 198)
    assert math.isfinite(x.total_sq) and np.isfinite(x.sums).all()
    decoded = WindowState.from_bytes(state.to_bytes(), baseline)
    assert decoded.features["x"].nonfinite == 2 and decoded.features["x"].total == pytest.approx(x.total)
    out_of_range = next(r for r in data_quality(baseline, decoded, WindowThresholds())
                        if r.feature == "x" and r.metric == "out_of_range_share")
    assert out_of_range.details["above_max"] >= 2 and out_of_range.details["below_min"] >= 1
    assert out_of_range.value >= 3 / 200


def test_huge_predictions_latencies_and_labels_are_counted_apart():
    state = WindowState.empty(None).add_batch(EventBatch.from_events(
        _events([{"x": 1.0}] * 4, predictions=[0.5, 1e200, 0.2, 0.1], latency=[1.0, 2.0, 1e300, 3.0])))
    assert (state.prediction.nonfinite, state.prediction.count) == (1, 3)
    assert (state.latency["total"].out_of_range, state.latency["total"].count) == (1, 3)
    state.add_labels([0.5, 0.25, 3.0], [1e200, 0.5, 1.0])
    assert (state.labels.n, state.labels.out_of_range) == (2, 1)
    decoded = WindowState.from_bytes(state.to_bytes())
    assert decoded.latency["total"].out_of_range == 1 and decoded.labels.out_of_range == 1
    assert math.isfinite(decoded.labels.sum_sq_error)


def test_encoding_refuses_a_non_finite_number():
    state = WindowState.empty(None).add_batch(EventBatch.from_events(_events([{"x": 1.0}, {"x": 2.0}])))
    state.features["x"].total_sq = math.inf
    assert state.nonfinite_field() == "features.x.total"
    with pytest.raises(WindowStateError) as info:
        state.to_bytes()
    assert "features.x" in str(info.value)
    state.features["x"].total_sq = 5.0
    state.latency["total"].sum = math.nan
    with pytest.raises(WindowStateError):
        state.to_bytes()


def test_a_blob_written_before_the_guard_decodes_and_stays_usable():
    # Written by the previous version from 50 events, one with x = 1e200 and one latency 1e300:
    # its sum of squares overflowed and was stored as null, which every decode then refused.
    rng = np.random.default_rng(7)
    baseline = compute_baseline(pd.DataFrame({"x": rng.normal(size=2000)}), predictions=rng.random(2000),
                                labels=rng.normal(size=2000))
    state = WindowState.from_bytes(OLD_BLOB.read_bytes(), baseline)
    assert state.events == 50 and state.features["x"].count == 50
    assert state.features["x"].total_sq == 0.0  # unknown: read as zero
    assert np.isfinite(state.features["x"].sums).all()
    assert state.labels.sum_sq_error == 0.0
    again = WindowState.from_bytes(state.merge(state).to_bytes(), baseline)  # merges and encodes again
    assert again.events == 100
    evaluate_window(baseline, again)  # every detector family reads it


def test_categories_are_capped_with_an_other_count_and_merges_keep_every_count():
    cap = defaults.CATEGORY_MAX_DISTINCT
    common = [{"c": f"common-{i % 5}"} for i in range(3 * cap)]
    flood = [{"c": f"unique-{i}"} for i in range(2 * cap)]
    a = WindowState.empty(None).add_batch(EventBatch.from_events(_events(common + flood[:cap])))
    b = WindowState.empty(None).add_batch(EventBatch.from_events(_events(flood[cap:])))
    for state in (a, b, a.merge(b), b.merge(a)):
        categories = state.features["c"].categories
        assert len(categories) <= cap + 1
        assert sum(categories.values()) == state.events
    merged = a.merge(b)
    assert all(merged.features["c"].categories[f"common-{i}"] == 3 * cap // 5 for i in range(5))  # top-k exact
    assert merged.features["c"].categories[OTHER_CATEGORY] == merged.events - 3 * cap - (cap - 5)
    assert a.merge(b).features["c"].categories == b.merge(a).features["c"].categories
    decoded = WindowState.from_bytes(merged.to_bytes())
    assert decoded.features["c"].categories == merged.features["c"].categories

    baseline = compute_baseline(pd.DataFrame({"c": [f"common-{i % 5}" for i in range(1_000)]}), categorical=["c"])
    capped = WindowState.empty(baseline).add_batch(EventBatch.from_events(_events(common + flood)))
    unseen = next(r for r in data_quality(baseline, capped, WindowThresholds())
                  if r.metric == "unseen_category_share")
    assert unseen.value == pytest.approx(len(flood) / (len(common) + len(flood)))
    assert unseen.breached
    evaluate_window(baseline, capped)  # chi2 / JS / PSI over the capped categories


def test_long_category_values_are_cut_to_the_documented_length():
    long = "v" * 10_000
    assert category_key(long) == "v" * defaults.CATEGORY_MAX_CHARS
    state = WindowState.empty(None).add_batch(EventBatch.from_events(_events([{"c": long}, {"c": long + "w"}])))
    assert state.features["c"].categories == {"v" * defaults.CATEGORY_MAX_CHARS: 2}


def test_a_label_summary_skips_pairs_beyond_the_magnitude_bound():
    summary = LabelSummary(task="regression").add([1.0, 2.0, 1e300], [1.5, -1e200, 2.0])
    assert (summary.n, summary.out_of_range) == (1, 2)
    restored = LabelSummary.from_dict(summary.to_dict())
    assert restored.out_of_range == 2 and restored.merge(summary).out_of_range == 4
