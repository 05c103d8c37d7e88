"""A rollout's verdict, the `[rollouts]` policy and the next step."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftline.baseline import LabelSummary
from driftline.detectors.families.results import WindowResult
from driftline.detectors.rollout.comparisons import (
    Comparison,
    drift_comparison,
    error_rate_comparison,
    latency_comparisons,
    quality_comparison,
    shadow_comparisons,
)
from driftline.detectors.rollout.policy import RolloutPolicy, next_step
from driftline.detectors.rollout.verdict import BONFERRONI, ab_verdict, arm_policy, rollout_verdict
from driftline.errors import UserError
from driftline.vocabulary import (
    ACCURACY,
    CANDIDATE_DRIFT,
    ERROR_RATE_DELTA,
    FLIP_RATE,
    P99_DELTA_MS,
    PREDICTION_DRIFT,
    PSI,
    QUALITY_DELTA,
    ROLLOUT_AB,
    ROLLOUT_CANARY,
    ROLLOUT_JUDGED,
    ROLLOUT_MODES,
    ROLLOUT_SHADOW,
    SEQUENTIAL_P_VALUE,
    STEP_DROP_ARMS,
    STEP_HOLD,
    STEP_PROMOTE,
    STEP_ROLLBACK,
    STEP_UP,
    STEPS,
    VERDICT_FAIL,
    VERDICT_INCONCLUSIVE,
    VERDICT_PASS,
    VERDICTS,
)
from driftline.window_state import LatencyHistogram

POLICY = RolloutPolicy()


def _histogram(values: np.ndarray) -> LatencyHistogram:
    histogram = LatencyHistogram()
    histogram.add(values)
    return histogram


def _labels(rng: np.random.Generator, accuracy: float, n: int) -> LabelSummary:
    y = rng.binomial(1, 0.5, n)
    right = rng.uniform(size=n) < accuracy
    return LabelSummary().add(np.where(right, y, 1 - y) * 0.8 + 0.1, y)


def _windows(count: int, *, seed: int = 0, events: int = 2000, error_rates=(0.01, 0.01), slowdown: float = 1.0,
             slow_windows: int | None = None, accuracies=(0.85, 0.85), labels: int = 400,
             drifted_windows: int = 0) -> list[list[Comparison]]:
    """`count` windows of canary comparisons drawn from the given rates (production first)."""
    rng = np.random.default_rng(seed)
    windows = []
    for i in range(count):
        errors = rng.binomial(events, error_rates)
        base = rng.lognormal(3.0, 0.3, events)
        factor = slowdown if slow_windows is None or i < slow_windows else 1.0
        window = [error_rate_comparison(int(errors[0]), events, int(errors[1]), events, alpha=POLICY.alpha)]
        window += latency_comparisons(_histogram(base), _histogram(rng.lognormal(3.0, 0.3, events) * factor))
        if labels:
            window.append(quality_comparison(_labels(rng, accuracies[0], labels), _labels(rng, accuracies[1], labels),
                                             alpha=POLICY.alpha))
        window.append(drift_comparison(WindowResult(PREDICTION_DRIFT, "prediction", PSI, 0.3 if i < drifted_windows
                                                    else 0.01, 0.2, i < drifted_windows, {"rows": events})))
        windows.append(window)
    return windows


def test_a_healthy_canary_passes_and_steps_up():
    verdict = rollout_verdict(_windows(6, labels=1000), ROLLOUT_CANARY, POLICY)
    assert verdict.verdict == VERDICT_PASS, verdict.reasons
    assert {ERROR_RATE_DELTA, P99_DELTA_MS, QUALITY_DELTA, CANDIDATE_DRIFT} <= set(verdict.metrics)
    assert all(verdict.metrics[m].verdict == VERDICT_PASS for m in POLICY.critical)
    promoting = RolloutPolicy(auto_promote=True)
    assert next_step(ROLLOUT_CANARY, 5, verdict.verdict, promoting).to_dict() == {
        "action": STEP_UP, "weight": 25, "reason": "canary passed at 5 %", "arms": []}


def test_more_errors_fail_the_rollout_and_roll_back():
    verdict = rollout_verdict(_windows(6, error_rates=(0.01, 0.05)), ROLLOUT_CANARY, POLICY)
    assert verdict.verdict == VERDICT_FAIL
    assert verdict.metrics[ERROR_RATE_DELTA].verdict == VERDICT_FAIL
    assert verdict.metrics[ERROR_RATE_DELTA].lower > POLICY.max_error_rate_increase
    assert any(r.startswith(ERROR_RATE_DELTA) for r in verdict.reasons)
    assert next_step(ROLLOUT_CANARY, 5, verdict.verdict, POLICY).action == STEP_ROLLBACK


def test_an_error_rate_within_the_allowed_delta_is_not_failed():
    # Half a point more errors, allowed one point: never a fail, a pass once the interval is narrow.
    verdict = rollout_verdict(_windows(10, error_rates=(0.01, 0.015), events=5000), ROLLOUT_CANARY, POLICY)
    assert verdict.metrics[ERROR_RATE_DELTA].verdict == VERDICT_PASS


def test_no_errors_on_either_side_is_a_pass_not_a_shrug():
    windows = [[error_rate_comparison(0, 2000, 0, 2000, alpha=POLICY.alpha)] for _ in range(6)]
    judged = rollout_verdict(windows, ROLLOUT_CANARY, RolloutPolicy(critical=(ERROR_RATE_DELTA,)))
    assert judged.verdict == VERDICT_PASS, judged.reasons


def test_too_few_windows_or_labels_is_inconclusive():
    verdict = rollout_verdict(_windows(3), ROLLOUT_CANARY, POLICY)
    assert verdict.verdict == VERDICT_INCONCLUSIVE
    assert "3 windows" in verdict.metrics[ERROR_RATE_DELTA].reason
    no_labels = rollout_verdict(_windows(6, labels=0), ROLLOUT_CANARY, POLICY)
    assert no_labels.verdict == VERDICT_INCONCLUSIVE
    assert no_labels.metrics[QUALITY_DELTA].reason == "no comparison yet"
    few_labels = rollout_verdict(_windows(6, labels=10), ROLLOUT_CANARY, POLICY)
    assert "labels" in few_labels.metrics[QUALITY_DELTA].reason
    assert next_step(ROLLOUT_CANARY, 5, few_labels.verdict, POLICY).action == STEP_HOLD


def test_a_worse_model_fails_on_quality():
    verdict = rollout_verdict(_windows(6, accuracies=(0.90, 0.80)), ROLLOUT_CANARY, POLICY)
    assert verdict.metrics[QUALITY_DELTA].verdict == VERDICT_FAIL
    assert verdict.verdict == VERDICT_FAIL


def test_p99_is_judged_by_the_majority_of_recent_windows():
    slow = rollout_verdict(_windows(6, slowdown=2.0), ROLLOUT_CANARY, POLICY)
    assert slow.metrics[P99_DELTA_MS].verdict == VERDICT_FAIL and slow.verdict == VERDICT_FAIL
    # Slow in the first two of the last five windows only: a minority.
    burst = rollout_verdict(_windows(5, slowdown=2.0, slow_windows=2), ROLLOUT_CANARY, POLICY)
    assert burst.metrics[P99_DELTA_MS].verdict == VERDICT_PASS
    assert "2 of the last 5" in burst.metrics[P99_DELTA_MS].reason
    assert slow.metrics[P99_DELTA_MS].value == pytest.approx(1.0, abs=0.15)  # the median relative increase
    # Within the millisecond tolerance a slower model is not failed.
    tolerant = rollout_verdict(_windows(6, slowdown=2.0), ROLLOUT_CANARY, RolloutPolicy(p99_tolerance_ms=1000.0))
    assert tolerant.metrics[P99_DELTA_MS].verdict == VERDICT_PASS


def test_a_non_critical_fail_is_reported_but_does_not_fail():
    verdict = rollout_verdict(_windows(6, drifted_windows=6, labels=1000), ROLLOUT_CANARY, POLICY)
    assert verdict.metrics[CANDIDATE_DRIFT].verdict == VERDICT_FAIL
    assert verdict.verdict == VERDICT_PASS
    assert any("not critical" in r for r in verdict.reasons)
    strict = rollout_verdict(_windows(6, drifted_windows=6, labels=1000), ROLLOUT_CANARY,
                             RolloutPolicy(critical=(*POLICY.critical, CANDIDATE_DRIFT)))
    assert strict.verdict == VERDICT_FAIL


def test_shadow_flip_rate_is_judged_against_its_allowed_share():
    rng = np.random.default_rng(3)

    def window(flip_share: float) -> list[Comparison]:
        production = rng.uniform(0, 1, 1000)
        candidate = np.where(rng.uniform(size=1000) < flip_share, 1 - production, production)
        return shadow_comparisons(np.arange(1000), production, candidate, alpha=POLICY.alpha)

    policy = RolloutPolicy(critical=(FLIP_RATE,))
    assert rollout_verdict([window(0.02) for _ in range(5)], ROLLOUT_SHADOW, policy).verdict == VERDICT_PASS
    assert rollout_verdict([window(0.6) for _ in range(5)], ROLLOUT_SHADOW, policy).verdict == VERDICT_FAIL
    # A shadow without labels passes on what it compared; a canary without them cannot.
    unlabelled = [[*window(0.02), *w] for w in _windows(5, labels=0)]
    shadow = rollout_verdict(unlabelled, ROLLOUT_SHADOW, POLICY)
    assert shadow.verdict == VERDICT_PASS and QUALITY_DELTA not in shadow.metrics
    assert rollout_verdict(unlabelled, ROLLOUT_CANARY, POLICY).verdict == VERDICT_INCONCLUSIVE
    assert rollout_verdict([], ROLLOUT_SHADOW, POLICY).verdict == VERDICT_INCONCLUSIVE


@pytest.mark.parametrize("accuracies, verdict, winner", [
    ((0.80, 0.85), VERDICT_PASS, "candidate"),
    ((0.85, 0.80), VERDICT_FAIL, "production"),
    ((0.82, 0.82), VERDICT_INCONCLUSIVE, None),
])
def test_ab_needs_a_winner(accuracies, verdict, winner):
    windows = _windows(20, accuracies=accuracies, labels=600, seed=4)
    judged = rollout_verdict(windows, ROLLOUT_AB, POLICY)
    assert judged.verdict == verdict, judged.reasons
    assert judged.sequential["winner"] == winner
    assert 0 < judged.sequential[SEQUENTIAL_P_VALUE] <= 1
    assert (judged.sequential[SEQUENTIAL_P_VALUE] <= POLICY.alpha) == (winner is not None)
    # The same windows as a canary: judged on the allowed drop alone, no winner needed.
    assert rollout_verdict(windows, ROLLOUT_CANARY, POLICY).sequential is None


# --- an A/B test of more than two arms -------------------------------------------------------

def _quality_windows(rng: np.random.Generator, accuracies, windows: int = 30, labels: int = 200,
                     runs: int = 1) -> list[dict[str, list[list[Comparison]]]]:
    """`runs` A/B tests: per arm (version "2", "3", ...) its windows' accuracy comparisons with the control,
    whose accuracy is the first of `accuracies`; `labels` per arm and window."""
    right = rng.binomial(labels, accuracies, (runs, windows, len(accuracies)))
    tests = []
    for run in right:
        tests.append({str(arm + 1): [[Comparison(QUALITY_DELTA, None, {
            "metric": ACCURACY, "higher_is_better": True, "count": labels,
            "sums": {"production": [labels, int(w[0]), int(w[0])], "candidate": [labels, int(w[arm]), int(w[arm])]}})]
            for w in run] for arm in range(1, len(accuracies))})
    return tests


AB_POLICY = RolloutPolicy(critical=(QUALITY_DELTA,))


def test_a_a_a_tests_keep_the_family_wise_false_positive_rate_when_judged_every_window():
    """Three identical arms, 200 labels an arm a window, 30 windows: any arm declared better or worse than
    the control at any look is a false positive (the confidence sequences only narrow, so the last look
    holds every earlier one's finding)."""
    runs = 300
    tests = _quality_windows(np.random.default_rng(31), (0.8, 0.8, 0.8), runs=runs)
    found = [ab_verdict(arms, AB_POLICY) for arms in tests]
    declared = np.mean([any(s["winner"] is not None for s in v.sequential["arms"].values()) for v in found])
    assert declared <= AB_POLICY.alpha + 3 * np.sqrt(AB_POLICY.alpha * (1 - AB_POLICY.alpha) / runs)
    assert all(v.sequential["arms"]["2"]["alpha"] == AB_POLICY.alpha / 2 for v in found)
    assert sum(v.verdict != VERDICT_INCONCLUSIVE for v in found) <= declared * runs


def test_the_better_arm_of_three_wins_and_is_named():
    tests = _quality_windows(np.random.default_rng(32), (0.80, 0.80, 0.86), runs=50)
    found = [ab_verdict(arms, AB_POLICY) for arms in tests]
    winners = [v.winner for v in found]
    assert winners.count("3") >= 45 and "2" not in winners
    last = next(v for v in found if v.winner == "3")
    assert last.verdict == VERDICT_PASS and last.sequential["correction"] == BONFERRONI
    assert last.sequential["comparisons"] == 2 and set(last.arms) == {"2", "3"}
    assert any(r.startswith("A/B test: arm 3 is the winner") and "alpha 0.025" in r for r in last.reasons)
    assert any(r.startswith("arm 2: ") for r in last.reasons)
    assert next_step(ROLLOUT_AB, 0.0, last.verdict, RolloutPolicy(auto_promote=True)).action == STEP_PROMOTE


def test_an_arm_failing_a_critical_metric_fails_the_test_and_losers_drop_out():
    rng = np.random.default_rng(33)
    [arms] = _quality_windows(rng, (0.85, 0.70, 0.85))
    harmful = ab_verdict(arms, AB_POLICY)  # arm 2 is 15 points worse: beyond the allowed 5-point drop
    assert harmful.verdict == VERDICT_FAIL and harmful.winner is None
    assert any("arm 2 failed a critical metric" in r for r in harmful.reasons)
    # arm 3 is still in the running: arm 2 leaves, the test goes on
    assert harmful.drop == ("2",) and harmful.to_dict()["drop"] == ["2"]
    step = next_step(ROLLOUT_AB, 0.0, harmful.verdict, POLICY, harmful.drop)
    assert (step.action, step.arms) == (STEP_DROP_ARMS, ("2",)) and "other arms go on" in step.reason
    assert next_step(ROLLOUT_AB, 0.0, harmful.verdict, RolloutPolicy(auto_rollback=False), harmful.drop).action \
        == STEP_HOLD
    [arms] = _quality_windows(rng, (0.85, 0.70, 0.70))
    both = ab_verdict(arms, AB_POLICY)  # no arm left in the running: the whole test fails
    assert both.verdict == VERDICT_FAIL and both.drop == ()
    assert next_step(ROLLOUT_AB, 0.0, both.verdict, POLICY, both.drop).action == STEP_ROLLBACK
    # worse than the control but within the allowed drop: the arm lost, the other decides
    [arms] = _quality_windows(rng, (0.85, 0.82, 0.85), labels=2000)
    lost = ab_verdict(arms, AB_POLICY)
    assert lost.arms["2"].sequential["winner"] == "production" and lost.verdict == VERDICT_INCONCLUSIVE
    [arms] = _quality_windows(rng, (0.85, 0.82, 0.82), labels=2000)
    assert ab_verdict(arms, AB_POLICY).verdict == VERDICT_FAIL  # every arm worse: none can win
    assert ab_verdict(arms, AB_POLICY).drop == ()
    assert "every arm is worse" in ab_verdict(arms, AB_POLICY).reasons[-1]


def test_an_ab_test_of_two_arms_is_the_two_arm_verdict_with_its_winner_named():
    windows = _windows(20, accuracies=(0.80, 0.85), labels=600, seed=4)
    judged = ab_verdict({"7": windows}, POLICY)
    assert judged == dataclasses.replace(rollout_verdict(windows, ROLLOUT_AB, POLICY), winner="7")
    assert arm_policy(POLICY, 1) is POLICY and arm_policy(POLICY, 4).alpha == POLICY.alpha / 4
    with pytest.raises(ValueError):
        ab_verdict({}, POLICY)


def test_verdict_to_dict_is_json_ready():
    import json

    payload = rollout_verdict(_windows(6), ROLLOUT_AB, POLICY).to_dict()
    assert json.loads(json.dumps(payload))["verdict"] in VERDICTS
    with pytest.raises(UserError, match="mode"):
        rollout_verdict([], "blue-green", POLICY)


_judged = st.sampled_from(ROLLOUT_JUDGED)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), st.integers(0, 2)), min_size=0, max_size=8),
       st.lists(_judged, min_size=1, max_size=3, unique=True), st.sampled_from(ROLLOUT_MODES))
def test_any_critical_fail_fails_and_every_verdict_is_known(rows, critical, mode):
    policy = RolloutPolicy(critical=tuple(critical), windows=2, min_events=10)
    windows = [[error_rate_comparison(a, 500, b, 500, alpha=policy.alpha, min_events=policy.min_events),
                drift_comparison(WindowResult(PREDICTION_DRIFT, "prediction", PSI, 0.1, 0.2, d == 2, {}))]
               for a, b, d in rows]
    judged = rollout_verdict(windows, mode, policy)
    assert judged.verdict in VERDICTS
    critical_verdicts = [judged.metrics[m].verdict for m in critical if m in judged.metrics]
    # Only a shadow may leave out a critical metric it never compared.
    assert mode == ROLLOUT_SHADOW or len(critical_verdicts) == len(critical)
    if VERDICT_FAIL in critical_verdicts:
        assert judged.verdict == VERDICT_FAIL
    if judged.verdict == VERDICT_PASS:
        assert set(critical_verdicts) == {VERDICT_PASS}


# --- policy --------------------------------------------------------------------------------

def test_policy_from_toml_section_with_model_override():
    section = {"windows": 3, "max_p99_increase": 0.5, "canary_steps": [10, 50], "critical": ["error_rate_delta"],
               "models": {"credit": {"windows": 8, "auto_promote": True}}}
    policy = RolloutPolicy.from_mapping(section, model="credit")
    assert (policy.windows, policy.auto_promote, policy.canary_steps) == (8, True, (10, 50))
    assert policy.critical == (ERROR_RATE_DELTA,) and policy.max_p99_increase == 0.5
    assert RolloutPolicy.from_mapping(section, model="other").windows == 3
    assert RolloutPolicy.from_mapping(None) == RolloutPolicy()


@pytest.mark.parametrize("section, message", [
    ({"window": 3}, "unknown key 'window'"),
    ({"alpha": "0.05"}, "alpha"),
    ({"alpha": 1.5}, "alpha"),
    ({"tau": 0.0}, "tau"),
    ({"windows": 0}, "windows"),
    ({"min_pairs": 0}, "min_pairs"),
    ({"min_pairs": 1e12}, "min_pairs"),
    ({"min_pairs": "fifty"}, "min_pairs"),
    ({"critical": ["latency"]}, "critical"),
    ({"canary_steps": [5, 1]}, "canary_steps"),
    ({"canary_steps": [50, 150]}, "canary_steps"),
    ({"models": {"m": {"auto_rollback": "yes"}}}, "auto_rollback"),
])
def test_bad_policy_is_a_clear_error(section, message):
    with pytest.raises(UserError, match=message):
        RolloutPolicy.from_mapping(section, model="m")


# --- next step -----------------------------------------------------------------------------

ON = RolloutPolicy(auto_promote=True)


@pytest.mark.parametrize("mode, weight, verdict, policy, action, to", [
    (ROLLOUT_SHADOW, 0, VERDICT_PASS, ON, STEP_UP, 1),
    (ROLLOUT_CANARY, 1, VERDICT_PASS, ON, STEP_UP, 5),
    (ROLLOUT_CANARY, 10, VERDICT_PASS, ON, STEP_UP, 25),
    (ROLLOUT_CANARY, 50, VERDICT_PASS, ON, STEP_PROMOTE, None),
    (ROLLOUT_AB, 50, VERDICT_PASS, ON, STEP_PROMOTE, None),
    (ROLLOUT_CANARY, 5, VERDICT_PASS, POLICY, STEP_HOLD, None),
    (ROLLOUT_CANARY, 5, VERDICT_INCONCLUSIVE, ON, STEP_HOLD, None),
    (ROLLOUT_SHADOW, 0, VERDICT_FAIL, ON, STEP_ROLLBACK, None),
    (ROLLOUT_CANARY, 25, VERDICT_FAIL, RolloutPolicy(auto_rollback=False), STEP_HOLD, None),
])
def test_next_step(mode, weight, verdict, policy, action, to):
    step = next_step(mode, weight, verdict, policy)
    assert (step.action, step.weight) == (action, to)
    assert step.reason


@pytest.mark.parametrize("args", [("blue", 5, VERDICT_PASS), (ROLLOUT_CANARY, 5, "ok"),
                                  (ROLLOUT_CANARY, 150, VERDICT_PASS)])
def test_next_step_refuses_unknown_input(args):
    with pytest.raises(UserError):
        next_step(*args, ON)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ROLLOUT_MODES), st.floats(0, 100), st.sampled_from(VERDICTS), st.booleans(), st.booleans(),
       st.lists(st.sampled_from(["2", "3"]), max_size=2, unique=True))
def test_next_step_only_moves_to_a_configured_weight(mode, weight, verdict, promote, rollback, drop):
    policy = RolloutPolicy(auto_promote=promote, auto_rollback=rollback)
    step = next_step(mode, weight, verdict, policy, tuple(drop))
    assert step.action in STEPS
    assert bool(step.arms) == (step.action == STEP_DROP_ARMS)
    if step.action == STEP_DROP_ARMS:
        assert mode == ROLLOUT_AB and verdict == VERDICT_FAIL and rollback and step.arms == tuple(drop)
    assert (step.weight is not None) == (step.action == STEP_UP)
    if step.action == STEP_UP:
        assert step.weight in policy.canary_steps
        assert mode == ROLLOUT_SHADOW or step.weight > weight
    if step.action in (STEP_UP, STEP_PROMOTE):
        assert verdict == VERDICT_PASS and promote
    if step.action == STEP_ROLLBACK:
        assert verdict == VERDICT_FAIL and rollback


def test_error_rate_at_the_allowed_delta_rarely_fails_however_often_it_is_judged():
    # The worst case for a false fail: the candidate exactly `max_error_rate_increase` worse. Judged after
    # every window, a rollout should fail on it in at most alpha of runs (confidence sequences).
    runs, peeks, events = 150, 15, 1000
    rng = np.random.default_rng(21)
    production = rng.binomial(events, 0.01, (runs, peeks))
    candidate = rng.binomial(events, 0.01 + POLICY.max_error_rate_increase, (runs, peeks))
    policy = RolloutPolicy(critical=(ERROR_RATE_DELTA,))
    ever_failed = 0
    for run in range(runs):
        windows = [[error_rate_comparison(int(a), events, int(b), events, alpha=policy.alpha)]
                   for a, b in zip(production[run], candidate[run])]
        ever_failed += any(rollout_verdict(windows[:n], ROLLOUT_CANARY, policy).verdict == VERDICT_FAIL
                           for n in range(policy.windows, peeks + 1))
    rate = ever_failed / runs
    assert rate <= policy.alpha + 3 * np.sqrt(policy.alpha * (1 - policy.alpha) / runs)
    # ... while three times that increase fails nearly every run within the same windows.
    worse = rng.binomial(events, 0.01 + 3 * POLICY.max_error_rate_increase, (20, peeks))
    caught = sum(rollout_verdict([[error_rate_comparison(int(a), events, int(b), events, alpha=policy.alpha)]
                                  for a, b in zip(production[run], worse[run])], ROLLOUT_CANARY, policy).verdict
                 == VERDICT_FAIL for run in range(20))
    assert caught >= 18
