"""One judged window of a rollout: the verdict over the stage's windows up to it and the policy's transition, pure.

`judge_window(...)` takes each candidate's comparisons with the reference, one list per window of the stage
(`compare_states`, `sample_comparisons`), and returns a `RolloutOutcome`: the verdict (`rollout_verdict`; an A/B
test: `ab_verdict`, every arm against the control) and what the rollout does next (`next_step`). The scheduler
stores the verdict, carries out the transition and hands the outcome to the alerts (`process_rollout_verdict`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from driftline.detectors.rollout.comparisons import Comparison
from driftline.detectors.rollout.policy import RolloutPolicy, Transition, next_step
from driftline.detectors.rollout.verdict import RolloutVerdict, ab_verdict, rollout_verdict
from driftline.vocabulary import ROLLOUT_AB

__all__ = ["RolloutOutcome", "judge_window"]


@dataclass(frozen=True)
class RolloutOutcome:
    """One judged window of `model`'s rollout of `candidate` (`mode`: shadow, canary or A/B) against `production`
    (None: no production version): the verdict and the transition the policy chose (``hold``: none)."""

    model: str
    candidate: str
    mode: str
    production: str | None
    window_start_ms: int
    window_end_ms: int
    verdict: RolloutVerdict
    transition: Transition


def judge_window(history: Mapping[str, Sequence[Sequence[Comparison]]], *, model: str, candidate: str, mode: str,
                 production: str | None, window_start_ms: int, window_end_ms: int, weight: float,
                 policy: RolloutPolicy) -> RolloutOutcome:
    """The outcome of the window ending at `window_end_ms` (module docstring).

    `history`: each compared version to its comparisons, one list per window of the stage up to this one, oldest
    first; one version unless `mode` is A/B. `weight`: the canary's current weight (0 for other modes).
    """
    if mode == ROLLOUT_AB:
        verdict = ab_verdict(history, policy)
    elif len(history) == 1:
        verdict = rollout_verdict(next(iter(history.values())), mode, policy)
    else:
        raise ValueError(f"a {mode} rollout compares one version, got {len(history)}: {', '.join(history)}")
    transition = next_step(mode, weight, verdict.verdict, policy, verdict.drop)
    return RolloutOutcome(model=model, candidate=candidate, mode=mode, production=production,
                          window_start_ms=window_start_ms, window_end_ms=window_end_ms, verdict=verdict,
                          transition=transition)
