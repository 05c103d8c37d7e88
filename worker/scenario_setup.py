"""A rollout scenario's set-up: its candidate version trained (or found again) and its routing plan written.

The scenario definitions (`driftline.worker.scenarios`) say which candidate and which plan; this
module carries them out on the paths every version and plan take: `train_and_publish` registers
the candidate without promoting it (as `driftline train --no-promote` does) and
`driftline.store.rollouts.set_plan` writes the plan (as `driftline rollout` does).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.policies import RolloutPolicy
from driftline.errors import UserError
from driftline.rollouts import AB, CANARY, SHADOW, RoutingPlan, ab_plan, canary_plan, shadow_plan
from driftline.store.db import session_scope
from driftline.store.rollouts import BY_CLI, set_plan
from driftline.worker.dataset import generate
from driftline.worker.publish import train_and_publish
from driftline.worker.registry import Registry
from driftline.worker.scenarios import Candidate, Rollout, Scenario
from driftline.worker.training import TrainConfig

# An A/B scenario's arms: production and the candidate, half the traffic each.
AB_WEIGHT = 50.0
_PRUNED = "pruned"


def candidate_description(candidate: Candidate, size: str) -> str:
    """The registry description that names a scenario's candidate, so a later run finds it again."""
    return f"rollout scenario candidate {candidate.name} ({size} MLP, seed {candidate.seed})"


def training_set(candidate: Candidate, rows: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The bundled data set under the candidate's concept and seed, with its labelling bug applied."""
    inputs, labels = generate(rows, candidate.seed, risk=candidate.risk)
    if candidate.false_default_rate > 0:
        rng = np.random.default_rng(candidate.seed + 2)
        labels = np.where((labels == 0) & (rng.random(len(labels)) < candidate.false_default_rate), 1, labels)
    return inputs, labels


def prepare_candidate(registry: Registry, model: str, candidate: Candidate) -> str:
    """The candidate's version: one registered earlier for it (not production, not pruned), else trained now.

    It is trained like production (its architecture, epochs and number of rows, at most
    `REPLAY_CANDIDATE_MAX_ROWS`), on the bundled data set under the candidate's concept and seed, and
    registered without being promoted.
    """
    production = registry.alias(model)
    if production is None:
        raise UserError(f"model {model!r} has no production version; a rollout scenario starts from one "
                        f"(`driftline train --model {model}`)")
    metrics = registry.get(model, production).metrics
    size = str(metrics.get("size", "default"))
    description = candidate_description(candidate, size)
    for info in reversed(registry.versions(model)):
        if info.description == description and info.version != production and info.stage != _PRUNED:
            return info.version
    rows = min(int(metrics.get("train_rows", 0)) + int(metrics.get("holdout_rows", 0)),
               defaults.REPLAY_CANDIDATE_MAX_ROWS)
    inputs, labels = training_set(candidate, rows)
    config = TrainConfig(size=size, epochs=int(metrics.get("epochs", TrainConfig.epochs)), seed=candidate.seed)
    return train_and_publish(registry, model, inputs, labels, config, promote=False, description=description).version


def canary_weight(policy: RolloutPolicy, rate: float, window_seconds: float) -> int:
    """The first of the policy's canary steps whose share of `rate` brings `min_events` into a window
    (the analysis judges no window with fewer); the last step when none does."""
    for weight in policy.canary_steps:
        if weight / 100.0 * rate * window_seconds >= policy.min_events:
            return weight
    return policy.canary_steps[-1]


def scenario_plan(model: str, rollout: Rollout, production: str, candidate: str, weight: float) -> RoutingPlan:
    """The plan the scenario sets: shadow on every request, a canary at `weight`, or production and candidate 50:50."""
    if rollout.mode == SHADOW:
        return shadow_plan(model, candidate, 1.0)
    if rollout.mode == CANARY:
        return canary_plan(model, candidate, weight)
    assert rollout.mode == AB, rollout.mode
    return ab_plan(model, [(production, AB_WEIGHT), (candidate, 100.0 - AB_WEIGHT)])


def candidate_faults(rollout: Rollout, candidate: str) -> dict[str, Any]:
    """The scenario's worker faults, limited to the candidate's answers (empty when it has none)."""
    return {**rollout.faults, "latency_version": candidate} if rollout.faults else {}


def start_rollout(db_url: str, registry: Registry, scenario: Scenario, model: str, candidate: str,
                  policy: RolloutPolicy, rate: float, window_seconds: float) -> RoutingPlan:
    """Write the scenario's plan for `candidate` as an operator's (``cli``) step; returns it."""
    assert scenario.rollout is not None, scenario.name
    production = registry.alias(model)
    if production is None:
        raise UserError(f"model {model!r} has no production version; a rollout scenario starts from one")
    plan = scenario_plan(model, scenario.rollout, production, candidate, canary_weight(policy, rate, window_seconds))
    with session_scope(db_url) as session:
        set_plan(session, plan, by=BY_CLI, reason=f"replay scenario {scenario.name}")
    return plan
