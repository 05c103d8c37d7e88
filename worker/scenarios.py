"""Replay scenarios: what traffic looks like and which worker fault is switched on.

| scenario | inputs | labels | worker fault |
|---|---|---|---|
| none | the training population | the training risk model | none |
| covariate_shift | younger, poorer applicants with lower credit scores, more on contracts, more from the south | training risk model | none |
| concept_drift | the training population | a new risk model: debt-to-income and late payments weigh far more, credit score half as much, the south defaults more (a regional downturn) | none |
| skew | the training population | training risk model | `skew`: debt_to_income computed with a units bug on the serving path |
| latency | the training population | training risk model | 5 % of requests take 250 ms longer (p99 over the 100 ms SLO) |
| data_quality | the training population, then corrupted: nulls, out-of-range values, unseen categories | from the clean inputs | none |
| segment_shift | the training population, except applicants from the north: younger, poorer, lower credit scores | training risk model | none |
| stale_features | the training population; the online feature store's `credit_score` stops updating (its values stay, their age grows: `driftline.worker.online_features`) | training risk model | none |
| embedding_shift | the training population, with late payments re-paired to rise with the credit score (they fall with it in training): every served feature keeps its distribution, the model's representation moves | training risk model | none |

Rollout scenarios also train a candidate version beside production (never promoting it) and set a
routing plan when their traffic starts (`driftline.worker.scenario_setup`):

| scenario | inputs | labels | candidate | plan | worker fault |
|---|---|---|---|---|---|
| shadow | the training population | training risk model | trained with another seed: slightly different scores | shadow on every request | none |
| canary_regression | the training population | training risk model | trained on labels where 40 % of repaid loans read as defaults: worse | canary at the first weight of `[rollouts] canary_steps` that the analysis can judge | 5 % of the candidate's answers take 250 ms longer |
| ab | the training population | concept_drift's new risk model in a downturn (41 % default) | trained on that risk model: better | A/B, production and the candidate 50:50 | none |
| aa | the training population | training risk model | the shadow scenario's (another seed): as good | A/B, production and the candidate 50:50: no winner may be declared | none |

Every scenario emits labels (so model quality can be measured); they are delayed,
as ground truth is in real life.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from driftline.rollouts import AB, CANARY, SHADOW
from driftline.worker.dataset import Population, RiskModel

# data_quality corruption rates, per row.
NULL_RATE = 0.15
OUT_OF_RANGE_RATE = 0.05
UNSEEN_CATEGORY_RATE = 0.10
NULLABLE = ("annual_income", "credit_score", "employment_years", "region")
OUT_OF_RANGE = {"age": (-5, 150), "credit_score": (0, 2000), "num_credit_lines": (-3, 400), "loan_term_months": (0, 600)}
UNSEEN = {"region": "atlantis", "employment_type": "gig_worker", "home_ownership": "houseboat"}
# concept_drift's new relation between inputs and default: debt and late payments weigh
# far more, the credit score half as much, the south defaults more (a regional downturn).
NEW_CONCEPT = RiskModel(w_dti=7.0, w_score=0.0055, w_late=0.9, w_south=1.2)
# ab's: the new concept in a general downturn (about 41 % default, was 20 %). Measured on the small
# MLP: production's accuracy falls to 0.64, a candidate trained on it scores 0.75, a gap an A/B test
# finds within a few hundred labels an arm (concept_drift's alone leaves 0.05 and needs thousands).
DOWNTURN = replace(NEW_CONCEPT, intercept=-1.6)


@dataclass(frozen=True)
class Candidate:
    """A version a rollout scenario trains on the bundled data set beside production (never promoted by it).

    `name` goes into the version's description, so a later run finds it there and serves it again
    instead of training it anew.
    """

    name: str
    seed: int  # of the data set and the training (production's `driftline train` uses 7)
    risk: RiskModel = RiskModel()  # the concept its labels follow
    false_default_rate: float = 0.0  # share of repaid loans labelled as defaults: a labelling bug, a worse model


@dataclass(frozen=True)
class Rollout:
    """The routing plan a rollout scenario sets when its traffic starts, and the candidate it routes to.

    ``shadow``: the candidate shadows every request; ``canary``: it answers the first weight of
    `[rollouts] canary_steps` that gives the analysis enough events per window; ``ab``: production
    and the candidate are two arms of 50 %. `faults` slow the candidate's answers only.
    """

    mode: str
    candidate: Candidate
    faults: dict[str, Any] = field(default_factory=dict)


# Another seed: the same concept learned from another draw of the data, slightly different scores.
RESEEDED = Candidate("reseeded", seed=11)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    population: Population = Population()
    risk: RiskModel = RiskModel()
    faults: dict[str, Any] = field(default_factory=dict)
    corrupt_inputs: bool = False
    # [segments] columns `driftline up` configures for the run (unless the user's config has a [segments] table)
    segments: tuple[str, ...] = ()
    rollout: Rollout | None = None
    # an online feature (driftline.worker.online_features) that stops updating when the scenario starts; the
    # replay then sends every request's feature times, and `up` configures `[freshness]` for the online features
    stale_feature: str | None = None
    # (a, b) pairs of raw columns: b's values re-paired to rise with a's (`couple`), so both keep their
    # distribution while their relation changes
    coupled: tuple[tuple[str, str], ...] = ()

    @property
    def uses_faults(self) -> bool:
        """Whether the scenario switches a worker fault on (the worker needs `--faults`)."""
        return bool(self.faults or (self.rollout is not None and self.rollout.faults))


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("none", "training-like traffic; nothing should fire"),
    # Eight of the fourteen features move, so the dataset-level verdict (half of them) is clear, not a coin toss.
    Scenario("covariate_shift", "younger, poorer applicants with lower credit scores, more on contracts, more from the south",
             population=Population(age_mean=31.0, income_median=38_000.0, credit_shift=-45.0,
                                    employment_probs=(0.48, 0.16, 0.26, 0.06, 0.04),
                                    region_probs=(0.12, 0.46, 0.14, 0.14, 0.14))),
    Scenario("concept_drift", "same applicants, new relation between inputs and default", risk=NEW_CONCEPT),
    Scenario("skew", "serving-path bug: debt_to_income uses annual instead of monthly income",
             faults={"skew": True}),
    Scenario("latency", "5% of requests take 250 ms longer", faults={"latency_ms": 250.0, "latency_fraction": 0.05}),
    Scenario("data_quality", "nulls, out-of-range values and unseen categories", corrupt_inputs=True),
    # One region in five moves, by about 0.4 standard deviation: clear inside the region, diluted
    # below the effect-size floors in the whole population (what `detect --segment-by region` is for).
    Scenario("segment_shift", "applicants from the north are younger and poorer; other regions unchanged",
             population=Population(regional=(("north", Population(age_mean=36.0, income_median=44_000.0,
                                                                   credit_shift=-10.0)),)),
             segments=("region",)),
    Scenario("stale_features", "the online store's credit_score stops updating: served values age, their "
             "distribution stays", stale_feature="credit_score"),
    # Neither column enters a derived feature, so every served feature keeps its distribution exactly: only
    # their combination (good scores with many late payments) is new, and the model's representation moves.
    Scenario("embedding_shift", "late payments now come with good credit scores: each feature as before, "
             "their combination new", coupled=(("credit_score", "num_late_payments"),)),
    Scenario("shadow", "a candidate trained with another seed shadows every request; nothing should fire",
             rollout=Rollout(SHADOW, RESEEDED)),
    # Slower (a twentieth of its answers 250 ms later, p99 far over production's) and worse (predicts
    # default for many who repay): the canary analysis fails it and the policy rolls it back.
    Scenario("canary_regression", "a slower, worse candidate as a canary; rolled back by the rollout policy",
             rollout=Rollout(CANARY, Candidate("mislabelled", seed=13, false_default_rate=0.4),
                             faults={"latency_ms": 250.0, "latency_fraction": 0.05})),
    Scenario("ab", "defaults follow a new concept in a downturn; a candidate trained on it against production, 50:50",
             risk=DOWNTURN, rollout=Rollout(AB, Candidate("downturn", seed=17, risk=DOWNTURN))),
    Scenario("aa", "an A/A test: production against an equally good candidate, 50:50; no winner may be declared",
             rollout=Rollout(AB, RESEEDED)),
)}


def couple(frame: Any, pairs: tuple[tuple[str, str], ...]) -> Any:
    """`frame` (a DataFrame) with each pair's second column re-paired to rise with the first; both keep their values."""
    out = frame.copy()
    for first, second in pairs:
        ranks = np.argsort(np.argsort(frame[first].to_numpy(), kind="stable"), kind="stable")
        out[second] = np.sort(frame[second].to_numpy(), kind="stable")[ranks]
    return out


def corrupt(records: list[dict[str, Any]], seed: int) -> int:
    """Damage records in place the way broken upstream systems do; returns how many rows changed."""
    rng = np.random.default_rng(seed)
    changed = 0
    for record in records:
        touched = False
        if rng.random() < NULL_RATE:
            record[NULLABLE[rng.integers(len(NULLABLE))]] = None
            touched = True
        if rng.random() < OUT_OF_RANGE_RATE:
            name = list(OUT_OF_RANGE)[rng.integers(len(OUT_OF_RANGE))]
            record[name] = OUT_OF_RANGE[name][rng.integers(2)]
            touched = True
        if rng.random() < UNSEEN_CATEGORY_RATE:
            name = list(UNSEEN)[rng.integers(len(UNSEEN))]
            record[name] = UNSEEN[name]
            touched = True
        changed += touched
    return changed
