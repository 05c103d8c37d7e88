"""One window of a rollout: shadow disagreement, error-rate, latency and quality comparisons, and their intervals."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftline.baseline import LabelSummary
from driftline.detectors.stats import two_sample
from driftline.detectors.stats.intervals import mean_difference_interval, newcombe_interval, wilson_interval
from driftline.detectors.families.results import WindowResult
from driftline.detectors.rollout.comparisons import (
    compare_states,
    drift_comparison,
    error_rate_comparison,
    latency_comparisons,
    quality_comparison,
    quality_sums,
    sample_comparisons,
    sample_pairs,
    shadow_comparisons,
)
from driftline.vocabulary import (
    LATENCY_COMPUTE,
    ACCURACY,
    CANDIDATE_DRIFT,
    ERROR_RATE_DELTA,
    FLIP_RATE,
    LATENCY_TOTAL,
    MAE,
    P50_DELTA_MS,
    P99_DELTA_MS,
    PREDICTION_DRIFT,
    PSI,
    QUALITY_DELTA,
    SCORE_KS,
    SCORE_WASSERSTEIN,
    RolloutDetails,
)
from driftline.window_state import EventBatch, LatencyHistogram, WindowState

ALPHA = 0.05


# --- intervals ------------------------------------------------------------------------------

def test_wilson_and_newcombe_match_the_published_examples():
    # Newcombe (1998), Table II: 81/263 -> Wilson 0.2553-0.3662; 56/70 - 48/80 -> method 10 0.0524-0.3339.
    lower, upper = wilson_interval(81, 263, ALPHA)
    assert (round(lower, 4), round(upper, 4)) == (0.2553, 0.3662)
    difference, lower, upper = newcombe_interval(48, 80, 56, 70, ALPHA)
    assert difference == pytest.approx(0.2)
    assert (round(lower, 4), round(upper, 4)) == (0.0524, 0.3339)


def test_wilson_interval_ends_are_exact_and_empty_is_uninformative():
    assert wilson_interval(0, 50, ALPHA)[0] == 0.0 and wilson_interval(50, 50, ALPHA)[1] == 1.0
    assert wilson_interval(0, 0, ALPHA) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2, ALPHA)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 500), st.integers(1, 500), st.integers(0, 500), st.integers(1, 500))
def test_newcombe_interval_holds_its_estimate_and_stays_in_range(s_a, n_a, s_b, n_b):
    s_a, s_b = min(s_a, n_a), min(s_b, n_b)
    difference, lower, upper = newcombe_interval(s_a, n_a, s_b, n_b, ALPHA)
    assert -1.0 <= lower <= difference <= upper <= 1.0
    w_lower, w_upper = wilson_interval(s_b, n_b, ALPHA)
    assert w_lower <= s_b / n_b <= w_upper


def test_newcombe_covers_rare_error_rates_at_its_level():
    rng = np.random.default_rng(5)
    n, p_a, p_b = 2000, 0.002, 0.004
    s_a, s_b = rng.binomial(n, p_a, 2000), rng.binomial(n, p_b, 2000)
    covered = np.mean([lo <= p_b - p_a <= hi for _, lo, hi in
                       (newcombe_interval(int(a), n, int(b), n, ALPHA) for a, b in zip(s_a, s_b))])
    assert covered >= 0.93


def test_mean_difference_interval_is_welch_normal():
    rng = np.random.default_rng(6)
    a, b = rng.normal(1.0, 2.0, 300), rng.normal(1.5, 1.0, 500)
    difference, lower, upper = mean_difference_interval(a.size, a.sum(), (a ** 2).sum(), b.size, b.sum(),
                                                        (b ** 2).sum(), ALPHA)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert difference == pytest.approx(b.mean() - a.mean())
    assert upper - difference == pytest.approx(1.959964 * se, rel=1e-5)
    assert mean_difference_interval(1, 1.0, 1.0, 10, 1.0, 1.0, ALPHA) == (None, None, None)


# --- shadow -----------------------------------------------------------------------------------

def test_shadow_flips_distances_and_largest_differences():
    rng = np.random.default_rng(7)
    n = 1000
    ids = [f"r{i}" for i in range(n)]
    production = rng.uniform(0, 1, n)
    candidate = np.clip(production + rng.normal(0, 0.05, n), 0, 1)
    candidate[17] = 1.0 - production[17]  # the one big disagreement
    results = {c.metric: c for c in shadow_comparisons(ids, production, candidate, alpha=ALPHA, top=5)}
    flipped = (production >= 0.5) != (candidate >= 0.5)
    flip = results[FLIP_RATE]
    assert flip.value == pytest.approx(flipped.mean())
    assert flip.details["flips"] == int(flipped.sum()) and flip.details["count"] == n
    assert flip.details["lower"] < flip.value < flip.details["upper"]
    largest = flip.details["largest_differences"]
    assert len(largest) == 5
    gaps = [abs(d["difference"]) for d in largest]
    assert gaps == sorted(gaps, reverse=True)
    assert largest[0]["request_id"] == "r17"
    assert results[SCORE_KS].value == pytest.approx(two_sample.ks_2samp(production, candidate)[0])
    assert results[SCORE_WASSERSTEIN].value == pytest.approx(two_sample.wasserstein_normed(production, candidate))
    assert RolloutDetails.from_dict(flip.details).to_dict() == flip.details


def test_shadow_drops_broken_pairs_and_compares_classes_without_threshold():
    ids = list(range(300))
    production = [0.9] * 300
    candidate = [0.9] * 298 + [float("nan"), None]
    flip = shadow_comparisons(ids, production, candidate, alpha=ALPHA)[0]
    assert flip.details["count"] == 298 and flip.value == 0.0
    classes = shadow_comparisons(ids, ["a"] * 300, ["a"] * 250 + ["b"] * 50, alpha=ALPHA, threshold=None, top=3)
    assert [c.metric for c in classes] == [FLIP_RATE]
    assert classes[0].value == pytest.approx(50 / 300)
    assert [d["request_id"] for d in classes[0].details["largest_differences"]] == [250, 251, 252]


def test_shadow_with_too_few_pairs_is_insufficient_and_bad_input_is_refused():
    few = shadow_comparisons([1, 2], [0.1, 0.2], [0.1, 0.9], alpha=ALPHA)
    assert all(c.insufficient_data and c.value is None for c in few)
    with pytest.raises(ValueError, match="equal-length"):
        shadow_comparisons([1, 2], [0.1], [0.2, 0.3], alpha=ALPHA)
    with pytest.raises(ValueError, match="numbers"):
        shadow_comparisons([1], ["x"], [0.2], alpha=ALPHA, min_pairs=1)


# --- canary / A/B ------------------------------------------------------------------------------

def _answers(version, predictions, request_ids, seed):
    rng = np.random.default_rng(seed)
    return [{"event_id": f"{version}-{rng.integers(1 << 60)}", "request_id": request_id, "ts_ms": 1_000 + i,
             "model": "m", "version": version, "features": {"x": 1.0}, "latency_ms": {"total": 5.0},
             "prediction": prediction} for i, (request_id, prediction) in enumerate(zip(request_ids, predictions))]


def test_flip_rate_from_the_window_samples_equals_the_batch_computation_on_the_same_pairs():
    rng = np.random.default_rng(21)
    ids = [f"r{i}" for i in range(3000)]
    production = rng.uniform(size=3000)
    candidate = np.where(rng.uniform(size=3000) < 0.1, 1 - production, production + rng.normal(0, 0.01, 3000))
    prod_state = WindowState.empty(None).add_batch(EventBatch.from_events(_answers("1", production, ids, 1)))
    # the candidate's answers reach the collector in another order, split over partitions
    order = rng.permutation(3000)
    shuffled = _answers("2", candidate[order], [ids[i] for i in order], 2)
    cand_state = WindowState.merge_all(WindowState.empty(None).add_batch(EventBatch.from_events(shuffled[i::3]))
                                       for i in range(3))
    service = sample_comparisons(prod_state.sample, cand_state.sample, alpha=ALPHA, min_pairs=50)
    paired = [r["request_id"] for r in prod_state.sample]
    assert len(paired) == 200 and set(paired) == {r["request_id"] for r in cand_state.sample}
    at = {request_id: i for i, request_id in enumerate(ids)}
    rows = [at[request_id] for request_id in paired]
    batch = shadow_comparisons(paired, production[rows], candidate[rows], alpha=ALPHA, min_pairs=50)
    assert [c.to_dict() for c in service] == [c.to_dict() for c in batch]
    flips = int(np.count_nonzero((production[rows] >= 0.5) != (candidate[rows] >= 0.5)))
    assert service[0].metric == FLIP_RATE and service[0].value == flips / 200 and 0 < flips < 60
    worst = service[0].typed.largest_differences[0]
    assert abs(worst["candidate"] - worst["production"]) == max(abs(candidate[rows] - production[rows]))
    assert candidate[at[worst["request_id"]]] == worst["candidate"]


def test_sample_pairs_make_predictions_comparable_and_skip_what_cannot_pair():
    production = [{"request_id": "a", "prediction": [0.3, 0.7]}, {"request_id": "b", "prediction": [0.2, 0.5, 0.3]},
                  {"request_id": "c", "prediction": 0.4}, {"request_id": None, "prediction": 0.1},
                  {"request_id": "d", "prediction": None}, {"request_id": "e", "prediction": 0.9},
                  {"request_id": "a", "prediction": [0.9, 0.1]}]
    candidate = [{"request_id": "a", "prediction": [0.6, 0.4]}, {"request_id": "b", "prediction": [0.1, 0.2, 0.7]},
                 {"request_id": "c", "prediction": 0.45}, {"request_id": "d", "prediction": 0.3},
                 {"request_id": None, "prediction": 0.1}]
    assert sample_pairs(production, candidate) == (["a", "b", "c"], [0.7, "class 1", 0.4], [0.4, "class 2", 0.45])
    # a window of class labels flips on any difference; NaN or broken probabilities pair as nothing
    labels = sample_comparisons([{"request_id": str(i), "prediction": "yes"} for i in range(61)],
                                [{"request_id": str(i), "prediction": "yes" if i % 4 else "no"} for i in range(60)]
                                + [{"request_id": "60", "prediction": [float("nan"), 1.0]}],
                                alpha=ALPHA, min_pairs=50)
    assert [c.metric for c in labels] == [FLIP_RATE] and labels[0].value == 15 / 60
    assert sample_comparisons([], [], alpha=ALPHA)[0].insufficient_data


def test_error_rate_comparison_and_its_minimum():
    comparison = error_rate_comparison(10, 1000, 30, 1000, alpha=ALPHA)
    assert comparison.value == pytest.approx(0.02)
    assert 0 < comparison.details["lower"] < 0.02 < comparison.details["upper"]
    assert comparison.details["sums"] == {"production": [1000, 10, 10], "candidate": [1000, 30, 30]}
    small = error_rate_comparison(0, 50, 5, 50, alpha=ALPHA, min_events=100)
    assert small.insufficient_data and small.details["sums"]["candidate"] == [50, 5, 5]


def _histogram(values) -> LatencyHistogram:
    histogram = LatencyHistogram()
    histogram.add(np.asarray(values, dtype=np.float64))
    return histogram


def test_latency_comparisons_from_histograms():
    rng = np.random.default_rng(8)
    production = rng.lognormal(3.0, 0.4, 5000)
    candidate = production * 1.5
    results = {c.metric: c for c in latency_comparisons(_histogram(production), _histogram(candidate))}
    p99 = results[P99_DELTA_MS]
    exact = np.quantile(production, 0.99, method="lower")
    assert p99.details["production"] == pytest.approx(exact, rel=0.02)
    assert p99.details["relative"] == pytest.approx(0.5, abs=0.03)
    assert p99.value == pytest.approx(0.5 * exact, rel=0.06)
    assert all(c.insufficient_data for c in latency_comparisons(_histogram(production[:50]), None))


def _binary(scores, labels) -> LabelSummary:
    return LabelSummary().add(np.asarray(scores), np.asarray(labels))


def test_quality_comparison_binary_accuracy():
    rng = np.random.default_rng(9)
    labels = rng.binomial(1, 0.5, 2000)
    good = np.where(rng.uniform(size=2000) < 0.9, labels, 1 - labels) * 0.8 + 0.1
    worse = np.where(rng.uniform(size=2000) < 0.8, labels, 1 - labels) * 0.8 + 0.1
    comparison = quality_comparison(_binary(good, labels), _binary(worse, labels), alpha=ALPHA)
    expected = ((worse >= 0.5) == labels).mean() - ((good >= 0.5) == labels).mean()
    assert comparison.details["metric"] == ACCURACY and comparison.details["higher_is_better"] is True
    assert comparison.value == pytest.approx(expected)
    assert comparison.details["upper"] < 0


def test_quality_comparison_regression_mae_and_insufficient_cases():
    rng = np.random.default_rng(10)
    y = rng.normal(0, 1, 500)
    a = LabelSummary(task="regression").add(y + rng.normal(0, 0.1, 500), y)
    b = LabelSummary(task="regression").add(y + rng.normal(0, 0.3, 500), y)
    assert quality_sums(a)[0] == MAE
    comparison = quality_comparison(a, b, alpha=ALPHA)
    assert comparison.details["higher_is_better"] is False and comparison.details["lower"] > 0
    few = quality_comparison(_binary([0.9] * 20, [1] * 20), _binary([0.9] * 20, [1] * 20), alpha=ALPHA)
    assert few.insufficient_data and few.details["sums"]["candidate"] == [20, 20.0, 20.0]
    assert quality_comparison(a, _binary([0.9] * 200, [1] * 200), alpha=ALPHA).insufficient_data
    assert quality_comparison(None, a, alpha=ALPHA).insufficient_data


def test_drift_comparison_carries_the_drift_verdict():
    drifted = drift_comparison(WindowResult(PREDICTION_DRIFT, "prediction", PSI, 0.4, 0.2, True, {"rows": 900}))
    assert drifted.metric == CANDIDATE_DRIFT and drifted.details["drift"] is True and drifted.value == 0.4
    assert drift_comparison(None).insufficient_data
    thin = WindowResult(PREDICTION_DRIFT, "prediction", PSI, 0.0, 0.2, False,
                        {"insufficient_data": True, "reason": "insufficient data: 3 rows"})
    assert drift_comparison(thin).insufficient_data


def test_compare_states_reads_both_window_states():
    states = []
    for errors, scale in ((5, 1.0), (40, 2.0)):
        state = WindowState.empty(None)
        state.events = 1000
        state.status_counts = {"ok": 1000 - errors, "error": errors}
        state.latency[LATENCY_TOTAL] = _histogram(np.linspace(10, 20, 1000) * scale)
        state.labels = _binary(np.full(300, 0.9), np.ones(300))
        states.append(state)
    results = {c.metric: c for c in compare_states(*states, alpha=ALPHA)}
    assert results[ERROR_RATE_DELTA].value == pytest.approx(0.035)
    assert results[P50_DELTA_MS].details["relative"] == pytest.approx(1.0, abs=0.03)
    assert results[QUALITY_DELTA].value == 0.0
    assert CANDIDATE_DRIFT not in results


def test_a_shadow_is_compared_on_the_model_part_of_latency_when_both_sides_log_it():
    production, shadow = WindowState.empty(None), WindowState.empty(None)
    for state, queue in ((production, 1.0), (shadow, 40.0)):  # the shadow's copies wait far longer
        state.events = 1000
        state.latency[LATENCY_COMPUTE] = _histogram(np.linspace(5, 10, 1000))
        state.latency[LATENCY_TOTAL] = _histogram(np.linspace(5, 10, 1000) + queue)
    on_total = {c.metric: c for c in compare_states(production, shadow, alpha=ALPHA)}
    on_compute = {c.metric: c for c in compare_states(production, shadow, alpha=ALPHA, latency_part=LATENCY_COMPUTE)}
    assert on_total[P99_DELTA_MS].value > 30
    assert on_compute[P99_DELTA_MS].value == pytest.approx(0.0, abs=0.2)
    del shadow.latency[LATENCY_COMPUTE]  # a producer that logs only the whole request's time
    fallback = {c.metric: c for c in compare_states(production, shadow, alpha=ALPHA, latency_part=LATENCY_COMPUTE)}
    assert fallback[P99_DELTA_MS].value == on_total[P99_DELTA_MS].value


def test_every_comparison_detail_is_a_rollout_details_field():
    rng = np.random.default_rng(11)
    production = rng.uniform(0, 1, 400)
    comparisons = shadow_comparisons(range(400), production, production[::-1], alpha=ALPHA)
    comparisons += shadow_comparisons(range(3), [0.1] * 3, [0.2] * 3, alpha=ALPHA)
    comparisons += [error_rate_comparison(1, 500, 2, 500, alpha=ALPHA), error_rate_comparison(1, 5, 2, 5, alpha=ALPHA)]
    comparisons += latency_comparisons(_histogram(production * 100 + 1), _histogram(production * 90 + 1))
    comparisons += [quality_comparison(_binary(production, production > 0.5), _binary(production, production > 0.3),
                                       alpha=ALPHA), drift_comparison(None)]
    for comparison in comparisons:
        assert set(comparison.details) <= RolloutDetails.keys(), comparison.metric
        assert RolloutDetails.from_dict(comparison.details).to_dict() == comparison.details


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.one_of(st.floats(0, 1), st.just(float("nan")))), min_size=0,
                max_size=60), st.integers(0, 8), st.floats(0.05, 0.95))
def test_shadow_comparisons_stay_in_range_on_any_pairs(pairs, top, threshold):
    production = [p for p, _ in pairs]
    candidate = [c for _, c in pairs]
    results = shadow_comparisons(list(range(len(pairs))), production, candidate, alpha=ALPHA, top=top,
                                 threshold=threshold, min_pairs=1)
    flip = results[0]
    assert flip.metric == FLIP_RATE
    if flip.insufficient_data:
        assert flip.value is None and all(c.insufficient_data for c in results)
        return
    assert flip.details["lower"] <= flip.value <= flip.details["upper"]
    assert 0.0 <= flip.value <= 1.0 and flip.details["count"] <= len(pairs)
    assert len(flip.details["largest_differences"]) <= top
    assert all(math.isfinite(d["difference"]) for d in flip.details["largest_differences"])
    assert 0.0 <= results[1].value <= 1.0 and results[2].value >= 0.0
