"""Window states with segments: per-value sub-states that merge, encode and stay bounded, whatever the values."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftline.baseline import compute_baseline
from driftline.segments import NULL_KEY, OTHER_KEY, SegmentSpec, segment_name
from driftline.events import SEGMENT_CHARS
from driftline.window_state import EventBatch, WindowState
from driftline.window_state.codec import pack_document

SPEC = SegmentSpec(columns=("region", "shop"), max_values=3)


@pytest.fixture(scope="module")
def baseline():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=3000), "region": rng.choice(["north", "south", "east"], 3000)})
    return compute_baseline(frame, predictions=rng.random(3000))


def make_events(rng, n, regions=("north", "south", "east"), shops=5, start=0):
    return [{"event_id": f"e{start + i}", "ts_ms": 1_000 + start + i,
             "features": {"x": float(rng.normal()), "region": regions[int(rng.integers(len(regions)))]},
             "prediction": float(rng.random()), "latency_ms": {"total": float(rng.uniform(1, 9))}, "status": "ok",
             "tags": {"shop": f"shop{int(rng.integers(shops))}"}} for i in range(n)]


def state_of(baseline, events, spec=SPEC):
    return WindowState.empty(baseline, segments=spec).add_batch(EventBatch.from_events(events))


def counts(state):
    return {column: {key: sub.events for key, sub in by_value.items()} for column, by_value in state.segments.items()}


def test_each_event_is_counted_once_per_column_and_sub_states_are_whole_states(baseline):
    events = make_events(np.random.default_rng(1), 900)
    state = state_of(baseline, events)
    for column in SPEC.columns:
        assert sum(counts(state)[column].values()) == state.events == 900
    north = state.segments["region"]["north"]
    assert north.events == sum(e["features"]["region"] == "north" for e in events)
    assert north.features["x"].counts.sum() == north.events  # binned on the whole baseline's edges
    assert north.sample == [] and north.segments == {}
    assert north.latency["total"].count == north.events


def test_the_blob_round_trips_and_a_state_without_segments_is_unchanged(baseline):
    events = make_events(np.random.default_rng(2), 500)
    state = state_of(baseline, events)
    again = WindowState.from_bytes(state.to_bytes(), baseline)
    assert counts(again) == counts(state)
    assert again.segments["shop"]["shop1"].features["x"].counts.tolist() == \
        state.segments["shop"]["shop1"].features["x"].counts.tolist()
    plain = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    assert plain.segments == {} and "segments" not in plain._document()


def test_a_format_1_blob_reads_as_a_state_without_segments(baseline):
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(make_events(np.random.default_rng(3), 50)))
    old = pack_document({**state._document(), "format": 1})
    read = WindowState.from_bytes(old, baseline)
    assert read.events == 50 and read.segments == {}
    merged = read.merge(state_of(baseline, make_events(np.random.default_rng(4), 20, start=100)))
    assert merged.events == 70 and sum(counts(merged)["region"].values()) == 20  # segments count what tracked them


def test_values_beyond_the_tracking_bound_fold_into_other_and_evaluation_keeps_the_largest(baseline):
    spec = SegmentSpec(columns=("shop",), max_values=2)  # tracks 6 values per column
    events = make_events(np.random.default_rng(5), 2000, shops=20)
    state = state_of(baseline, events, spec)
    shops = counts(state)["shop"]
    assert len(shops) == spec.track + 1 and sum(shops.values()) == 2000 and shops[OTHER_KEY] > 0
    top = state.segment_states("shop", 2)
    assert len(top) == 3 and sum(s.events for s in top.values()) == 2000
    kept = sorted((k for k in shops if k != OTHER_KEY), key=lambda k: (-shops[k], k))[:2]
    assert set(top) == {*kept, OTHER_KEY}


def test_hostile_segment_values_stay_bounded_and_named_within_the_store_limit(baseline):
    huge = "x" * 5_000
    values = [None, float("nan"), huge, huge + "y", "\x00nul", {"a": 1}, [1, 2], 7, 7.0, True, ""]
    events = [{"event_id": f"h{i}", "ts_ms": 1_000 + i, "features": {"x": 0.5, "region": v}, "prediction": 0.5,
               "latency_ms": {"total": 1.0}, "status": "ok"} for i, v in enumerate(values)]
    state = state_of(baseline, events, SegmentSpec(columns=("region",), max_values=20))
    keys = counts(state)["region"]
    assert sum(keys.values()) == len(values)
    assert keys[NULL_KEY] == 2  # None and NaN are one null segment
    assert keys["x" * 100] == 2  # values are keyed by their first 100 characters
    assert keys["7"] == 2  # 7 and 7.0 are one value, as categories are
    names = [segment_name("region" * 40, key) for key in keys]
    assert all(len(n) <= SEGMENT_CHARS and "\x00" not in n for n in names)
    assert WindowState.from_bytes(state.to_bytes(), baseline).events == len(values)

    flood = [{"event_id": f"f{i}", "ts_ms": 1_000, "features": {"x": 0.1, "region": f"value-{i}"}, "prediction": 0.5,
              "latency_ms": {"total": 1.0}, "status": "ok"} for i in range(10_000)]
    flooded = state_of(baseline, flood, SegmentSpec(columns=("region",)))
    assert len(flooded.segments["region"]) == SegmentSpec().track + 1
    assert flooded.segments["region"][OTHER_KEY].events == 10_000 - SegmentSpec().track
    assert len(flooded.to_bytes()) < 2_000_000


def test_tags_without_any_event_carrying_them_are_one_null_segment(baseline):
    events = make_events(np.random.default_rng(6), 30)
    for e in events:
        del e["tags"]
    assert counts(state_of(baseline, events))["shop"] == {NULL_KEY: 30}


def _split_states(baseline, parts):
    return [state_of(baseline, part) if part else WindowState.empty(baseline, segments=SPEC) for part in parts]


def summary(state):
    return {column: {key: (sub.events, sub.features["x"].counts.tolist() if "x" in sub.features else None)
                     for key, sub in sorted(by_value.items())} for column, by_value in sorted(state.segments.items())}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 300), min_size=2, max_size=2))
def test_merge_is_associative_and_commutative_while_values_fit_the_bound(baseline, seed, cuts):
    events = make_events(np.random.default_rng(seed), 300, shops=4)  # 3 regions and 4 shops: under the bound
    low, high = sorted(cuts)
    a, b, c = _split_states(baseline, [events[:low], events[low:high], events[high:]])
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    whole = state_of(baseline, events)
    assert summary(left) == summary(right) == summary(c.merge(a).merge(b)) == summary(whole)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shops=st.integers(1, 40))
def test_merges_over_the_bound_count_every_event_once_and_stay_bounded(baseline, seed, shops):
    rng = np.random.default_rng(seed)
    parts = [make_events(rng, 120, shops=shops, start=k * 1000) for k in range(4)]
    states = _split_states(baseline, parts)
    for merged in (states[0].merge(states[1]).merge(states[2].merge(states[3])),
                   states[3].merge(states[2]).merge(states[1]).merge(states[0])):
        by_shop = counts(merged)["shop"]
        assert sum(by_shop.values()) == 480
        assert len([k for k in by_shop if k != OTHER_KEY]) <= SPEC.track


def test_joined_labels_count_in_their_predictions_segments_and_round_trip(baseline):
    state = WindowState.empty(baseline, segments=SegmentSpec(columns=("region", "shop"), max_values=1))  # tracks 3 each
    kept = [{"region": "north", "shop": "a"}, {"region": "north"}, {"region": NULL_KEY, "shop": "b"}, None,
            "not a mapping", {"region": 7}, {"region": "south"}, {"region": "east"}]
    predictions = [0.9, 0.1, 0.8, 0.2, 0.7, 0.6, 0.3, 0.4]
    state.add_labels(predictions, [1, 0, 1, 0, 1, 1, 0, 0], kept)
    assert state.labels.n == 8
    regions = {key: sub.labels.n for key, sub in state.segments["region"].items()}
    # north, then the 1-pair values by key: "7" and the null key are tracked, south and east are "other"
    assert regions == {"north": 2, "7": 1, NULL_KEY: 1, OTHER_KEY: 2}
    assert {key: sub.labels.n for key, sub in state.segments["shop"].items()} == {"a": 1, "b": 1}
    assert all(sub.events == 0 and sub.labels.task == "binary" for sub in state.segments["region"].values())
    again = WindowState.from_bytes(state.to_bytes(), baseline)
    assert {key: sub.labels.n for key, sub in again.segments["region"].items()} == regions
    # a pair the window cannot count (a class name in a binary window) is counted nowhere
    with pytest.raises(ValueError):
        state.add_labels(["cat"], [1], [{"region": "north"}])
    assert state.labels.n == 8 and state.segments["region"]["north"].labels.n == 2
    # a state without segments counts the pairs for the whole window only
    plain = WindowState.empty(baseline).add_labels(predictions, [1] * 8, kept)
    assert plain.labels.n == 8 and plain.segments == {}


def _plain(value):
    """A state document as comparable values (arrays as lists; dict order ignored by ==)."""
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _hostile_events(rng, n):
    events = make_events(rng, n)
    odd = [None, float("nan"), "x" * 300, "\x00", 7, 7.0, True, [1], {"a": 1}, float("inf"), -1e300, 1e308]
    for i, e in enumerate(events):
        if i % 7 == 0:
            e["features"]["x"] = odd[i % len(odd)]  # a numeric feature that gets anything
        if i % 11 == 0:
            del e["features"]["x"]  # absent
        if i % 13 == 0:
            e["features"]["region"] = odd[(i // 13) % len(odd)]
        if i % 5 == 0:
            e["features"]["new"] = "only some events"  # a feature the baseline lacks
        e["prediction"] = None if i % 17 == 0 else e["prediction"]
        e["cache_hit"], e["batch_size"] = bool(i % 2), (i % 4) or None
        e["status"] = "error" if i % 9 == 0 else "ok"
    return events


@pytest.mark.parametrize("kind", ["plain", "hostile", "no_baseline", "classes"])
def test_the_grouped_fold_leaves_each_sub_state_as_its_own_sub_batch_would(baseline, kind):
    from driftline.window_state.grouped import fold_groups

    rng = np.random.default_rng(12)
    with_baseline = None if kind == "no_baseline" else baseline
    grouped = [WindowState(with_baseline, 0) for _ in range(4)]
    each = [WindowState(with_baseline, 0) for _ in range(4)]
    for round_ in range(3):  # later batches fold into the sub-states the first ones made
        events = _hostile_events(rng, 400) if kind in ("hostile", "no_baseline") else make_events(rng, 400)
        if kind == "classes":
            for e in events:
                e["prediction"] = "yes" if e["prediction"] > 0.5 else "no"
        batch = EventBatch.from_events(events)
        groups = rng.integers(0, 3 if round_ == 0 else 4, batch.n)  # the 4th group first appears later
        fold_groups(grouped, batch, groups)
        for g, state in enumerate(each):
            rows = np.flatnonzero(groups == g)
            if rows.size:
                state.add_batch(batch.take(rows))
    for mine, theirs in zip(grouped, each):
        assert mine.events > 0 and _plain(mine._document()) == _plain(theirs._document())
