"""The `[rollouts]` settings and what a rollout does next: promote, roll back, step up or hold."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from driftline import defaults
from driftline.errors import UserError
from driftline.sections import Section, given, parse_section
from driftline.vocabulary import (
    ROLLOUT_AB,
    ROLLOUT_CANARY,
    ROLLOUT_JUDGED,
    ROLLOUT_MODES,
    ROLLOUT_SHADOW,
    STEP_DROP_ARMS,
    STEP_HOLD,
    STEP_PROMOTE,
    STEP_ROLLBACK,
    STEP_UP,
    VERDICT_FAIL,
    VERDICT_PASS,
    VERDICTS,
)

__all__ = ["RolloutPolicy", "Step", "next_step"]


@dataclass(frozen=True)
class RolloutPolicy:
    """How rollouts are judged and moved on (defaults: `driftline.defaults`, "Rollouts")."""

    windows: int = defaults.ROLLOUT_WINDOWS
    min_events: int = defaults.ROLLOUT_MIN_EVENTS
    min_pairs: int = defaults.ROLLOUT_MIN_PAIRS
    min_labels: int = defaults.ROLLOUT_MIN_LABELS
    max_error_rate_increase: float = defaults.ROLLOUT_MAX_ERROR_RATE_INCREASE
    max_p99_increase: float = defaults.ROLLOUT_MAX_P99_INCREASE
    p99_tolerance_ms: float = defaults.ROLLOUT_P99_TOLERANCE_MS
    max_quality_drop: float = defaults.ROLLOUT_MAX_QUALITY_DROP
    max_error_increase: float = defaults.ROLLOUT_MAX_ERROR_INCREASE
    max_flip_rate: float = defaults.ROLLOUT_MAX_FLIP_RATE
    critical: tuple[str, ...] = defaults.ROLLOUT_CRITICAL
    alpha: float = defaults.ROLLOUT_ALPHA
    tau: float = defaults.ROLLOUT_TAU
    canary_steps: tuple[int, ...] = defaults.ROLLOUT_CANARY_STEPS
    auto_promote: bool = defaults.ROLLOUT_AUTO_PROMOTE
    auto_rollback: bool = defaults.ROLLOUT_AUTO_ROLLBACK
    decision_threshold: float = defaults.ROLLOUT_DECISION_THRESHOLD
    top_differences: int = defaults.ROLLOUT_TOP_DIFFERENCES

    def __post_init__(self) -> None:
        where = "[rollouts]"
        for name in ("windows", "min_events", "min_pairs", "min_labels"):
            if getattr(self, name) < 1:
                raise UserError(f"{where} {name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_error_rate_increase", "max_p99_increase", "p99_tolerance_ms", "max_quality_drop",
                     "max_error_increase", "top_differences"):
            if getattr(self, name) < 0:
                raise UserError(f"{where} {name} must not be negative, got {getattr(self, name)}")
        if not 0.0 <= self.max_flip_rate <= 1.0:
            raise UserError(f"{where} max_flip_rate must be between 0 and 1, got {self.max_flip_rate}")
        if not 0.0 < self.alpha < 1.0:
            raise UserError(f"{where} alpha must be between 0 and 1 (exclusive), got {self.alpha}")
        if not self.tau > 0.0:
            raise UserError(f"{where} tau must be positive, got {self.tau}")
        unknown = [m for m in self.critical if m not in ROLLOUT_JUDGED]
        if unknown:
            raise UserError(f"{where} critical: unknown metric {', '.join(map(repr, unknown))}; "
                            f"expected some of {', '.join(ROLLOUT_JUDGED)}")
        steps = self.canary_steps
        if not steps or any(not 0 < w <= 100 for w in steps) or any(b <= a for a, b in zip(steps, steps[1:])):
            raise UserError(f"{where} canary_steps must be increasing weights in (0, 100], got {list(steps)}")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "RolloutPolicy":
        """From the ``[rollouts]`` TOML section; ``[rollouts.models.NAME]`` overrides for `model`."""
        section = parse_section(_RolloutSection, mapping, "[rollouts]")
        values = {k: v for k, v in given(section).items() if k != "models"}
        if model is not None and model in section.models:
            values.update(given(section.models[model]))
        for name in ("critical", "canary_steps"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)


class _RolloutValues(Section):
    windows: int | None = None
    min_events: int | None = None
    min_pairs: int | None = None
    min_labels: int | None = None
    max_error_rate_increase: float | None = None
    max_p99_increase: float | None = None
    p99_tolerance_ms: float | None = None
    max_quality_drop: float | None = None
    max_error_increase: float | None = None
    max_flip_rate: float | None = None
    critical: list[str] | None = None
    alpha: float | None = None
    tau: float | None = None
    canary_steps: list[int] | None = None
    auto_promote: bool | None = None
    auto_rollback: bool | None = None
    decision_threshold: float | None = None
    top_differences: int | None = None


class _RolloutSection(_RolloutValues):
    models: dict[str, _RolloutValues] = {}


@dataclass(frozen=True)
class Step:
    """What a rollout does next: ``action`` (`STEPS`), the canary ``weight`` to step up to, the A/B ``arms`` to
    drop, and why."""

    action: str
    weight: int | None
    reason: str
    arms: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "weight": self.weight, "reason": self.reason, "arms": list(self.arms)}


def next_step(plan_mode: str, current_weight: float, verdict: str, policy: RolloutPolicy,
              drop: tuple[str, ...] = ()) -> Step:
    """The move after a verdict: fail rolls back, pass steps up or promotes, inconclusive holds.

    * ``fail``: roll back (``auto_rollback``; else hold for a person to decide); an A/B test whose
      verdict names arms to `drop` (`ab_verdict`: they failed, another arm is still in the running)
      drops those arms instead, and the rest of the test goes on.
    * ``inconclusive``: hold (more windows or labels will decide).
    * ``pass``, with ``auto_promote`` (else hold): shadow steps up to the first canary weight;
      canary steps up to the next weight above `current_weight`, and promotes from the last;
      an A/B test promotes its winner.
    """
    if plan_mode not in ROLLOUT_MODES:
        raise UserError(f"unknown rollout mode {plan_mode!r}; expected one of {', '.join(ROLLOUT_MODES)}")
    if verdict not in VERDICTS:
        raise UserError(f"unknown verdict {verdict!r}; expected one of {', '.join(VERDICTS)}")
    if not 0 <= current_weight <= 100:
        raise UserError(f"a canary weight is a percentage in [0, 100], got {current_weight}")
    if verdict == VERDICT_FAIL:
        if policy.auto_rollback and drop and plan_mode == ROLLOUT_AB:
            return Step(STEP_DROP_ARMS, None, f"arm {', '.join(drop)} failed; the other arms go on", tuple(drop))
        if policy.auto_rollback:
            return Step(STEP_ROLLBACK, None, "the candidate failed")
        return Step(STEP_HOLD, None, "the candidate failed; auto_rollback is off")
    if verdict != VERDICT_PASS:
        return Step(STEP_HOLD, None, "inconclusive: waiting for more windows or labels")
    if plan_mode == ROLLOUT_SHADOW:
        move = Step(STEP_UP, policy.canary_steps[0], "shadow passed: canary at the first weight")
    elif plan_mode == ROLLOUT_CANARY:
        higher = [w for w in policy.canary_steps if w > current_weight]
        move = (Step(STEP_UP, higher[0], f"canary passed at {current_weight:g} %") if higher
                else Step(STEP_PROMOTE, None, f"canary passed at the last weight, {current_weight:g} %"))
    else:
        assert plan_mode == ROLLOUT_AB
        move = Step(STEP_PROMOTE, None, "the A/B test declared the candidate better")
    if not policy.auto_promote:
        return Step(STEP_HOLD, None, f"{move.reason}; auto_promote is off")
    return move
