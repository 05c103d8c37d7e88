"""Rollout analysis: a verdict on every closed window of each active plan, then the policy's next step.

For each model with a routing plan (driftline.store.rollouts), the windows of the plan's current
stage (ending after the plan was last set, and not judged by then) that have closed (the window evaluation's rule:
event-time end plus the allowed lateness before the stream's low watermark, driftline.watermarks) and hold a window state for every compared version
are compared (`compare_states`: error rate, latency, quality on joined labels, and the candidate's
prediction drift when the window evaluation stored it; a shadow also on the requests both windows'
samples hold, `sample_comparisons`: flip rate, score distances). The verdict over the stage's windows
up to that one and the policy's transition (`judge_window`, a `RolloutOutcome`: `rollout_verdict`, an A/B
test's `ab_verdict`, every arm against the control, then `next_step`; policy from `[rollouts]`) is stored once
per window with the comparisons behind it; the transition then steps a canary up, promotes (the one alias writer, then the plan is cleared), rolls back (plan cleared) or
takes failing arms out of an A/B test (`without_arms`: a new plan, judged from scratch), each change
written by the plan writer as a ``policy`` step with its reasons.

The plan row is locked for the model's analysis, so two schedulers take turns and the second finds
the windows already judged; the verdicts' uniqueness per (model, candidate, window) backs that up.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline import vocabulary
from driftline.detectors.families.results import WindowResult
from driftline.detectors.rollout.comparisons import Comparison, compare_states, sample_comparisons
from driftline.detectors.rollout.details import verdict_details
from driftline.detectors.rollout.outcome import RolloutOutcome, judge_window
from driftline.detectors.rollout.policy import RolloutPolicy, Transition
from driftline.detectors.rollout.verdict import RolloutVerdict, arm_policy
from driftline.rollouts import AB, CANARY, SHADOW, RoutingPlan, ab_plan, canary_plan
from driftline.store.aliases import move_alias
from driftline.store.models import DetectorResult, RolloutPlan, RolloutVerdictRecord, WindowStateRecord
from driftline.store.rollouts import BY_POLICY, clear_plan, record_verdict, set_plan
from driftline.scheduler.evaluation import REEVALUATION_HORIZON_MS, BaselineCache
from driftline.window_state import WindowState

log = logging.getLogger("driftline.scheduler")

# Comparisons of windows already read, so a stage's earlier windows are not decoded again for every new one.
_COMPARISON_CACHE_ENTRIES = 4_096
ROLLOUTS_SECTION = "rollouts"


class RolloutPolicies:
    """`[rollouts]` per model (``[rollouts.models.NAME]`` overrides), checked when the scheduler starts."""

    def __init__(self, section: Mapping[str, Any] | None):
        self.section = dict(section or {})
        self._policies = {None: RolloutPolicy.from_mapping(self.section)}
        for model in (self.section.get("models") or {}):
            self._policies[model] = RolloutPolicy.from_mapping(self.section, model=model)

    def for_model(self, model: str) -> RolloutPolicy:
        return self._policies.get(model, self._policies[None])


def active_models(session: Session) -> list[str]:
    return list(session.scalars(select(RolloutPlan.model).order_by(RolloutPlan.model)))


def versions_compared(plan: RoutingPlan, production: str | None) -> tuple[str, tuple[str, ...]] | None:
    """(reference, candidates): production and the candidate; an A/B test's other arms, each against
    production's arm (or the first arm, the control, when production is not one). None without production."""
    if plan.mode != AB:
        return (production, (plan.versions[0],)) if production else None
    reference = production if production in plan.versions else plan.versions[0]
    return reference, tuple(v for v in plan.versions if v != reference)


class RolloutAnalysis:
    """The analysis of one model's rollout per call of `analyse` (one transaction, the caller's)."""

    def __init__(self, policies: RolloutPolicies, cache: BaselineCache):
        self.policies = policies
        self.cache = cache
        self._comparisons: OrderedDict[tuple[Any, ...], list[Comparison]] = OrderedDict()

    def analyse(self, session: Session, model: str, watermark_ms: int, lateness_ms: int) -> list[RolloutOutcome]:
        """Judge the plan's closed, unjudged windows in order, acting on each verdict; stops when the plan changes."""
        # the lock makes a second scheduler wait, then see this one's verdicts and steps
        row = session.get(RolloutPlan, model, with_for_update=True)
        if row is None:
            return []
        plan = RoutingPlan.from_dict(row.plan)
        compared = versions_compared(plan, row.production_version)
        if compared is None:
            log.debug("rollout of %s: %s is not analysed automatically", model, plan.candidate)
            return []
        reference, candidates = compared
        policy = self.policies.for_model(model)
        # an A/B test's arms share its level (Bonferroni); the windows' intervals are at the arms' level too
        alpha = arm_policy(policy, len(candidates)).alpha if plan.mode == AB else policy.alpha
        judged = set(session.scalars(select(RolloutVerdictRecord.window_start_ms).where(
            RolloutVerdictRecord.model == model, RolloutVerdictRecord.candidate == plan.candidate)))
        # the stage began with the windows not judged yet when the plan was last set
        judged_before = session.scalar(select(func.max(RolloutVerdictRecord.window_start_ms)).where(
            RolloutVerdictRecord.model == model, RolloutVerdictRecord.candidate == plan.candidate,
            RolloutVerdictRecord.evaluated_at <= row.updated_at))
        versions = (reference, *candidates)
        windows = [w for w in self._stage_windows(session, model, versions, _ms(row.updated_at), watermark_ms,
                                                  lateness_ms)
                   if judged_before is None or w[0] > judged_before]
        weight = plan.arms[0].weight if plan.mode == CANARY else 0.0
        outcomes = []
        for index, (start, end, updated) in enumerate(windows):
            if start in judged:
                continue
            history = {candidate: [self._compare(session, model, plan.mode, (reference, candidate), s, u, policy,
                                                 alpha) for s, _, u in windows[:index + 1]]
                       for candidate in candidates}
            outcome = judge_window(history, model=model, candidate=plan.candidate, mode=plan.mode,
                                   production=row.production_version, window_start_ms=start, window_end_ms=end,
                                   weight=weight, policy=policy)
            verdict = outcome.verdict
            details = verdict_details(reference, {c: found[-1] for c, found in history.items()}, verdict, alpha)
            record_verdict(session, model, plan.candidate, start, end, verdict.verdict, verdict.reasons, details)
            session.flush()  # stamped before a transition's new stage begins
            outcomes.append(outcome)
            if self._apply(session, plan, reference, verdict.winner or candidates[0], outcome.transition, verdict,
                           start):
                break  # a new stage (or no plan): its windows are judged from scratch
        return outcomes

    def _stage_windows(self, session: Session, model: str, versions: tuple[str, ...], stage_start_ms: int,
                       watermark_ms: int, lateness_ms: int) -> list[tuple[int, int, Any]]:
        """(start, end, last update) of the closed windows of this stage with a state for every version."""
        rows = session.execute(
            select(WindowStateRecord.window_start_ms, func.max(WindowStateRecord.window_end_ms),
                   func.max(WindowStateRecord.updated_at))
            .where(WindowStateRecord.model == model, WindowStateRecord.version.in_(versions),
                   WindowStateRecord.window_end_ms + lateness_ms <= watermark_ms,
                   WindowStateRecord.window_end_ms > stage_start_ms,
                   WindowStateRecord.window_end_ms >= watermark_ms - REEVALUATION_HORIZON_MS)
            .group_by(WindowStateRecord.window_start_ms)
            .having(func.count(func.distinct(WindowStateRecord.version)) == len(set(versions)))
            .order_by(WindowStateRecord.window_start_ms))
        return [(int(s), int(e), u) for s, e, u in rows]

    def _compare(self, session: Session, model: str, mode: str, pair: tuple[str, str], start: int, updated: Any,
                 policy: RolloutPolicy, alpha: float) -> list[Comparison]:
        key = (model, mode, pair, start, updated, policy, alpha)
        found = self._comparisons.get(key)
        if found is not None:
            self._comparisons.move_to_end(key)
            return found
        reference, candidate = (self._state(session, model, version, start) for version in pair)
        found = compare_states(reference, candidate, alpha=alpha, min_events=policy.min_events,
                               min_labels=policy.min_labels,
                               candidate_drift=_prediction_drift(session, model, pair[1], start),
                               latency_part=vocabulary.LATENCY_COMPUTE if mode == SHADOW else vocabulary.LATENCY_TOTAL)
        if mode == SHADOW:  # the same requests through both versions: their samples pair up by request id
            found += sample_comparisons(reference.sample, candidate.sample, alpha=alpha,
                                        threshold=policy.decision_threshold, top=policy.top_differences,
                                        min_pairs=policy.min_pairs)
        self._comparisons[key] = found
        if len(self._comparisons) > _COMPARISON_CACHE_ENTRIES:
            self._comparisons.popitem(last=False)
        return found

    def _state(self, session: Session, model: str, version: str, start: int) -> WindowState:
        baseline = self.cache.baseline(session, model, version)
        records = session.scalars(select(WindowStateRecord.state).where(
            WindowStateRecord.model == model, WindowStateRecord.version == version,
            WindowStateRecord.window_start_ms == start))
        return WindowState.merge_all([WindowState.from_bytes(blob, baseline) for blob in records], baseline)

    def _apply(self, session: Session, plan: RoutingPlan, control: str, candidate: str, transition: Transition,
               verdict: RolloutVerdict, start: int) -> bool:
        """Carry out `transition` as the ``policy`` author; True when the plan changed."""
        reason = f"{transition.reason} (window {start}: {verdict.verdict}" + (
            f"; {'; '.join(verdict.reasons)})" if verdict.reasons else ")")
        if transition.action == vocabulary.STEP_UP:
            set_plan(session, canary_plan(plan.model, candidate, transition.weight), by=BY_POLICY, reason=reason)
        elif transition.action == vocabulary.STEP_PROMOTE:
            clear_plan(session, plan.model, by=BY_POLICY, reason=reason)
            move_alias(session, plan.model, candidate, "promote", f"rollout policy: {transition.reason}")
        elif transition.action == vocabulary.STEP_ROLLBACK:
            clear_plan(session, plan.model, by=BY_POLICY, reason=reason)
        elif transition.action == vocabulary.STEP_DROP_ARMS:
            set_plan(session, without_arms(plan, transition.arms, control), by=BY_POLICY, reason=reason)
        else:
            return False
        return True


def without_arms(plan: RoutingPlan, dropped: tuple[str, ...], control: str) -> RoutingPlan:
    """The A/B plan without the `dropped` arms, their weight given to the `control` arm (its users were served the
    control's answers before the test too)."""
    freed = sum(arm.weight for arm in plan.arms if arm.version in dropped)
    return ab_plan(plan.model, [(arm.version, arm.weight + (freed if arm.version == control else 0.0))
                                for arm in plan.arms if arm.version not in dropped])


def _prediction_drift(session: Session, model: str, version: str, start: int) -> WindowResult | None:
    """The candidate's prediction drift result for the window, when the window evaluation stored one."""
    row = session.scalar(select(DetectorResult).where(
        DetectorResult.model == model, DetectorResult.version == version, DetectorResult.window_start_ms == start,
        DetectorResult.detector == vocabulary.PREDICTION_DRIFT, DetectorResult.segment == ""))
    if row is None:
        return None
    return WindowResult(detector=row.detector, feature=row.feature or None, metric=row.metric, value=row.value,
                        threshold=row.threshold, breached=bool(row.breached), details=dict(row.details or {}))


def _ms(at: datetime | None) -> int:
    if at is None:
        return 0
    # SQLite hands back naive datetimes (stored as UTC), PostgreSQL aware ones
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at
    return int(at.timestamp() * 1000)
