"""judge_window: one rollout window's `RolloutOutcome`, the verdict over the stage's windows and the policy's
transition, from real comparisons."""
from __future__ import annotations

import numpy as np
import pytest

from driftline.baseline import LabelSummary
from driftline.detectors.rollout.comparisons import (
    Comparison,
    error_rate_comparison,
    latency_comparisons,
    quality_comparison,
)
from driftline.detectors.rollout.outcome import RolloutOutcome, judge_window
from driftline.detectors.rollout.policy import RolloutPolicy, Transition
from driftline.vocabulary import (
    ACCURACY,
    QUALITY_DELTA,
    ROLLOUT_AB,
    ROLLOUT_CANARY,
    ROLLOUT_SHADOW,
    STEP_DROP_ARMS,
    STEP_HOLD,
    STEP_PROMOTE,
    STEP_ROLLBACK,
    STEP_UP,
    VERDICT_FAIL,
    VERDICT_INCONCLUSIVE,
    VERDICT_PASS,
)
from driftline.window_state import LatencyHistogram

POLICY = RolloutPolicy()
PROMOTING = RolloutPolicy(auto_promote=True)
WINDOW_MS = 60_000


def _histogram(values: np.ndarray) -> LatencyHistogram:
    histogram = LatencyHistogram()
    histogram.add(values)
    return histogram


def _labels(rng: np.random.Generator, accuracy: float, n: int) -> LabelSummary:
    y = rng.binomial(1, 0.5, n)
    right = rng.uniform(size=n) < accuracy
    return LabelSummary().add(np.where(right, y, 1 - y) * 0.8 + 0.1, y)


def _windows(count: int, *, seed: int = 0, events: int = 2000, error_rates=(0.01, 0.01),
             labels: int = 1000) -> list[list[Comparison]]:
    """`count` windows of a canary's comparisons with production (error rate, latency, accuracy)."""
    rng = np.random.default_rng(seed)
    windows = []
    for _ in range(count):
        errors = rng.binomial(events, error_rates)
        window = [error_rate_comparison(int(errors[0]), events, int(errors[1]), events, alpha=POLICY.alpha)]
        window += latency_comparisons(_histogram(rng.lognormal(3.0, 0.3, events)),
                                      _histogram(rng.lognormal(3.0, 0.3, events)))
        window.append(quality_comparison(_labels(rng, 0.85, labels), _labels(rng, 0.85, labels), alpha=POLICY.alpha))
        windows.append(window)
    return windows


def _judge(history, mode=ROLLOUT_CANARY, weight=5.0, policy=POLICY) -> RolloutOutcome:
    count = len(next(iter(history.values())))
    return judge_window(history, model="credit", candidate=",".join(history), mode=mode, production="1",
                        window_start_ms=(count - 1) * WINDOW_MS, window_end_ms=count * WINDOW_MS, weight=weight,
                        policy=policy)


def test_the_outcome_names_its_window_and_carries_the_verdict_and_transition():
    outcome = _judge({"2": _windows(6)}, policy=PROMOTING)
    assert (outcome.model, outcome.candidate, outcome.mode, outcome.production) == ("credit", "2", ROLLOUT_CANARY, "1")
    assert (outcome.window_start_ms, outcome.window_end_ms) == (5 * WINDOW_MS, 6 * WINDOW_MS)
    assert outcome.verdict.verdict == VERDICT_PASS, outcome.verdict.reasons
    higher = [w for w in PROMOTING.canary_steps if w > 5]
    assert outcome.transition == Transition(STEP_UP, higher[0], "canary passed at 5 %")


def test_a_passing_canary_at_the_last_weight_promotes_and_without_auto_promote_holds():
    last = float(PROMOTING.canary_steps[-1])
    assert _judge({"2": _windows(6)}, weight=last, policy=PROMOTING).transition.action == STEP_PROMOTE
    held = _judge({"2": _windows(6)}, weight=last, policy=RolloutPolicy(auto_promote=False)).transition
    assert held.action == STEP_HOLD and "auto_promote is off" in held.reason


def test_a_shadow_that_passes_becomes_a_canary_at_the_first_weight():
    outcome = _judge({"2": _windows(6)}, mode=ROLLOUT_SHADOW, weight=0.0, policy=PROMOTING)
    assert outcome.verdict.verdict == VERDICT_PASS, outcome.verdict.reasons
    assert (outcome.transition.action, outcome.transition.weight) == (STEP_UP, PROMOTING.canary_steps[0])


def test_more_errors_fail_and_roll_back_or_hold_without_auto_rollback():
    failing = _windows(6, error_rates=(0.01, 0.05))
    outcome = _judge({"2": failing})
    assert (outcome.verdict.verdict, outcome.transition.action) == (VERDICT_FAIL, STEP_ROLLBACK)
    held = _judge({"2": failing}, policy=RolloutPolicy(auto_rollback=False))
    assert (held.verdict.verdict, held.transition.action) == (VERDICT_FAIL, STEP_HOLD)


def test_too_few_windows_hold():
    outcome = _judge({"2": _windows(2)}, policy=PROMOTING)
    assert (outcome.verdict.verdict, outcome.transition.action) == (VERDICT_INCONCLUSIVE, STEP_HOLD)


def _ab_windows(rng: np.random.Generator, accuracies, windows: int = 30, labels: int = 200) -> dict:
    """Per arm ("2", "3", ...) its windows' accuracy comparisons with the control (the first accuracy)."""
    right = rng.binomial(labels, accuracies, (windows, len(accuracies)))
    return {str(arm + 1): [[Comparison(QUALITY_DELTA, None, {
        "metric": ACCURACY, "higher_is_better": True, "count": labels,
        "sums": {"production": [labels, int(w[0]), int(w[0])], "candidate": [labels, int(w[arm]), int(w[arm])]}})]
        for w in right] for arm in range(1, len(accuracies))}


def test_an_ab_arm_failing_a_critical_metric_drops_out_and_the_rest_go_on():
    policy = RolloutPolicy(critical=(QUALITY_DELTA,))
    outcome = _judge(_ab_windows(np.random.default_rng(33), (0.85, 0.70, 0.85)), mode=ROLLOUT_AB, weight=0.0,
                     policy=policy)
    assert outcome.verdict.verdict == VERDICT_FAIL and outcome.verdict.drop == ("2",)
    assert (outcome.transition.action, outcome.transition.arms) == (STEP_DROP_ARMS, ("2",))


def test_only_an_ab_test_compares_several_versions():
    with pytest.raises(ValueError, match="compares one version"):
        _judge({"2": _windows(6), "3": _windows(6)})
