"""Unknown feature names are bounded: per event, per window state, in merges, in segments.

Every feature name got its own feature window, data-quality result and alert: one valid event of
40 000 keys wrote 40 004 results, and 1 000 events of 50 unique keys each 50 000. Counts, not time
(the CPU per event is in bench/feature_flood.py).
"""
from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pytest

from driftline import defaults
from driftline.baseline import compute_baseline
from driftline.collector.event_columns import parse_inference_columns
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.detectors.families.data_quality import data_quality
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.events import EventError, parse_inference
from driftline.vocabulary import NEW_FEATURE_SHARE
from driftline.window_state import OTHER_FEATURES, EventBatch, WindowState
from driftline.window_state.grouped import fold_groups

CAP = defaults.WINDOW_MAX_NEW_FEATURES
T0 = 1_790_000_000_000


def _event(i: int, features: dict) -> dict:
    return {"schema": "driftline.inference/v1", "event_id": f"e{i}", "ts": T0 + i, "model": "m", "version": "1",
            "features": features, "prediction": 0.5, "latency_ms": {"total": 2.0}}


def _flood(n: int, unique: int, start: int = 0, extra: dict | None = None) -> list[dict]:
    """`n` events with the baseline's features, `extra`, and `unique` names no other event carries."""
    return [_event(i, {"x": float(i % 7), "c": "a", **(extra or {}), **{f"u{i}_{j}": j for j in range(unique)}})
            for i in range(start, start + n)]


def _baseline():
    rng = np.random.default_rng(3)
    return compute_baseline(pd.DataFrame({"x": rng.normal(size=500), "c": rng.choice(["a", "b"], 500)}),
                            categorical=["c"])


def _folded(events: list[dict], baseline) -> list[WindowState]:
    folder = InferenceFolder("driftline.inference", 0, FolderSetup(3_600_000, 0, 100_000, clock=lambda: T0 / 1000),
                             lambda m, v: baseline, lambda m, v: None)
    values = [orjson.dumps(e) for e in events]
    for start in range(0, len(values), 250):  # polls of 250
        folder.process(list(range(start, min(start + 250, len(values)))), values[start:start + 250])
    delta = folder.take()
    assert delta.dead_letters == []
    return [partial.state for partial in delta.windows.values()]


def _other_values(state: WindowState) -> int:
    return sum(state.features[OTHER_FEATURES].categories.values())


def test_an_event_over_the_feature_cap_is_refused_with_its_reason():
    wide = orjson.dumps(_event(0, {f"k{j}": j for j in range(40_000)}))
    assert len(wide) > 400_000
    with pytest.raises(EventError) as raised:
        parse_inference(wide)
    assert raised.value.field == "features" and f"above the limit of {defaults.EVENT_MAX_FEATURES}" in str(raised.value)
    folder = InferenceFolder("driftline.inference", 0, FolderSetup(60_000, 0, 1_000, clock=lambda: T0 / 1000),
                             lambda m, v: None, lambda m, v: None)
    folder.process([7], [wide])
    delta = folder.take()
    assert delta.windows == {} and [(d.offset, d.field) for d in delta.dead_letters] == [(7, "features")]
    assert parse_inference(orjson.dumps(_event(0, {f"k{j}": j for j in range(defaults.EVENT_MAX_FEATURES)})))


def test_a_thousand_events_of_fifty_unique_names_make_a_bounded_state_and_one_result():
    baseline = _baseline()
    (state,) = _folded(_flood(1_000, 50), baseline)
    assert state.events == 1_000
    assert len(state.features) <= 2 + CAP + 1  # the baseline's, the bound, "other"
    assert _other_values(state) + sum(w.count for n, w in state.features.items()
                                      if n not in ("x", "c", OTHER_FEATURES)) == 50_000  # every value counted
    assert len(state.features[OTHER_FEATURES].categories) <= defaults.CATEGORY_MAX_DISTINCT + 1
    assert state.features[OTHER_FEATURES].absent == 0  # every event carried one
    results = data_quality(baseline, state, WindowThresholds())
    new = [r for r in results if r.metric == NEW_FEATURE_SHARE]
    assert len(new) <= CAP + 1 and len(results) <= 4 * 2 + CAP + 1
    other = next(r for r in new if r.feature == OTHER_FEATURES)
    assert other.value == 1.0 and other.breached and len(other.details["names"]) == 10
    decoded = WindowState.from_bytes(state.to_bytes(), baseline)
    assert decoded.features[OTHER_FEATURES].categories == state.features[OTHER_FEATURES].categories


def test_a_real_new_feature_keeps_its_own_window_through_a_flood():
    baseline = _baseline()
    (state,) = _folded(_flood(1_000, 50, extra={"added": 1.5}), baseline)
    assert state.features["added"].count == 1_000 and state.features["added"].absent == 0


def test_new_names_up_to_the_bound_are_counted_apart_and_their_absence_too():
    baseline = _baseline()
    few = [_event(i, {"x": 1.0, "c": "a", "new1": 1, "new2": "v"}) for i in range(30)]
    without = [_event(i, {"x": 1.0, "c": "a"}) for i in range(30, 100)]
    (state,) = _folded(few + without, baseline)
    assert OTHER_FEATURES not in state.features
    assert (state.features["new1"].count, state.features["new1"].absent) == (30, 70)
    share = next(r for r in data_quality(baseline, state, WindowThresholds())
                 if r.metric == NEW_FEATURE_SHARE and r.feature == "new1")
    assert share.value == pytest.approx(0.3)


def test_a_merge_of_states_that_admitted_different_names_stays_bounded_and_commutative():
    baseline = _baseline()
    a = WindowState.empty(baseline).add_batch(EventBatch.from_events(
        [_event(i, {"x": 1.0, "c": "a", **{f"a{k}": k for k in range(CAP)}}) for i in range(20)]))
    b = WindowState.empty(baseline).add_batch(EventBatch.from_events(
        [_event(i, {"x": 1.0, "c": "a", **{f"b{k}": k for k in range(CAP)}}) for i in range(10)]))
    assert OTHER_FEATURES not in a.features and OTHER_FEATURES not in b.features
    ab, ba = a.merge(b), b.merge(a)
    for merged in (ab, ba):
        assert len(merged.features) == 2 + CAP + 1
        assert all(f"a{k}" in merged.features for k in range(CAP))  # more values: kept
        other = merged.features[OTHER_FEATURES]
        assert other.categories == {f"b{k}": 10 for k in range(CAP)}
        assert other.absent == 20  # b's 10 events carried them
    assert {n: w.absent for n, w in ab.features.items()} == {n: w.absent for n, w in ba.features.items()}
    assert WindowState.merge_all([ab, a, b]).features.keys() <= ab.features.keys()


def test_a_name_posing_as_the_other_entry_is_counted_in_it():
    state = WindowState.empty(None).add_batch(EventBatch.from_events(
        [_event(i, {"x": 1.0, OTHER_FEATURES: "sneaky"}) for i in range(5)]))
    assert state.features[OTHER_FEATURES].categories == {OTHER_FEATURES: 5}


def test_segments_fold_a_flood_as_their_own_add_batch_would():
    baseline = _baseline()
    batch = EventBatch.from_events(_flood(300, 5) + [_event(400 + i, {"x": 2.0, "c": "b", **{f"n{k}": k for k in range(
        CAP + 20)}}) for i in range(3)])
    groups = np.arange(batch.n) % 3
    together = [WindowState(baseline, 0) for _ in range(3)]
    fold_groups(together, batch, groups)
    for g in range(3):
        alone = WindowState(baseline, 0).add_batch(batch.take(np.flatnonzero(groups == g)))
        assert together[g].to_bytes() == alone.to_bytes()
        assert len(alone.features) <= 2 + CAP + 1


def test_the_columnar_decoder_refuses_a_batch_of_new_names_instead_of_widening():
    same = [orjson.dumps(e) for e in _flood(50, 0)]
    assert parse_inference_columns(same) is not None
    assert parse_inference_columns([orjson.dumps(e) for e in _flood(50, 3)]) is None
    assert parse_inference_columns(same + [orjson.dumps(_event(99, {"x": 1.0, "c": "a", "late": 1}))]) is None
    wide = orjson.dumps(_event(0, {f"k{j}": j for j in range(5_000)}))
    assert parse_inference_columns([wide]) is None
