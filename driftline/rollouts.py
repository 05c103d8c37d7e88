"""Rollout routing plans and the pure assignment of a request to a model version.

A plan sits next to a model's production alias (stored by `driftline.store.rollouts`) in one of three modes:

- ``shadow``: production answers every request; a sampled `share` of them is also run on the
  candidate, whose answer is logged (role ``shadow``) and never returned;
- ``canary``: `weight` percent of requests are answered by the candidate (role ``canary``), the
  rest by production (role ``production``);
- ``ab``: requests are split between the arms by their weights, which sum to 100 (role ``arm:<version>``).

Assignment is sticky by entity: a request with an `entity_id` lands in the bucket
``blake2b(model, entity_id) mod 1`` scaled to [0, 100), so the same entity always meets the same
version while the plan stays, and raising a canary's weight only moves entities towards the
candidate (consistent hashing in the manner of feature-flag systems). A request without an
entity draws its bucket at random.
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any

from driftline.errors import UserError
from driftline.names import is_safe_name, name_problem
from driftline.vocabulary import ROLLOUT_AB as AB
from driftline.vocabulary import ROLLOUT_CANARY as CANARY
from driftline.vocabulary import ROLLOUT_SHADOW as SHADOW

# The `role` of an event (driftline.events): which part of a rollout answered.
ROLE_PRODUCTION = "production"
ROLE_SHADOW = "shadow"
ROLE_CANARY = "canary"
ARM_ROLE_PREFIX = "arm:"

# Arms' weights must sum to 100 up to this (they are percents typed by people, e.g. 33.3:33.3:33.4).
WEIGHT_SUM_TOLERANCE = 1e-6
_BUCKETS = 100.0
_HASH_SPAN = float(1 << 64)


def arm_role(version: str) -> str:
    return f"{ARM_ROLE_PREFIX}{version}"


def is_role(value: str) -> bool:
    """True for a role the contract names: production, shadow, canary, or arm:<version name>."""
    if value in (ROLE_PRODUCTION, ROLE_SHADOW, ROLE_CANARY):
        return True
    return value.startswith(ARM_ROLE_PREFIX) and is_safe_name(value[len(ARM_ROLE_PREFIX):])


@dataclass(frozen=True)
class Arm:
    version: str
    weight: float  # percent of requests, in (0, 100]


@dataclass(frozen=True)
class RoutingPlan:
    """One model's rollout: `arms` are the candidates (canary: one; ab: all arms; shadow: one, weight = share * 100)."""

    model: str
    mode: str
    arms: tuple[Arm, ...]
    share: float = 1.0  # shadow only: the fraction of requests also run on the candidate

    @property
    def candidate(self) -> str:
        """The version under test (ab: the arms' versions, comma-separated)."""
        return ",".join(arm.version for arm in self.arms)

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(arm.version for arm in self.arms)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"model": self.model, "mode": self.mode, "candidate": self.candidate}
        if self.mode == SHADOW:
            document["share"] = self.share
        elif self.mode == CANARY:
            document["weight"] = self.arms[0].weight
        else:
            document["arms"] = [{"version": arm.version, "weight": arm.weight} for arm in self.arms]
        return document

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> "RoutingPlan":
        mode = document["mode"]
        if mode == SHADOW:
            return shadow_plan(document["model"], document["candidate"], document.get("share", 1.0))
        if mode == CANARY:
            return canary_plan(document["model"], document["candidate"], document["weight"])
        return ab_plan(document["model"], [(a["version"], a["weight"]) for a in document["arms"]])


def _version(version: object) -> str:
    problem = name_problem(version)
    if problem is not None:
        raise UserError(f"invalid version {version!r}: {problem}")
    return version  # type: ignore[return-value]


def _percent(weight: object, what: str) -> float:
    try:
        value = float(weight)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"{what} must be a number of percent in (0, 100], got {weight!r}") from None
    if not (math.isfinite(value) and 0.0 < value <= 100.0):
        raise UserError(f"{what} must be in (0, 100], got {weight!r}")
    return value


def shadow_plan(model: str, version: str, share: float = 1.0) -> RoutingPlan:
    try:
        fraction = float(share)
    except (TypeError, ValueError):
        raise UserError(f"--share must be a fraction in (0, 1], got {share!r}") from None
    if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
        raise UserError(f"--share must be a fraction in (0, 1], got {share!r}")
    return RoutingPlan(model, SHADOW, (Arm(_version(version), fraction * 100.0),), fraction)


def canary_plan(model: str, version: str, weight: float) -> RoutingPlan:
    return RoutingPlan(model, CANARY, (Arm(_version(version), _percent(weight, "--weight")),))


def ab_plan(model: str, arms: list[tuple[str, float]]) -> RoutingPlan:
    if len(arms) < 2:
        raise UserError(f"an A/B test needs at least two arms, got {len(arms)}")
    checked = tuple(Arm(_version(v), _percent(w, f"the weight of arm {v!r}")) for v, w in arms)
    versions = [arm.version for arm in checked]
    if len(set(versions)) != len(versions):
        raise UserError(f"each version may be one arm only, got {', '.join(versions)}")
    total = sum(arm.weight for arm in checked)
    if abs(total - 100.0) > WEIGHT_SUM_TOLERANCE:
        raise UserError(f"the arms' weights must sum to 100, they sum to {total:g}")
    return RoutingPlan(model, AB, checked)


def parse_arms(text: str) -> list[tuple[str, float]]:
    """"3:50,4:50" -> [("3", 50.0), ("4", 50.0)] (weights checked by `ab_plan`)."""
    arms = []
    for part in (p.strip() for p in text.split(",")):
        version, sep, weight = part.rpartition(":")
        if not sep or not version:
            raise UserError(f"--arms takes VERSION:WEIGHT pairs separated by commas (e.g. 3:50,4:50), got {part!r}")
        arms.append((version.strip(), _percent(weight.strip(), f"the weight of arm {version.strip()!r}")))
    return arms


def entity_bucket(model: str, entity_id: str) -> float:
    """A stable point in [0, 100) for (model, entity): the same on every worker and every run."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(model.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(entity_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest(), "big") / _HASH_SPAN * _BUCKETS


@dataclass(frozen=True)
class Route:
    version: str
    role: str


def assign(plan: RoutingPlan | None, production: str, entity_id: str | None, rng: random.Random) -> Route:
    """The version that answers a request, and its role (shadow plans answer with production).

    `entity_id` given: its bucket (`entity_bucket`), so the answer is sticky; else a random bucket from `rng`.
    """
    if plan is None or plan.mode == SHADOW:
        return Route(production, ROLE_PRODUCTION)
    bucket = entity_bucket(plan.model, entity_id) if entity_id is not None else rng.random() * _BUCKETS
    if plan.mode == CANARY:
        arm = plan.arms[0]
        return Route(arm.version, ROLE_CANARY) if bucket < arm.weight else Route(production, ROLE_PRODUCTION)
    upper = 0.0
    for arm in plan.arms:
        upper += arm.weight
        if bucket < upper:
            return Route(arm.version, arm_role(arm.version))
    last = plan.arms[-1]  # the weights sum to 100 up to rounding: the top sliver belongs to the last arm
    return Route(last.version, arm_role(last.version))


def pinned_role(plan: RoutingPlan | None, production: str, version: str) -> str | None:
    """The role of a request that names its `version` (the Open Inference Protocol's versioned path): the arm's
    when the plan serves that version (canary, A/B arm, production among A/B arms), production's for production;
    None when the version answers no request (unknown, or a shadow candidate, whose answers are never returned)."""
    if plan is not None and plan.mode != SHADOW and version in plan.versions:
        return ROLE_CANARY if plan.mode == CANARY else arm_role(version)
    return ROLE_PRODUCTION if version == production else None


def shadowed(plan: RoutingPlan | None, rng: random.Random) -> bool:
    """Whether this request is also run on a shadow candidate (a `share` of them, drawn at random)."""
    return plan is not None and plan.mode == SHADOW and (plan.share >= 1.0 or rng.random() < plan.share)
