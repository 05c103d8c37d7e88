"""The mixture SPRT: its closed form against the mixture integral, its invariants, and its error rate under peeking."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from driftline.detectors.stats.sequential import msprt, msprt_means, msprt_proportions

ALPHA = 0.05
TAU = 0.05
RUNS, PEEKS = 400, 30


def _mixture_ratio(estimate: float, variance: float, tau: float) -> float:
    """The mixture likelihood ratio by numerical integration over theta ~ N(0, tau^2)."""
    sd = math.sqrt(variance)
    null = stats.norm.pdf(estimate, 0.0, sd)

    def integrand(theta: float) -> float:
        return stats.norm.pdf(estimate, theta, sd) * stats.norm.pdf(theta, 0.0, tau) / null

    value, _ = integrate.quad(integrand, -12 * tau, 12 * tau, points=[estimate], limit=200)
    return value


@pytest.mark.parametrize("estimate, variance", [(0.0, 1e-4), (0.01, 1e-4), (0.03, 1e-4), (-0.02, 4e-4)])
def test_p_value_is_the_inverse_of_the_mixture_integral(estimate, variance):
    test = msprt([estimate], [variance], ALPHA, TAU)
    expected = min(1.0, 1.0 / _mixture_ratio(estimate, variance, TAU))
    assert test.p_value[-1] == pytest.approx(expected, rel=1e-6)


def test_confidence_sequence_bounds_are_where_the_test_at_theta_rejects():
    estimate, variance = 0.02, 1e-4
    test = msprt([estimate], [variance], ALPHA, TAU)
    for bound in (test.lower[-1], test.upper[-1]):
        # Shift the data so that `bound` becomes the null: the ratio there is exactly 1/alpha.
        assert _mixture_ratio(estimate - bound, variance, TAU) == pytest.approx(1.0 / ALPHA, rel=1e-5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-0.5, 0.5), st.floats(1e-6, 1e-1)), min_size=1, max_size=20),
       st.floats(0.01, 0.2), st.floats(0.005, 0.5))
def test_p_values_only_fall_and_intervals_only_narrow(peeks, alpha, tau):
    difference, variance = zip(*peeks)
    test = msprt(difference, variance, alpha, tau)
    assert ((test.p_value >= 0) & (test.p_value <= 1)).all()
    assert (np.diff(test.p_value) <= 0).all()
    assert (np.diff(test.lower) >= 0).all() and (np.diff(test.upper) <= 0).all()
    # Rejecting "difference = 0" and an interval without 0 are the same event.
    excludes_zero = (test.lower > 0) | (test.upper < 0)
    rejects = test.p_value <= alpha
    near = np.isclose(test.p_value, alpha, rtol=1e-9)
    assert (excludes_zero == rejects)[~near].all()


def test_a_peek_without_variance_is_no_evidence():
    test = msprt_proportions([10, 20, 1000], [0, 0, 500], [10, 20, 1000], [0, 0, 400], ALPHA, TAU)
    assert test.p_value[0] == test.p_value[1] == 1.0
    assert math.isinf(test.lower[1]) and math.isinf(test.upper[1])
    assert test.p_value[2] < ALPHA and test.upper[2] < 0  # arm B at 0.4 against 0.5


def test_means_and_proportions_agree_on_zero_one_data():
    rng = np.random.default_rng(3)
    a, b = rng.binomial(1, 0.7, (5, 100)), rng.binomial(1, 0.75, (5, 100))
    n = np.cumsum(np.full(5, 100))
    sa, sb = np.cumsum(a.sum(1)), np.cumsum(b.sum(1))
    means = msprt_means(n, sa, sa, n, sb, sb, ALPHA, TAU)
    proportions = msprt_proportions(n, sa, n, sb, ALPHA, TAU)
    # Only the variance's ddof differs (n - 1 against n).
    np.testing.assert_allclose(means.difference, proportions.difference)
    np.testing.assert_allclose(means.p_value, proportions.p_value, rtol=0.05)


@pytest.mark.parametrize("kwargs, message", [
    (dict(count_a=[10, 5], successes_a=[1, 1], count_b=[10, 20], successes_b=[1, 2]), "cumulative"),
    (dict(count_a=[10], successes_a=[11], count_b=[10], successes_b=[1]), "exceed"),
    (dict(count_a=[-1], successes_a=[0], count_b=[10], successes_b=[1]), "non-negative"),
])
def test_bad_counts_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        msprt_proportions(**kwargs, alpha=ALPHA, tau=TAU)


@pytest.mark.parametrize("alpha, tau", [(0.0, 0.1), (1.0, 0.1), (0.05, 0.0), (0.05, -1.0)])
def test_bad_alpha_or_tau_is_refused(alpha, tau):
    with pytest.raises(ValueError):
        msprt([0.1], [0.01], alpha, tau)


# --- the error rate under peeking, and the power ----------------------------------------

def _binary_runs(p_a: float, p_b: float, per_window: int, seed: int, share_b: float = 0.5,
                 labels_from: int = 0, runs: int = RUNS, peeks: int = PEEKS):
    rng = np.random.default_rng(seed)
    total = np.full((runs, peeks), per_window)
    total[:, :labels_from] = 0
    n_b = rng.binomial(total, share_b)
    n_a = total - n_b
    s_a, s_b = rng.binomial(n_a, p_a), rng.binomial(n_b, p_b)
    cum = [np.cumsum(x, axis=1) for x in (n_a, s_a, n_b, s_b)]
    return cum, msprt_proportions(*cum, ALPHA, TAU)


def _margin(rate: float, runs: int) -> float:
    """Three binomial standard errors: a run that merely matches alpha fails this 1 time in 700."""
    return 3.0 * math.sqrt(rate * (1.0 - rate) / runs)


@pytest.mark.parametrize("p, per_window, share_b", [(0.8, 400, 0.5), (0.05, 400, 0.5), (0.8, 400, 0.2)])
def test_a_a_false_positive_rate_holds_when_peeking_every_window(p, per_window, share_b):
    _, test = _binary_runs(p, p, per_window, seed=11, share_b=share_b)
    false_positives = (test.p_value[:, -1] <= ALPHA).mean()
    assert false_positives <= ALPHA + _margin(ALPHA, RUNS)
    # The confidence sequence covers the true difference (0) in the same runs.
    covered = ((test.lower[:, -1] <= 0) & (test.upper[:, -1] >= 0)).mean()
    assert covered >= 1 - ALPHA - _margin(ALPHA, RUNS)


def test_a_a_false_positive_rate_holds_for_means():
    rng = np.random.default_rng(12)
    a, b = rng.lognormal(0.0, 1.0, (RUNS, PEEKS, 200)), rng.lognormal(0.0, 1.0, (RUNS, PEEKS, 200))
    args = []
    for arm in (a, b):
        args += [np.cumsum(np.full((RUNS, PEEKS), 200), axis=1), np.cumsum(arm.sum(2), axis=1),
                 np.cumsum((arm ** 2).sum(2), axis=1)]
    test = msprt_means(*args, ALPHA, tau=0.2)
    assert (test.p_value[:, -1] <= ALPHA).mean() <= ALPHA + _margin(ALPHA, RUNS)


def test_the_simulation_would_catch_a_test_that_does_not_hold_under_peeking():
    # The fixed-sample z-test, looked at after every window, on the same A/A runs: far above alpha.
    (n_a, s_a, n_b, s_b), _ = _binary_runs(0.8, 0.8, 400, seed=11)
    p_a, p_b = s_a / n_a, s_b / n_b
    z = (p_b - p_a) / np.sqrt(p_a * (1 - p_a) / n_a + p_b * (1 - p_b) / n_b)
    naive = (np.abs(z) >= stats.norm.isf(ALPHA / 2)).any(axis=1).mean()
    assert naive > 2 * ALPHA


def test_ab_one_arm_better_once_labels_arrive_is_declared():
    # Labels join from the sixth window on; arm B is five points more accurate.
    _, test = _binary_runs(0.80, 0.85, 400, seed=13, labels_from=5)
    declared = test.p_value[:, -1] <= ALPHA
    assert declared.mean() >= 0.9
    assert (test.lower[declared, -1] > 0).all()  # always in B's favour
    assert (test.p_value[:, :5] == 1.0).all()  # nothing before the labels


def test_a_a_has_no_winner_in_the_ab_scenario():
    _, test = _binary_runs(0.80, 0.80, 400, seed=14, labels_from=5)
    assert (test.p_value[:, -1] <= ALPHA).mean() <= ALPHA + _margin(ALPHA, RUNS)


def test_a_a_a_family_wise_false_positive_rate_holds_with_the_level_split_between_the_arms():
    """Three identical arms, each of the two others against the control at alpha / 2 (Bonferroni), a
    peek after every window: the chance that either is declared different stays at most alpha."""
    rng = np.random.default_rng(15)
    n = np.full((RUNS, PEEKS), 200)
    control, second, third = (np.cumsum(rng.binomial(n, 0.8), axis=1) for _ in range(3))
    count = np.cumsum(n, axis=1)
    tests = [msprt_proportions(count, control, count, arm, ALPHA / 2, TAU) for arm in (second, third)]
    either = (tests[0].p_value[:, -1] <= ALPHA / 2) | (tests[1].p_value[:, -1] <= ALPHA / 2)
    assert either.mean() <= ALPHA + _margin(ALPHA, RUNS)
    # the simulation has teeth: fixed-sample z-tests at alpha / 2, looked at after every window, do not hold
    naive = np.zeros(RUNS, dtype=bool)
    for arm in (second, third):
        p_a, p_b = control / count, arm / count
        z = (p_b - p_a) / np.sqrt(p_a * (1 - p_a) / count + p_b * (1 - p_b) / count)
        naive |= (np.abs(z) >= stats.norm.isf(ALPHA / 4)).any(axis=1)
    assert naive.mean() > 2 * ALPHA
