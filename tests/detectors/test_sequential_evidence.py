"""Sequential evidence: the e-detector's false-page rate on no-drift streams, its speed on drift, and its rules."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftline import defaults
from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.families.evidence import EVIDENCE_KEY, PagingPolicy, StreamState, advance_window
from driftline.detectors.families.results import WindowResult
from driftline.detectors.stats.noise import distance_excess
from driftline.detectors.stats.sequential import arl_threshold, cusum_step, evidence, window_z
from driftline.vocabulary import (DATA_DRIFT, DATASET_DRIFT, DRIFTED_SHARE, ESTIMATED_QUALITY, JENSENSHANNON,
                                  MODEL_QUALITY, PSI, WASSERSTEIN)

DRIFTS = np.asarray(defaults.SEQUENTIAL_DRIFTS)


def _pages(p_values: np.ndarray, line: float) -> int:
    """Pages of one stream over its windows: each crossing of the line, restarted once it falls back."""
    state, above, pages = np.zeros(DRIFTS.size), False, 0
    for p in p_values:
        state = cusum_step(state, float(window_z(p)), DRIFTS)
        now = evidence(state) >= math.log(line)
        if now and not above:
            pages += 1
        if above and not now:
            state = np.zeros(DRIFTS.size)
        above = now
    return pages


def _slack(expected: float) -> float:
    """Monte Carlo slack: the bound plus four Poisson standard deviations."""
    return expected + 4.0 * math.sqrt(max(expected, 1.0))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31), line=st.sampled_from([20.0, 50.0, 200.0]),
       discrete=st.sampled_from([None, 5, 40]))
def test_false_alarms_of_the_e_detector_stay_under_one_per_line_of_windows(seed, line, discrete):
    """Uniform p-values, or conservative discrete ones (a test with ties): at most windows / A false pages."""
    rng = np.random.default_rng(seed)
    streams, windows = 20, 400
    p = rng.uniform(size=(streams, windows))
    if discrete:  # rounded up to a grid: P(p <= u) <= u, as a discrete test's p-value is
        p = np.ceil(p * discrete) / discrete
    pages = sum(_pages(row, line) for row in p)
    assert pages <= _slack(streams * windows / line), f"{pages} false pages over {streams * windows} windows at A={line}"


def _frame(rng: np.random.Generator, n: int, shape: str, shift: float = 0.0) -> pd.DataFrame:
    if shape == "skewed":
        values = rng.lognormal(0.0, 1.0, n) * (1.0 + shift)
    elif shape == "ties":
        values = rng.poisson(3.0 * (1.0 + shift), n).astype(float)
    elif shape == "zero_inflated":
        values = np.where(rng.uniform(size=n) < 0.6, 0.0, rng.exponential(1.0 + shift, n))
    else:
        values = rng.standard_t(3, n) + shift
    return pd.DataFrame({"x": values, "y": rng.normal(size=n),
                         "c": rng.choice(np.array([f"k{i}" for i in range(30)]), n)})


def _stream_results(reference: pd.DataFrame, current: pd.DataFrame, rows: int) -> list[list[WindowResult]]:
    """Each window's per-feature drift results as the service's detectors write them (kind and annotated tests)."""
    report = detect(reference, current, columns=ColumnRoles(categorical=["c"]), windowing=Windowing(chunk_size=rows),
                    judging=Judging(multivariate=False), workers=1)
    return [[WindowResult(DATA_DRIFT, f["name"], PSI, f["tests"][PSI]["value"], None, bool(f["drift"]),
                          {"kind": f["kind"], "tests": f["tests"]}) for f in w["features"]]
            for w in report["windows"]]


def _page_count(windows: list[list[WindowResult]], policy: PagingPolicy) -> tuple[int, int | None]:
    """(pages, index of the first paging window) over a stream of windows."""
    states: dict[str, StreamState] = {}
    paging: dict[str, bool] = {}
    pages, first = 0, None
    for i, results in enumerate(windows):
        states.update(advance_window(results, states, i, policy))
        for r in results:
            now = bool(r.details[EVIDENCE_KEY]["paging"])
            if now and not paging.get(r.feature):
                pages += 1
                first = i if first is None else first
            paging[r.feature] = now
    return pages, first


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31), shape=st.sampled_from(["skewed", "ties", "zero_inflated", "heavy"]),
       rows=st.sampled_from([100, 300]))
def test_false_page_rate_of_the_real_detectors_on_no_drift_streams_is_at_most_the_stated_rate(seed, shape, rows):
    """Generated no-drift streams through the real drift tests: pages at or under the stated rate.

    The rate is set high (a line of 30 for three streams) so that a few hundred windows measure it.
    """
    rng = np.random.default_rng(seed)
    windows = 150
    reference = _frame(rng, 20_000, shape)
    current = _frame(rng, rows * windows, shape)
    streams = 3
    # one month of one-hour windows (720), at a rate that makes the line 30: 72 false pages a month allowed
    policy = PagingPolicy(false_pages_per_model_per_month=streams * 720 / 30.0, window_seconds=3600, minimum=1.0)
    assert policy.line(streams) == pytest.approx(30.0)
    pages, _ = _page_count(_stream_results(reference, current, rows), policy)
    allowed = streams * windows / policy.line(streams)
    assert pages <= _slack(allowed), f"{pages} false pages in {windows} windows of {streams} streams, allowed {allowed}"


def test_a_persistent_drift_too_small_for_one_window_pages_before_three_breaches_in_a_row():
    rng = np.random.default_rng(3)
    reference = _frame(rng, 20_000, "heavy")
    # a shift of 0.23 is 0.13 of t(3)'s standard deviation: over the floor by about the 500-row noise, power one half
    current = _frame(rng, 500 * 12, "heavy", shift=0.23)
    windows = _stream_results(reference, current, 500)
    flagged = [r.breached for w in windows for r in w if r.feature == "x"]
    runs = [all(flagged[i - 2:i + 1]) for i in range(2, len(flagged))]
    _, first = _page_count(windows, PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600))
    assert 0 < sum(flagged) < len(flagged)  # the per-window rule flags some windows, not all ...
    assert first is not None and first <= 6, f"first page at window {first}"  # ... the evidence adds them up
    assert first < (runs.index(True) + 2 if True in runs else len(flagged))  # before K = 3 breaches in a row


def test_a_huge_window_with_a_trivial_shift_never_pages():
    rng = np.random.default_rng(4)
    reference = _frame(rng, 50_000, "heavy")
    current = _frame(rng, 40_000 * 4, "heavy", shift=0.03)
    windows = _stream_results(reference, current, 40_000)
    pages, _ = _page_count(windows, PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600))
    x = [w[0] for w in windows]
    assert x[-1].details[EVIDENCE_KEY]["e_value"] > 1.0  # evidence of a change ...
    assert pages == 0  # ... but under every effect-size floor


def test_paging_line_follows_the_rate_and_the_window_length():
    hourly = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)
    assert hourly.line(14) == 14 * 720
    assert PagingPolicy(false_pages_per_model_per_month=2.0, window_seconds=60).line(14) == 14 * 43_200 / 2
    assert PagingPolicy(false_pages_per_model_per_month=1000.0, window_seconds=86_400).line(1) == defaults.SEQUENTIAL_MIN_E_VALUE
    with pytest.raises(ValueError, match="positive"):
        PagingPolicy(false_pages_per_model_per_month=0.0)
    with pytest.raises(ValueError, match="positive"):
        arl_threshold(0, 1.0, 3)


def test_state_round_trips_and_a_bad_stored_state_starts_afresh():
    state = StreamState([1.5, -2.0], [10, None], windows=3, last_window_start_ms=10, above=True)
    assert StreamState.from_dict(state.to_dict(), 2) == state
    assert StreamState.from_dict({"log_state": [float("nan"), 1.0]}, 2) == StreamState.fresh(2)
    assert StreamState.from_dict({"log_state": [1.0]}, 2) == StreamState.fresh(2)
    assert StreamState.from_dict("garbage", 2) == StreamState.fresh(2)


def _drift(feature: str, p: float, psi: float) -> WindowResult:
    tests = {"ks": {"p_value": p}, PSI: {"value": psi, "threshold": 0.2}}
    return WindowResult(DATA_DRIFT, feature, PSI, psi, 0.2, False, {"kind": "numeric", "tests": tests})


def test_a_window_steps_each_stream_once_and_the_dataset_verdict_follows_the_features():
    policy = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)
    results = [_drift("a", 1e-40, 0.5), _drift("b", 1e-40, 0.5), _drift("c", 0.5, 0.01),
               WindowResult(DATASET_DRIFT, None, DRIFTED_SHARE, 0.66, 0.5, True, {})]
    states = advance_window(results, {}, 1000, policy)
    assert set(states) == {"data_drift/a/psi", "data_drift/b/psi", "data_drift/c/psi"}
    assert [r.details[EVIDENCE_KEY]["paging"] for r in results[:3]] == [True, True, False]
    assert results[0].details[EVIDENCE_KEY]["since_window_start_ms"] == 1000
    assert results[3].details[EVIDENCE_KEY]["paging_features"] == ["a", "b"]
    assert results[3].details[EVIDENCE_KEY]["paging"] is True
    again = [_drift("a", 1e-40, 0.5)]
    assert advance_window(again, states, 1000, policy) == {}  # the same window again: no second step
    assert EVIDENCE_KEY not in again[0].details


def test_evidence_restarts_once_the_drift_ends():
    policy = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)
    states = advance_window([_drift("a", 1e-40, 0.5)], {}, 0, policy)
    assert states["data_drift/a/psi"].above
    restarted = None
    for t in range(1, 40):
        result = _drift("a", 0.5, 0.01)
        states.update(advance_window([result], states, t, policy))
        if result.details[EVIDENCE_KEY].get("restarted"):
            restarted = t
            break
    assert restarted is not None and restarted <= 15, restarted  # the evidence cap bounds the wait
    assert states["data_drift/a/psi"].log_state == [0.0] * DRIFTS.size


def test_estimated_quality_pages_on_a_drop_beyond_its_floor_only():
    policy = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)

    def estimate(value: float) -> WindowResult:
        return WindowResult(ESTIMATED_QUALITY, None, "roc_auc", value, 0.85, False,
                            {"training": 0.9, "standard_error": 0.002})

    small, big = estimate(0.88), estimate(0.80)  # both far beyond the noise; only one beyond max_drop
    advance_window([small], {}, 0, policy)
    advance_window([big], {}, 0, policy)
    assert small.details[EVIDENCE_KEY]["floor"] is False and not small.details[EVIDENCE_KEY]["paging"]
    assert big.details[EVIDENCE_KEY]["paging"] is True


def _realized(value: float, reference_rows: str | None = None, pooled: int = 1) -> WindowResult:
    details = {"training": 0.30, "standard_error": 0.02, "minimum_margin": 0.06, "z": 3.5, "pooled_windows": pooled,
               **({"reference_rows": reference_rows} if reference_rows else {})}
    return WindowResult(MODEL_QUALITY, None, "log_loss", value, 0.37, value > 0.37, details)


def test_realized_quality_against_an_in_sample_reference_is_judged_against_the_live_level():
    """The training rows' log loss (0.30) is optimistic: live windows at 0.45 +/- 0.05 breach it every time but
    never page; the stream learns their level first, then a real rise to 0.9 pages."""
    policy, states = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600), {}
    rng = np.random.default_rng(3)
    breaches = 0
    for t in range(40):
        result = _realized(float(rng.normal(0.45, 0.05)), "training rows")
        states.update(advance_window([result], states, t, policy))
        breaches += result.breached
        assert not result.details[EVIDENCE_KEY]["paging"]
    assert breaches > 30
    stored = StreamState.from_dict(states["model_quality//log_loss"].to_dict(), len(policy.drifts))
    assert stored.level_windows == defaults.QUALITY_LIVE_REFERENCE_WINDOWS
    assert 0.4 < stored.level_sum / stored.level_windows < 0.5
    risen = _realized(0.9, "training rows")
    advance_window([risen], {"model_quality//log_loss": stored}, 40, policy)
    assert risen.details[EVIDENCE_KEY]["paging"] is True
    # a holdout reference is judged against itself: the same live level pages within a few windows
    states = {}
    for t in range(5):
        held = _realized(0.45, "holdout")
        states.update(advance_window([held], states, t, policy))
    assert held.details[EVIDENCE_KEY]["paging"] is True
    # pooled over four windows, the same rise carries half the z
    alone, pooled = _realized(0.40), _realized(0.40, pooled=4)
    advance_window([alone, pooled], {}, 0, policy)
    assert pooled.details[EVIDENCE_KEY]["z"] == pytest.approx(alone.details[EVIDENCE_KEY]["z"] / 2)


def _distance(p: float, wasserstein: float, noise: float) -> WindowResult:
    tests = {"ks": {"p_value": p}, PSI: {"value": 0.02, "threshold": 0.2},
             WASSERSTEIN: {"value": wasserstein, "noise": noise, "threshold": 0.1}}
    return WindowResult(DATA_DRIFT, "x", PSI, 0.02, 0.2, False, {"kind": "numeric", "tests": tests})


def _first_page(wasserstein: float, noise: float, windows: int = 40) -> int | None:
    policy, states = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600), {}
    for t in range(windows):
        result = _distance(1e-6, wasserstein, noise)
        states.update(advance_window([result], states, t, policy))
        if result.details[EVIDENCE_KEY]["paging"]:
            return t
    return None


def test_the_wasserstein_floor_is_judged_on_the_runs_average_with_its_noise_removed_in_quadrature():
    """A drift 1.27 times its floor at 1 000 rows reads 0.89 times less the whole noise, window after window:
    it pages once a few windows are in; one under its floor never does, however long the evidence runs."""
    assert (0.127 - 0.038) / 0.1 < 1.0  # the per-window rule's margin
    assert _first_page(0.127, 0.038) == 3  # sqrt(0.127^2 - 0.038^2) - 0.038 / sqrt(4) >= 0.1
    assert _first_page(0.09, 0.038) is None
    assert _first_page(0.105, 0.0) == 0  # no noise: the distance as measured
    assert distance_excess(0.03, 0.038, 100) < 0 < distance_excess(0.2, 0.038, 1)


def _categories(js: float, noise: float) -> WindowResult:
    tests = {"chi2": {"p_value": 1e-6, "p_value_pooled": 1e-6}, PSI: {"value": 0.05, "noise": 0.04, "threshold": 0.2},
             JENSENSHANNON: {"value": js, "noise": noise, "threshold": 0.1}}
    return WindowResult(DATA_DRIFT, "x", PSI, 0.05, 0.2, False, {"kind": "categorical", "tests": tests})


def test_a_categorical_features_jensen_shannon_floor_is_judged_beyond_its_noise():
    """Over 300 categories at 10 000 rows the distance's noise is about 0.08: a distance of 0.105 window after window
    (a drift of sqrt(0.105² - 0.078²) = 0.07, under the floor) never pages; 0.14 (a drift of 0.116) does, the run's
    average judged in quadrature, where the whole noise off each window (0.062) would read it under the floor."""
    policy = PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600)

    def first_page(js: float, noise: float) -> int | None:
        states: dict[str, StreamState] = {}
        for t in range(40):
            result = _categories(js, noise)
            states.update(advance_window([result], states, t, policy))
            if result.details[EVIDENCE_KEY]["paging"]:
                return t
        return None

    assert first_page(0.105, 0.078) is None  # raw distance over the floor, drift 0.07 under it
    assert first_page(0.14, 0.078) is not None  # drift sqrt(0.14² - 0.078²) = 0.116
    assert first_page(0.105, 0.0) == 0  # no noise: the distance as measured


def test_window_z_is_the_normal_quantile_and_stays_finite():
    assert window_z(0.5) == pytest.approx(0.0)
    assert window_z(0.025) == pytest.approx(1.959964, rel=1e-5)
    assert np.isfinite(window_z([0.0, 1.0, float("nan")])).all()
    with pytest.raises(ValueError):
        cusum_step(np.zeros(2), 1.0, [0.0, 1.0])


def test_pooled_chi_square_holds_its_level_with_hundreds_of_categories_where_goodness_of_fit_does_not():
    from driftline.detectors.stats.two_sample import chi2, chi2_pooled

    rng = np.random.default_rng(11)
    shares = 1.0 / np.arange(1, 301) ** 1.1
    shares /= shares.sum()
    pooled, plain = [], []
    for _ in range(300):  # a fresh reference each time: the level is over references and windows
        reference, current = rng.multinomial(20_000, shares), rng.multinomial(1_000, shares)
        pooled.append(chi2_pooled(reference, current))
        plain.append(chi2(reference, current)[1])
    assert np.mean(np.asarray(pooled) < 0.05) <= 0.08
    assert np.mean(np.asarray(plain) < 0.05) >= 0.2  # why evidence does not read chi2's p-value
    tilted = shares * np.exp(0.3 * np.where(np.arange(300) % 2, 1.0, -1.0))
    drifted = rng.multinomial(1_000, tilted / tilted.sum())
    assert chi2_pooled(rng.multinomial(20_000, shares), drifted) < 1e-4


def test_the_floor_judges_the_effect_over_the_run_of_evidence_not_one_lucky_window():
    """A drift under its floor never pages on the window noise lifted over it; one over its floor pages."""
    policy = PagingPolicy(false_pages_per_model_per_month=720.0, window_seconds=3600, minimum=1.0)  # line 1: evidence at once

    def run(psis: list[float]) -> list[bool]:
        states: dict[str, StreamState] = {}
        paging = []
        for i, value in enumerate(psis):
            result = WindowResult(DATA_DRIFT, "x", PSI, value, 0.2, False,
                                  {"kind": "numeric", "tests": {"ks": {"p_value": 1e-6},
                                                                "psi": {"value": value, "threshold": 0.2}}})
            states.update(advance_window([result], states, i, policy))
            paging.append(bool(result.details[EVIDENCE_KEY]["paging"]))
        return paging

    assert run([0.1, 0.12, 0.1, 0.25, 0.1]) == [False] * 5  # one window over 0.2, the run's mean 0.13
    assert run([0.18, 0.19, 0.25, 0.24]) == [False, False, True, True]  # the mean reaches 0.2 at the third
