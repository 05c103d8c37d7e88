"""evaluate_window's `WindowOutcome`: status, results and their summary from real detector output, segments and
the labels pooled from earlier windows taken as inputs, the input state left as it was."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftline import vocabulary
from driftline.baseline import LabelSummary, compute_baseline
from driftline.detectors.families.pooled_labels import PooledLabels, pooling_wanted
from driftline.detectors.families.run import run_families
from driftline.detectors.families.window import WindowOutcome, evaluate_window
from driftline.segments import SegmentSpec
from driftline.window_state import EventBatch, WindowState

T0 = 1_796_040_000_000
SPEC = SegmentSpec(columns=("region",))


def frame(rng, n, north_shift=0.0):
    out = pd.DataFrame({"income": rng.normal(50, 10, n), "age": rng.normal(40, 8, n),
                        "region": rng.choice(["north", "south", "east"], n, p=[0.3, 0.35, 0.35])})
    out.loc[out["region"] == "north", "income"] += north_shift
    return out


def scores_of(rows: pd.DataFrame) -> np.ndarray:
    return 1 / (1 + np.exp(-(rows["income"].to_numpy() - 50) / 10))


@pytest.fixture(scope="module")
def baseline():
    rng = np.random.default_rng(5)
    rows = frame(rng, 6000)
    scores = scores_of(rows)
    return compute_baseline(rows, predictions=scores, labels=(rng.uniform(size=6000) < scores).astype(int))


def state_of(baseline, seed, n=1500, *, shift=0.0, north_shift=0.0, labels=0, segments=SegmentSpec()):
    rng = np.random.default_rng(seed)
    rows = frame(rng, n, north_shift)
    rows["income"] += shift
    scores = scores_of(rows)
    events = [{"event_id": f"e{seed}-{i}", "ts_ms": T0 + i, "model": "m", "version": "1", "features": row,
               "prediction": float(scores[i]), "latency_ms": {"total": 10.0}, "status": "ok"}
              for i, row in enumerate(rows.to_dict(orient="records"))]
    state = WindowState.empty(baseline, segments=segments).add_batch(EventBatch.from_events(events))
    if labels:
        state.add_labels(scores[:labels], (rng.uniform(size=labels) < scores[:labels]).astype(int))
    return state


def labels_of(seed, n):
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=n)
    return LabelSummary().add(scores, (rng.uniform(size=n) < scores).astype(int))


def test_a_quiet_window_is_ok_with_every_familys_results_and_nothing_breached(baseline):
    state = state_of(baseline, 1)
    outcome = evaluate_window(baseline, state)
    assert isinstance(outcome, WindowOutcome)
    assert outcome.status == vocabulary.WINDOW_OK
    assert outcome.breached == () and outcome.segments_breached == () and outcome.threshold_note is None
    assert outcome.results and not any(r.segment for r in outcome.results)
    # the outcome holds exactly what the families found, and the check of the estimates (no labels: not judged)
    plain = run_families(baseline, state)
    checked = (vocabulary.ESTIMATED_QUALITY, vocabulary.ESTIMATION_INVALID, vocabulary.ESTIMATION_INVALID, False)
    assert [(r.detector, r.feature, r.metric, r.breached) for r in outcome.results] == \
        [(r.detector, r.feature, r.metric, r.breached) for r in plain] + [checked]


def test_a_shifted_window_names_its_breaches_from_the_results(baseline):
    outcome = evaluate_window(baseline, state_of(baseline, 2, shift=15.0))
    assert outcome.status == vocabulary.WINDOW_OK
    assert f"{vocabulary.DATA_DRIFT}:income" in outcome.breached
    assert "age" not in {name.partition(":")[2] for name in outcome.breached}
    assert list(outcome.breached) == sorted({f"{r.detector}:{r.feature}" if r.feature else r.detector
                                             for r in outcome.results if r.breached})


def test_without_a_baseline_only_latency_is_judged(baseline):
    outcome = evaluate_window(None, state_of(baseline, 3))
    assert outcome.status == vocabulary.WINDOW_NO_BASELINE
    assert outcome.results and {r.detector for r in outcome.results} == {vocabulary.LATENCY}


def test_a_tiny_window_is_insufficient_data_not_an_alarm(baseline):
    outcome = evaluate_window(baseline, state_of(baseline, 4, n=12, shift=40.0))
    assert outcome.status == vocabulary.WINDOW_INSUFFICIENT_DATA
    assert not any(name.startswith(vocabulary.DATA_DRIFT) for name in outcome.breached)


def test_segments_are_an_input_and_their_breaches_are_summarised_apart(baseline):
    state = state_of(baseline, 6, n=3000, north_shift=15.0, segments=SPEC)
    whole = evaluate_window(baseline, state)
    outcome = evaluate_window(baseline, state, segments=SPEC)
    assert whole.segments_breached == () and not any(r.segment for r in whole.results)
    assert f"region=north:{vocabulary.DATA_DRIFT}" in outcome.segments_breached
    assert not any(s.startswith(("region=south", "region=east")) and s.endswith(vocabulary.DATA_DRIFT)
                   for s in outcome.segments_breached)
    assert list(outcome.segments_breached) == sorted({f"{r.segment}:{r.detector}" for r in outcome.results
                                                      if r.breached and r.segment})
    # the whole population is judged as without segments
    assert outcome.breached == whole.breached
    assert [(r.detector, r.feature, r.metric, r.breached) for r in outcome.results if not r.segment] == \
        [(r.detector, r.feature, r.metric, r.breached) for r in whole.results]


def test_a_window_short_of_labels_pools_the_earlier_windows_given_and_keeps_its_own_state(baseline):
    state = state_of(baseline, 7, labels=50)
    earlier = PooledLabels(((T0 - 10_000, labels_of(1, 300)), (T0 - 10_000, labels_of(2, 300)),
                            (T0 - 20_000, labels_of(3, 600)), (T0 - 30_000, labels_of(4, 600))))
    outcome = evaluate_window(baseline, state, pooled_labels=earlier)
    quality = [r for r in outcome.results if r.detector == vocabulary.MODEL_QUALITY]
    assert quality
    for result in quality:  # two windows (the first written by two collectors) reach the 1000 labels
        assert (result.details["window_labels"], result.details["pooled_windows"],
                result.details["pooled_labels"]) == (50, 2, 1250)
    assert state.labels.n == 50  # the caller's state is not changed
    alone = evaluate_window(baseline, state)
    assert all("pooled_windows" not in r.details for r in alone.results)


def test_pooling_stops_at_the_minimum_and_skips_other_tasks():
    own = labels_of(9, 100)
    regression = LabelSummary().add(np.array([1.0, 2.0]), np.array([1.5, 2.5]))
    earlier = PooledLabels(((3, labels_of(10, 400)), (2, regression), (2, labels_of(11, 600)), (1, labels_of(12, 1))))
    pooled, windows = earlier.pool(own, min_labels=1_000)
    assert (pooled.n, windows) == (1_100, 2)  # window 1 is not needed; the regression part is left out
    assert own.n == 100
    assert earlier.pool(own, min_labels=50)[1] == 0  # enough of its own
    assert PooledLabels().pool(own, min_labels=1_000)[1] == 0
    assert pooling_wanted(own, 1_000) and not pooling_wanted(own, 100) and not pooling_wanted(LabelSummary(), 1_000)


def test_a_segment_whose_estimates_stop_holding_gets_its_own_estimation_invalid(baseline):
    # north's labels stop following the scores (label 1 at any score): its estimates miss, the others' hold
    from driftline.detectors.estimation.validity import WindowCheck

    rng = np.random.default_rng(8)
    rows = frame(rng, 3000)
    scores = scores_of(rows)
    events = [{"event_id": f"s{i}", "ts_ms": T0 + i, "model": "m", "version": "1", "features": row,
               "prediction": float(scores[i]), "latency_ms": {"total": 10.0}, "status": "ok"}
              for i, row in enumerate(rows.to_dict(orient="records"))]
    state = WindowState.empty(baseline, segments=SPEC).add_batch(EventBatch.from_events(events))
    north = (rows["region"] == "north").to_numpy()
    labels = np.where(north, 1, (rng.uniform(size=3000) < scores).astype(int))
    state.add_labels(scores, labels, [{"region": r} for r in rows["region"]])
    missed = WindowCheck((vocabulary.ACCURACY,), T0 - 3_600_000)
    outcome = evaluate_window(baseline, state, segments=SPEC, estimate_history=[WindowCheck(window_start_ms=T0 - 1)],
                              segment_estimate_history={"region=north": [missed]})
    invalid = {r.segment: r for r in outcome.results if r.metric == vocabulary.ESTIMATION_INVALID}
    assert set(invalid) == {"", "region=north", "region=south", "region=east"}
    assert invalid["region=north"].breached and invalid["region=north"].details["missed"]
    assert invalid["region=north"].details["labelled_windows"] == 2  # its own history, not the population's
    assert not invalid["region=south"].breached and invalid["region=south"].details["missed"] == []
    assert f"region=north:{vocabulary.ESTIMATED_QUALITY}" in outcome.segments_breached
