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

Every scenario emits labels (so model quality can be measured); they are delayed,
as ground truth is in real life.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from driftline.worker.dataset import Population, RiskModel

# data_quality corruption rates, per row.
NULL_RATE = 0.15
OUT_OF_RANGE_RATE = 0.05
UNSEEN_CATEGORY_RATE = 0.10
NULLABLE = ("annual_income", "credit_score", "employment_years", "region")
OUT_OF_RANGE = {"age": (-5, 150), "credit_score": (0, 2000), "num_credit_lines": (-3, 400), "loan_term_months": (0, 600)}
UNSEEN = {"region": "atlantis", "employment_type": "gig_worker", "home_ownership": "houseboat"}


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


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("none", "training-like traffic; nothing should fire"),
    # Eight of the fourteen features move, so the dataset-level verdict (half of them) is clear, not a coin toss.
    Scenario("covariate_shift", "younger, poorer applicants with lower credit scores, more on contracts, more from the south",
             population=Population(age_mean=31.0, income_median=38_000.0, credit_shift=-45.0,
                                    employment_probs=(0.48, 0.16, 0.26, 0.06, 0.04),
                                    region_probs=(0.12, 0.46, 0.14, 0.14, 0.14))),
    Scenario("concept_drift", "same applicants, new relation between inputs and default",
             risk=RiskModel(w_dti=7.0, w_score=0.0055, w_late=0.9, w_south=1.2)),
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
)}


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
