"""Rollout plans and the pure assignment of requests to versions: sticky by entity, shares as weighted."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftline.errors import UserError
from driftline.rollouts import (ROLE_CANARY, ROLE_PRODUCTION, RoutingPlan, ab_plan, arm_role, assign, canary_plan,
                                entity_bucket, is_role, parse_arms, shadow_plan, shadowed)

MODEL = "credit"
SAMPLES = 4_000
SETTINGS = settings(max_examples=20, deadline=None)


def _within_binomial_bounds(hits: int, n: int, p: float, z: float = 5.0) -> bool:
    """`hits` of `n` is a plausible draw of Binomial(n, p): within z standard deviations (5: ~1 in 3.5 million)."""
    return abs(hits - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


entities = st.text(min_size=1, max_size=30)
weights = st.floats(min_value=0.5, max_value=99.5)


@SETTINGS
@given(entity=entities, weight=weights, seed=st.integers(0, 2 ** 32 - 1))
def test_a_canary_assignment_is_sticky_by_entity(entity, weight, seed):
    plan = canary_plan(MODEL, "4", weight)
    first = assign(plan, "3", entity, random.Random(seed))
    assert all(assign(plan, "3", entity, random.Random(seed + k)) == first for k in range(1, 6))
    assert first.role == (ROLE_CANARY if entity_bucket(MODEL, entity) < weight else ROLE_PRODUCTION)


@SETTINGS
@given(entity=entities, low=weights, extra=st.floats(min_value=0.0, max_value=50.0))
def test_raising_a_canary_weight_never_moves_an_entity_back_to_production(entity, low, extra):
    high = min(100.0, low + extra)
    rng = random.Random(0)
    if assign(canary_plan(MODEL, "4", low), "3", entity, rng).version == "4":
        assert assign(canary_plan(MODEL, "4", high), "3", entity, rng).version == "4"


@SETTINGS
@given(weight=weights, seed=st.integers(0, 2 ** 32 - 1), sticky=st.booleans())
def test_observed_canary_shares_match_the_weight(weight, seed, sticky):
    plan = canary_plan(MODEL, "4", weight)
    rng = random.Random(seed)
    hits = sum(assign(plan, "3", f"{seed}-{i}" if sticky else None, rng).version == "4" for i in range(SAMPLES))
    assert _within_binomial_bounds(hits, SAMPLES, weight / 100.0), (hits, weight)


@SETTINGS
@given(split=st.lists(st.integers(1, 20), min_size=2, max_size=4), seed=st.integers(0, 2 ** 32 - 1),
       sticky=st.booleans())
def test_observed_ab_shares_match_the_arms_weights(split, seed, sticky):
    total = sum(split)
    percents = [100.0 * s / total for s in split]
    percents[-1] = 100.0 - sum(percents[:-1])
    plan = ab_plan(MODEL, [(str(i + 1), w) for i, w in enumerate(percents)])
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for i in range(SAMPLES):
        route = assign(plan, "1", f"{seed}-{i}" if sticky else None, rng)
        assert route.role == arm_role(route.version)
        counts[route.version] = counts.get(route.version, 0) + 1
    for i, weight in enumerate(percents):
        assert _within_binomial_bounds(counts.get(str(i + 1), 0), SAMPLES, weight / 100.0), (counts, percents)


def test_the_entity_bucket_is_stable_and_in_range():
    buckets = [entity_bucket(MODEL, f"user-{i}") for i in range(1_000)]
    assert all(0.0 <= b < 100.0 for b in buckets)
    assert buckets == [entity_bucket(MODEL, f"user-{i}") for i in range(1_000)]
    assert entity_bucket(MODEL, "user-1") != entity_bucket("other", "user-1")  # salted by the model


def test_a_shadow_plan_always_answers_with_production_and_samples_its_share():
    plan = shadow_plan(MODEL, "4", 0.25)
    rng = random.Random(1)
    assert {assign(plan, "3", None, rng).version for _ in range(200)} == {"3"}
    hits = sum(shadowed(plan, rng) for _ in range(SAMPLES))
    assert _within_binomial_bounds(hits, SAMPLES, 0.25)
    assert all(shadowed(shadow_plan(MODEL, "4"), rng) for _ in range(100))
    assert not shadowed(canary_plan(MODEL, "4", 50), rng) and not shadowed(None, rng)


@pytest.mark.parametrize("plan", [shadow_plan(MODEL, "4", 0.5), canary_plan(MODEL, "4", 5),
                                  ab_plan(MODEL, [("3", 33.3), ("4", 33.3), ("5", 33.4)])])
def test_a_plan_round_trips_through_its_stored_form(plan):
    assert RoutingPlan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize("make, message", [
    (lambda: canary_plan(MODEL, "4", 0), "(0, 100]"),
    (lambda: canary_plan(MODEL, "4", 100.5), "(0, 100]"),
    (lambda: canary_plan(MODEL, "4", float("nan")), "(0, 100]"),
    (lambda: canary_plan(MODEL, "../x", 5), "invalid version"),
    (lambda: shadow_plan(MODEL, "4", 0), "(0, 1]"),
    (lambda: shadow_plan(MODEL, "4", 1.5), "(0, 1]"),
    (lambda: ab_plan(MODEL, [("3", 50), ("4", 40)]), "sum to 100"),
    (lambda: ab_plan(MODEL, [("3", 100)]), "at least two arms"),
    (lambda: ab_plan(MODEL, [("3", 50), ("3", 50)]), "one arm only"),
    (lambda: parse_arms("3=50,4=50"), "VERSION:WEIGHT"),
    (lambda: parse_arms("3:half,4:50"), "(0, 100]"),
])
def test_bad_plans_are_clear_errors(make, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        make()


def test_arms_parse_in_order():
    assert parse_arms("3:50, 4:50") == [("3", 50.0), ("4", 50.0)]


def test_roles():
    for role in ("production", "shadow", "canary", "arm:3", "arm:v1.2_x"):
        assert is_role(role)
    for role in ("", "Production", "arm:", "arm:../x", "arm:a..b", "canary ", "arm:é"):
        assert not is_role(role)
