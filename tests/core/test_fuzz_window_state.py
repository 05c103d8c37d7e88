"""Property tests: window states built from extreme values encode, decode and merge soundly.

Whatever the numbers (huge, tiny, mixed with strings and nulls), a state built by `add_batch`
never holds a non-finite number, round-trips through its blob, and merges associatively
(below the category cap, exactly; above it, the counts still add up).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftline.baseline import compute_baseline
from driftline.window_state import EventBatch, WindowState, WindowStateError

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASELINE = compute_baseline(pd.DataFrame({"x": np.random.default_rng(3).normal(size=2_000),
                                          "c": np.random.default_rng(4).choice(["a", "b", "c"], 2_000)}),
                            categorical=["c"], predictions=np.random.default_rng(5).random(2_000))

extreme = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2 ** 63), 2 ** 63 - 1),
                    st.sampled_from([1e200, -1e300, 1e50, -1e51, 5e-324, 1.7976931348623157e308]))
feature_values = st.one_of(st.none(), extreme, st.text(max_size=8), st.booleans())


@st.composite
def batches(draw, start: int = 0) -> list[dict]:
    n = draw(st.integers(1, 12))
    return [{"schema": "driftline.inference/v1", "event_id": f"e{start + i}-{draw(st.integers(0, 10 ** 6))}",
             "ts_ms": 1_790_000_000_000 + i, "model": "m", "version": "1",
             "features": {"x": draw(feature_values), "c": draw(feature_values)},
             "prediction": draw(st.one_of(extreme, st.floats(0, 1))),
             "latency_ms": {"total": draw(st.one_of(st.floats(0, 1e308), st.integers(0, 2 ** 63 - 1)))},
             "status": "ok"} for i in range(n)]


def _state(events: list[dict], baseline=BASELINE) -> WindowState:
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    labels = [e["prediction"] for e in events]
    try:
        state.add_labels([e["prediction"] for e in events], labels)
    except ValueError:
        pass  # a task the values do not fit (class labels for a regression): refused as a whole, not our concern
    return state


def _finite_everywhere(state: WindowState) -> None:
    assert state.nonfinite_field() is None
    for window in list(state.features.values()) + [state.prediction]:
        assert math.isfinite(window.total) and math.isfinite(window.total_sq)


@SETTINGS
@given(batches(), st.booleans())
def test_a_state_never_holds_a_non_finite_sum_and_round_trips(events, with_baseline):
    baseline = BASELINE if with_baseline else None
    state = _state(events, baseline)
    _finite_everywhere(state)
    blob = state.to_bytes()  # only WindowStateError may escape, and it must not for a folded state
    decoded = WindowState.from_bytes(blob, baseline)
    _finite_everywhere(decoded)
    assert decoded.to_bytes() == blob
    assert decoded.events == len(events)


@SETTINGS
@given(batches(0), batches(100), batches(200))
def test_merging_is_associative_and_keeps_every_count(a, b, c):
    x, y, z = _state(a), _state(b), _state(c)
    left, right = x.merge(y).merge(z), x.merge(y.merge(z))
    assert left.events == right.events == len(a) + len(b) + len(c)
    for name in ("x", "c"):
        mine, theirs = left.features[name], right.features[name]
        assert (mine.count, mine.nonfinite, mine.nulls, mine.categories) == (
            theirs.count, theirs.nonfinite, theirs.nulls, theirs.categories)
        assert np.array_equal(mine.counts, theirs.counts)
        assert math.isclose(mine.total, theirs.total, rel_tol=1e-9, abs_tol=1e-6 * max(1.0, abs(mine.total)))
    _finite_everywhere(left)
    assert WindowState.from_bytes(left.to_bytes(), BASELINE).events == left.events


@SETTINGS
@given(batches(), st.sampled_from(["total", "total_sq"]), st.sampled_from([math.inf, -math.inf, math.nan]))
def test_encoding_a_non_finite_number_raises_only_the_typed_error(events, field, value):
    state = _state(events)
    setattr(state.features["x"], field, value)
    try:
        blob = state.to_bytes()
    except WindowStateError as error:
        assert error.where.startswith("features.x")
    else:  # only when the feature has no numbers, whose moments a blob does not carry
        assert state.features["x"].count == 0
        _finite_everywhere(WindowState.from_bytes(blob, BASELINE))
