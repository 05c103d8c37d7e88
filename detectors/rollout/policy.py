"""What a rollout does next under its `[rollouts]` policy (`driftline.policies.RolloutPolicy`): a `Transition`
(promote, roll back, step up, drop arms or hold)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftline.errors import UserError
from driftline.policies import RolloutPolicy
from driftline.vocabulary import (
    ROLLOUT_AB,
    ROLLOUT_CANARY,
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

__all__ = ["RolloutPolicy", "Transition", "next_step"]


@dataclass(frozen=True)
class Transition:
    """What a rollout does next: ``action`` (`vocabulary.STEPS`), the canary ``weight`` to step up to, the A/B
    ``arms`` to drop, and why."""

    action: str
    weight: int | None
    reason: str
    arms: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "weight": self.weight, "reason": self.reason, "arms": list(self.arms)}


def next_step(plan_mode: str, current_weight: float, verdict: str, policy: RolloutPolicy,
              drop: tuple[str, ...] = ()) -> Transition:
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
            return Transition(STEP_DROP_ARMS, None, f"arm {', '.join(drop)} failed; the other arms go on", tuple(drop))
        if policy.auto_rollback:
            return Transition(STEP_ROLLBACK, None, "the candidate failed")
        return Transition(STEP_HOLD, None, "the candidate failed; auto_rollback is off")
    if verdict != VERDICT_PASS:
        return Transition(STEP_HOLD, None, "inconclusive: waiting for more windows or labels")
    if plan_mode == ROLLOUT_SHADOW:
        move = Transition(STEP_UP, policy.canary_steps[0], "shadow passed: canary at the first weight")
    elif plan_mode == ROLLOUT_CANARY:
        higher = [w for w in policy.canary_steps if w > current_weight]
        move = (Transition(STEP_UP, higher[0], f"canary passed at {current_weight:g} %") if higher
                else Transition(STEP_PROMOTE, None, f"canary passed at the last weight, {current_weight:g} %"))
    else:
        assert plan_mode == ROLLOUT_AB
        move = Transition(STEP_PROMOTE, None, "the A/B test declared the candidate better")
    if not policy.auto_promote:
        return Transition(STEP_HOLD, None, f"{move.reason}; auto_promote is off")
    return move
