"""A rollout's verdict from its windows' comparisons: pass, fail or inconclusive, with the reasons.

Canary analysis as Kayenta does it: each metric is judged against an allowed delta, a fail on
a critical metric fails the rollout, and too few windows or labels leave it inconclusive.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from driftline.detectors.families.results import json_safe
from driftline.detectors.rollout.comparisons import CANDIDATE_KEY, PRODUCTION_KEY, Comparison
from driftline.detectors.rollout.policy import RolloutPolicy
from driftline.detectors.stats.sequential import SequentialTest, msprt, msprt_means
from driftline.errors import UserError
from driftline.vocabulary import (
    ACCURACY,
    CANDIDATE_DRIFT,
    ERROR_RATE_DELTA,
    FLIP_RATE,
    P99_DELTA_MS,
    QUALITY_DELTA,
    ROLLOUT_AB,
    ROLLOUT_MODES,
    ROLLOUT_SHADOW,
    SEQUENTIAL_P_VALUE,
    VERDICT_FAIL,
    VERDICT_INCONCLUSIVE,
    VERDICT_PASS,
)

__all__ = ["BONFERRONI", "MetricVerdict", "RolloutVerdict", "ab_verdict", "arm_policy", "rollout_verdict"]

# How an A/B test of several arms splits its level across the comparisons with the control arm.
BONFERRONI = "bonferroni"


@dataclass(frozen=True)
class MetricVerdict:
    """One metric over the rollout: its verdict, why, and the figures it rests on."""

    metric: str
    verdict: str
    reason: str
    critical: bool
    value: float | None = None
    lower: float | None = None
    upper: float | None = None
    allowed: float | None = None
    windows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dict(self.__dict__))


@dataclass(frozen=True)
class RolloutVerdict:
    """``verdict`` (pass / fail / inconclusive), its ``reasons``, each judged metric, and the A/B test."""

    verdict: str
    reasons: list[str]
    metrics: dict[str, MetricVerdict] = field(default_factory=dict)
    sequential: dict[str, Any] | None = None
    # A/B: the arm (version) a pass would promote; None for any other verdict and mode
    winner: str | None = None
    # A/B of more than two arms: each arm's own verdict against the control arm
    arms: dict[str, "RolloutVerdict"] = field(default_factory=dict)
    # A/B fail: the arms that failed a critical metric when another arm is still in the running (they can
    # leave the test and the rest go on); empty when the whole test failed
    drop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"verdict": self.verdict, "reasons": self.reasons,
                          "metrics": {m: v.to_dict() for m, v in self.metrics.items()},
                          "sequential": self.sequential, "winner": self.winner,
                          "arms": {arm: v.to_dict() for arm, v in self.arms.items()}, "drop": list(self.drop)})


# --- pooled metrics: judged on a confidence sequence over the windows --------------------

def _pooled(windows: Sequence[Sequence[Comparison]], metric: str) -> tuple[list[Comparison], np.ndarray | None]:
    """The metric's comparisons with sums, and their per-window sums cumulated: shape (sides, 3, peeks)."""
    found = [c for window in windows for c in window if c.metric == metric and c.details.get("sums")]
    if not found:
        return [], None
    sides = (PRODUCTION_KEY, CANDIDATE_KEY) if PRODUCTION_KEY in found[0].details["sums"] else (CANDIDATE_KEY,)
    sums = np.array([[c.details["sums"].get(side, [0, 0, 0]) for c in found] for side in sides], dtype=np.float64)
    return found, np.cumsum(np.transpose(sums, (0, 2, 1)), axis=-1)


def _proportion_variance(count: np.ndarray, successes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A proportion and its variance, p(1-p) floored at one success's worth, so that no errors (or no
    flips) on a large count is evidence of a small rate rather than no evidence at all."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = successes / count
        floor = (1.0 / count) * (1.0 - 1.0 / count)
        variance = np.maximum(rate * (1.0 - rate), floor) / count
    return rate, np.where(count > 1, variance, np.nan)


def _sequence(cumulative: np.ndarray, policy: RolloutPolicy, is_proportion: bool) -> SequentialTest:
    if cumulative.shape[0] == 1:  # one proportion (flip rate): its own confidence sequence
        rate, variance = _proportion_variance(cumulative[0, 0], cumulative[0, 1])
        return msprt(rate, variance, policy.alpha, policy.tau)
    (n_a, s_a, q_a), (n_b, s_b, q_b) = cumulative
    if is_proportion:
        rate_a, variance_a = _proportion_variance(n_a, s_a)
        rate_b, variance_b = _proportion_variance(n_b, s_b)
        return msprt(rate_b - rate_a, variance_a + variance_b, policy.alpha, policy.tau)
    return msprt_means(n_a, s_a, q_a, n_b, s_b, q_b, policy.alpha, policy.tau)


def _judge_interval(worse: float, worse_lower: float, worse_upper: float, allowed: float) -> tuple[str, str]:
    """Non-inferiority: fail when the whole interval is worse than allowed, pass when none of it is."""
    if worse_lower > allowed:
        return VERDICT_FAIL, f"worse by {worse:.4g} (at least {worse_lower:.4g}), allowed {allowed:.4g}"
    if worse_upper <= allowed:
        return VERDICT_PASS, f"worse by at most {worse_upper:.4g}, allowed {allowed:.4g}"
    return VERDICT_INCONCLUSIVE, f"worse by {worse:.4g}, between {worse_lower:.4g} and {worse_upper:.4g}: " \
                                 f"the interval straddles the allowed {allowed:.4g}"


def _pooled_verdict(windows: Sequence[Sequence[Comparison]], metric: str, policy: RolloutPolicy,
                    critical: bool) -> tuple[MetricVerdict, SequentialTest | None] | None:
    found, cumulative = _pooled(windows, metric)
    if cumulative is None:
        return None
    quality = metric == QUALITY_DELTA
    judged = [c for c in found if not c.insufficient_data]
    counts = cumulative[:, 0, -1]
    common: dict[str, Any] = dict(metric=metric, critical=critical, windows=len(judged))
    if quality:
        if int(counts.min()) < policy.min_labels:
            return MetricVerdict(verdict=VERDICT_INCONCLUSIVE, reason=f"{int(counts.min())} labels on the smaller "
                                 f"side < min_labels {policy.min_labels}", **common), None
    elif len(judged) < policy.windows:
        return MetricVerdict(verdict=VERDICT_INCONCLUSIVE, reason=f"{len(judged)} windows with enough events "
                             f"< windows {policy.windows}", **common), None
    details = found[-1].details
    higher_is_better = bool(details.get("higher_is_better", False))
    is_proportion = metric != QUALITY_DELTA or details.get("metric") == ACCURACY
    test = _sequence(cumulative, policy, is_proportion)
    last = test.last()
    estimate, lower, upper = last["difference"], last["lower"], last["upper"]
    # Orient so that positive is worse for the candidate.
    if quality and higher_is_better:
        worse, worse_lower, worse_upper = -estimate, -upper, -lower
    else:
        worse, worse_lower, worse_upper = estimate, lower, upper
    if metric == ERROR_RATE_DELTA:
        allowed = policy.max_error_rate_increase
    elif metric == FLIP_RATE:
        allowed = policy.max_flip_rate
    elif higher_is_better:
        allowed = policy.max_quality_drop
    else:
        allowed = policy.max_error_increase * float(cumulative[0, 1, -1] / max(cumulative[0, 0, -1], 1.0))
    verdict, reason = _judge_interval(worse, worse_lower, worse_upper, allowed)
    if quality:
        reason = f"{details.get('metric')} {reason}"
    return MetricVerdict(verdict=verdict, reason=reason, value=estimate, lower=lower, upper=upper, allowed=allowed,
                         **common), test


# --- per-window metrics: judged by the majority of the recent windows ---------------------

def _window_fails(comparison: Comparison, policy: RolloutPolicy) -> bool:
    if comparison.metric == CANDIDATE_DRIFT:
        return bool(comparison.details.get("drift"))
    relative = comparison.details.get("relative")
    slower = comparison.value is not None and comparison.value > policy.p99_tolerance_ms
    return bool(slower and (relative is None or relative > policy.max_p99_increase))


def _majority_verdict(windows: Sequence[Sequence[Comparison]], metric: str, policy: RolloutPolicy,
                      critical: bool) -> MetricVerdict | None:
    found = [c for window in windows for c in window if c.metric == metric]
    if not found:
        return None
    judged = [c for c in found if not c.insufficient_data]
    common: dict[str, Any] = dict(metric=metric, critical=critical, windows=len(judged))
    if len(judged) < policy.windows:
        return MetricVerdict(verdict=VERDICT_INCONCLUSIVE, reason=f"{len(judged)} windows with enough data "
                             f"< windows {policy.windows}", **common)
    recent = judged[-policy.windows:]
    fails = sum(_window_fails(c, policy) for c in recent)
    # p99: the median relative increase, in the allowed delta's terms; drift: the median PSI.
    measured = [c.value if metric == CANDIDATE_DRIFT else c.details.get("relative") for c in recent]
    values = [float(v) for v in measured if v is not None]
    value = float(np.median(values)) if values else None
    what = "drifted" if metric == CANDIDATE_DRIFT else (
        f"over {policy.max_p99_increase:.0%} and {policy.p99_tolerance_ms:g} ms slower")
    allowed = None if metric == CANDIDATE_DRIFT else policy.max_p99_increase
    verdict = VERDICT_FAIL if 2 * fails > len(recent) else VERDICT_PASS
    return MetricVerdict(verdict=verdict, reason=f"{what} in {fails} of the last {len(recent)} windows",
                         value=value, allowed=allowed, **common)


# --- the rollout ---------------------------------------------------------------------------

def _ab_test(test: SequentialTest | None, quality: MetricVerdict | None, higher_is_better: bool,
             policy: RolloutPolicy) -> tuple[dict[str, Any] | None, str, str]:
    """The A/B verdict of the quality test: the candidate better (pass), worse (fail) or not yet known."""
    if test is None:
        reason = quality.reason if quality is not None else "no labels joined yet"
        return None, VERDICT_INCONCLUSIVE, f"A/B test: {reason}"
    last = test.last()
    better = last["lower"] > 0 if higher_is_better else last["upper"] < 0
    worse = last["upper"] < 0 if higher_is_better else last["lower"] > 0
    winner = CANDIDATE_KEY if better else (PRODUCTION_KEY if worse else None)
    sequential = {SEQUENTIAL_P_VALUE: last["p_value"], "difference": last["difference"], "lower": last["lower"],
                  "upper": last["upper"], "alpha": policy.alpha, "tau": policy.tau, "winner": winner,
                  "higher_is_better": higher_is_better}
    p = f"always-valid p = {last['p_value']:.3g}"
    if better:
        return sequential, VERDICT_PASS, f"A/B test: the candidate is better ({p})"
    if worse:
        return sequential, VERDICT_FAIL, f"A/B test: the candidate is worse ({p})"
    return sequential, VERDICT_INCONCLUSIVE, f"A/B test: no winner yet ({p} > alpha {policy.alpha:g})"


def rollout_verdict(windows: Sequence[Sequence[Comparison]], mode: str, policy: RolloutPolicy) -> RolloutVerdict:
    r"""The verdict of a rollout from its windows' comparisons (oldest first) under `policy`.

    Each judged metric gets pass, fail or inconclusive:

    * error rate, flip rate and quality pool the windows' counts and take the
      always-valid confidence sequence of the difference (`driftline.detectors.stats.sequential`,
      normal mixture with ``tau``, level ``1 - alpha``), so looking at every window does not
      inflate the error rate. Fail when the whole interval is worse than the allowed delta,
      pass when none of it is, inconclusive in between (non-inferiority). Error rate and
      flip rate need ``windows`` windows with enough events; quality needs ``min_labels``
      labels on each side.
    * p99 latency and the candidate's own prediction drift are judged per window (p99
      fails a window when over ``max_p99_increase`` and ``p99_tolerance_ms`` slower) and
      by the majority of the last ``windows`` windows with enough data.

    The rollout fails when any critical metric fails; it passes when every critical
    metric passes, and is inconclusive otherwise. A critical metric without data counts
    as inconclusive, except in a shadow, which passes on the critical metrics it compared
    (at least one). An A/B test (``mode="ab"``) also needs a winner: the quality test's
    confidence sequence entirely on the candidate's side passes, entirely on the other
    side fails. A non-critical fail is listed among the reasons.
    """
    if mode not in ROLLOUT_MODES:
        raise UserError(f"unknown rollout mode {mode!r}; expected one of {', '.join(ROLLOUT_MODES)}")
    metrics: dict[str, MetricVerdict] = {}
    quality_test = None
    for metric in (ERROR_RATE_DELTA, FLIP_RATE, QUALITY_DELTA):
        judged = _pooled_verdict(windows, metric, policy, metric in policy.critical)
        if judged is not None:
            metrics[metric], test = judged
            if metric == QUALITY_DELTA:
                quality_test = test
    for metric in (P99_DELTA_MS, CANDIDATE_DRIFT):
        judged_window = _majority_verdict(windows, metric, policy, metric in policy.critical)
        if judged_window is not None:
            metrics[metric] = judged_window
    compared = any(m in metrics for m in policy.critical)
    for metric in policy.critical:
        # A shadow is a pre-check of what it can see: a metric it never compared does not hold it back.
        if metric not in metrics and (mode != ROLLOUT_SHADOW or not compared):
            metrics[metric] = MetricVerdict(metric=metric, verdict=VERDICT_INCONCLUSIVE, critical=True,
                                            reason="no comparison yet")
    reasons = [f"{m.metric}: {m.verdict}: {m.reason}" + ("" if m.critical else " (not critical)")
               for m in metrics.values() if m.verdict != VERDICT_PASS or m.critical]
    critical = [m for m in metrics.values() if m.critical]
    if any(m.verdict == VERDICT_FAIL for m in critical):
        verdict = VERDICT_FAIL
    elif critical and all(m.verdict == VERDICT_PASS for m in critical):
        verdict = VERDICT_PASS
    else:
        verdict = VERDICT_INCONCLUSIVE
    sequential = None
    if mode == ROLLOUT_AB:
        found, _ = _pooled(windows, QUALITY_DELTA)
        higher_is_better = bool(found[-1].details.get("higher_is_better", True)) if found else True
        sequential, ab_verdict, ab_reason = _ab_test(quality_test, metrics.get(QUALITY_DELTA), higher_is_better,
                                                     policy)
        reasons.append(ab_reason)
        if verdict != VERDICT_FAIL:
            verdict = ab_verdict if verdict == VERDICT_PASS or ab_verdict == VERDICT_FAIL else verdict
    return RolloutVerdict(verdict=verdict, reasons=reasons, metrics=metrics, sequential=sequential)


# --- an A/B test of any number of arms --------------------------------------------------------

def arm_policy(policy: RolloutPolicy, comparisons: int) -> RolloutPolicy:
    """`policy` with its level split evenly across `comparisons` arm-against-control comparisons (Bonferroni)."""
    if comparisons < 1:
        raise ValueError(f"an A/B test compares at least one arm with the control, got {comparisons}")
    return policy if comparisons == 1 else policy.model_copy(update={"alpha": policy.alpha / comparisons})


def _critical_fail(verdict: RolloutVerdict) -> bool:
    return any(m.critical and m.verdict == VERDICT_FAIL for m in verdict.metrics.values())


def _lost(verdict: RolloutVerdict) -> bool:
    return verdict.sequential is not None and verdict.sequential.get("winner") == PRODUCTION_KEY


def _gain(verdict: RolloutVerdict) -> float:
    """How much better the arm's quality is than the control's (its A/B test's difference, oriented)."""
    sequential = verdict.sequential or {}
    difference = sequential.get("difference")
    if difference is None:
        return 0.0
    return difference if sequential.get("higher_is_better", True) else -difference


def ab_verdict(arms: Mapping[str, Sequence[Sequence[Comparison]]], policy: RolloutPolicy) -> RolloutVerdict:
    r"""The verdict of an A/B test from each arm's windows of comparisons with the control arm (oldest first).

    Every arm is judged against the control as `rollout_verdict` judges two arms, at level
    ``alpha / m`` for ``m`` arms (Bonferroni), so the chance that any arm of an A/A/A test is
    declared better or worse stays at most ``alpha`` however often the scheduler looks. Then:

    * **fail** when an arm fails a critical metric (its users are served worse), or when every
      arm is worse than the control (no arm can win); ``drop`` names the failing arms when another
      arm is still in the running (neither failing nor worse), so the test can go on without them;
    * **pass** when an arm passes (better than the control, every critical metric passing):
      the winner is the passing arm with the largest quality gain;
    * **inconclusive** otherwise (an arm that lost drops out of the running; the rest go on).

    With one arm this is `rollout_verdict` itself, with the arm named as the winner of a pass.
    """
    if not arms:
        raise ValueError("an A/B test needs at least one arm besides the control")
    judged_policy = arm_policy(policy, len(arms))
    verdicts = {arm: rollout_verdict(windows, ROLLOUT_AB, judged_policy) for arm, windows in arms.items()}
    if len(verdicts) == 1:
        [(arm, only)] = verdicts.items()
        return replace(only, winner=arm if only.verdict == VERDICT_PASS else None)
    harmful = [arm for arm, v in verdicts.items() if _critical_fail(v)]
    passing = [arm for arm, v in verdicts.items() if v.verdict == VERDICT_PASS]
    level = f"each arm at alpha {judged_policy.alpha:.3g} ({policy.alpha:g} / {len(arms)}, {BONFERRONI})"
    winner, drop = None, tuple[str, ...]()
    if harmful:
        verdict, summary = VERDICT_FAIL, f"A/B test: arm {', '.join(harmful)} failed a critical metric"
        if any(arm not in harmful and not _lost(v) for arm, v in verdicts.items()):
            drop = tuple(harmful)
    elif passing:
        winner = max(passing, key=lambda arm: _gain(verdicts[arm]))
        verdict, summary = VERDICT_PASS, f"A/B test: arm {winner} is the winner"
    elif all(_lost(v) for v in verdicts.values()):
        verdict, summary = VERDICT_FAIL, "A/B test: every arm is worse than the control"
    else:
        verdict, summary = VERDICT_INCONCLUSIVE, "A/B test: no winner yet"
    reasons = [f"arm {arm}: {reason}" for arm, v in verdicts.items() for reason in v.reasons]
    reasons.append(f"{summary}; {level}")
    sequential = {"winner": winner, "alpha": policy.alpha, "correction": BONFERRONI, "comparisons": len(arms),
                  "arms": {arm: v.sequential for arm, v in verdicts.items()}}
    return RolloutVerdict(verdict=verdict, reasons=reasons, sequential=sequential, winner=winner, arms=verdicts,
                          drop=drop)
