"""The bundled credit-default data set: a seeded, documented generating process.

Each row is one loan application (the raw `inputs` of driftline.worker.feature_transform) and a
label, 1 if the loan defaults. The process, in order (N = normal, LN = log-normal):

- age ~ N(age_mean, 12) clipped to [18, 90], rounded.
- employment_type ~ Categorical(employment_probs); an applicant aged >= 63 is
  "retired" with probability 0.7.
- annual_income ~ LN(log(income_median) + 0.012·(min(age, 60) − 40) + e_type, 0.45),
  e_type: self_employed +0.10, contract −0.10, unemployed −1.20, retired −0.50.
- monthly_debt = annual_income / 12 · Beta(2, 6)      (debt-to-income about 0.25)
- loan_amount ~ LN(log(14 000), 0.65) clipped to [500, 500 000].
- loan_term_months ~ {12, 24, 36, 48, 60} with p = .10, .20, .35, .15, .20.
- num_late_payments ~ Poisson(0.5 + 0.8·[unemployed]).
- credit_score ~ N(690 + 2·(min(age, 65) − 40) − 25·late + credit_shift, 55) in [300, 850].
- num_credit_lines ~ 1 + Poisson(3 + age / 20).
- employment_years ~ min(age − 18, Gamma(2, 3.5)); 0 when unemployed.
- credit_limit ~ LN(log(8 000) + 0.5·(credit_score − 690) / 100, 0.5);
  credit_balance = credit_limit · Beta(2, 3).
- region ~ Categorical(region_probs); the applicants of a region named in `regional` are
  then redrawn, by the same process, from that region's own population;
  home_ownership: own with p = clip(0.01·(age − 25), 0.02, 0.6),
  mortgage 0.35, rent the rest.

Default: y ~ Bernoulli(sigmoid(z)) with, in terms of the transformed features
(dti = debt_to_income, lti = loan_to_income, util = credit_utilization):

    z = intercept + w_dti·(dti − 0.25) + 0.6·(lti − 0.4) − w_score·(credit_score − 690)
        + w_late·late + 1.6·(util − 0.4) − 0.04·(employment_years − 6) + 0.1·(term − 36) / 12
        + type effect (unemployed 0.9, self_employed 0.25, contract 0.2, retired 0.1)
        + home effect (rent 0.3, own −0.2) + region effect (south: w_south)
        + 1.0·[dti > 0.4 and util > 0.7]

with the defaults of `RiskModel` (intercept −2.4, w_dti 3, w_score 0.011, w_late 0.35,
w_south 0.15) the default rate is about 20 %. `Population` and `RiskModel` are the
knobs the replay scenarios turn: a covariate shift changes the population, a concept
drift changes the risk model.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from driftline.worker.feature_transform import RAW_INPUTS, FeatureTransform

EMPLOYMENT_TYPES = ("salaried", "self_employed", "contract", "unemployed", "retired")
REGIONS = ("north", "south", "east", "west", "central")
HOME_OWNERSHIP = ("own", "mortgage", "rent")
RAW_COLUMNS = tuple(name for name, _, _ in RAW_INPUTS)


@dataclass(frozen=True)
class Population:
    """Who applies: the input distribution."""

    age_mean: float = 41.0
    income_median: float = 52_000.0
    credit_shift: float = 0.0
    employment_probs: tuple[float, ...] = (0.62, 0.14, 0.14, 0.06, 0.04)
    region_probs: tuple[float, ...] = (0.22, 0.24, 0.20, 0.20, 0.14)
    # (region, population) pairs: applicants drawn into that region come from that population instead.
    regional: tuple[tuple[str, "Population"], ...] = ()


@dataclass(frozen=True)
class RiskModel:
    """How inputs relate to default: the concept."""

    intercept: float = -2.4
    w_dti: float = 3.0
    w_score: float = 0.011
    w_late: float = 0.35
    w_south: float = 0.15
    type_effects: dict[str, float] = field(default_factory=lambda: {
        "unemployed": 0.9, "self_employed": 0.25, "contract": 0.2, "retired": 0.1})


def generate_inputs(rows: int, seed: int, population: Population = Population()) -> pd.DataFrame:
    """`rows` raw loan applications (columns RAW_COLUMNS), reproducible from `seed`."""
    if rows <= 0:
        raise ValueError("rows must be positive")
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(population.age_mean, 12.0, rows), 18, 90).round()
    employment = rng.choice(np.array(EMPLOYMENT_TYPES, dtype=object), size=rows, p=_normalised(population.employment_probs))
    employment = np.where((age >= 63) & (rng.random(rows) < 0.7), "retired", employment)
    type_income = pd.Series(employment).map({"self_employed": 0.10, "contract": -0.10, "unemployed": -1.20,
                                             "retired": -0.50}).fillna(0.0).to_numpy()
    log_income = np.log(population.income_median) + 0.012 * (np.minimum(age, 60) - 40) + type_income
    annual_income = np.exp(rng.normal(log_income, 0.45)).round(-2)
    monthly_debt = (annual_income / 12 * rng.beta(2, 6, rows)).round(2)
    loan_amount = np.clip(np.exp(rng.normal(np.log(14_000), 0.65, rows)), 500, 500_000).round(-2)
    loan_term = rng.choice(np.array([12, 24, 36, 48, 60]), size=rows, p=[0.10, 0.20, 0.35, 0.15, 0.20])
    unemployed = employment == "unemployed"
    late = rng.poisson(0.5 + 0.8 * unemployed)
    score_mean = 690 + 2 * (np.minimum(age, 65) - 40) - 25 * late + population.credit_shift
    credit_score = np.clip(rng.normal(score_mean, 55.0), 300, 850).round()
    credit_lines = 1 + rng.poisson(3 + age / 20)
    employment_years = np.where(unemployed, 0.0, np.minimum(age - 18, rng.gamma(2.0, 3.5, rows))).round(1)
    credit_limit = np.exp(rng.normal(np.log(8_000) + 0.5 * (credit_score - 690) / 100, 0.5)).round(-2)
    credit_balance = (credit_limit * rng.beta(2, 3, rows)).round(2)
    region = rng.choice(np.array(REGIONS, dtype=object), size=rows, p=_normalised(population.region_probs))
    p_own = np.clip(0.01 * (age - 25), 0.02, 0.6)
    u = rng.random(rows)
    home = np.where(u < p_own, "own", np.where(u < p_own + 0.35, "mortgage", "rent"))
    frame = pd.DataFrame({
        "age": age.astype(np.int64),
        "annual_income": annual_income,
        "monthly_debt": monthly_debt,
        "loan_amount": loan_amount,
        "loan_term_months": loan_term.astype(np.int64),
        "credit_score": credit_score.astype(np.int64),
        "num_credit_lines": credit_lines.astype(np.int64),
        "num_late_payments": late.astype(np.int64),
        "employment_years": employment_years,
        "credit_limit": credit_limit,
        "credit_balance": credit_balance,
        "region": region.astype(object),
        "employment_type": employment.astype(object),
        "home_ownership": home.astype(object),
    })
    for number, (name, override) in enumerate(population.regional, start=1):
        frame = _regional(frame, name, override, seed + 7919 * number)
    return frame[list(RAW_COLUMNS)]


def _regional(frame: pd.DataFrame, region: str, population: Population, seed: int) -> pd.DataFrame:
    """`frame` with its `region` rows redrawn from `population` (the other rows untouched)."""
    if region not in REGIONS:
        raise ValueError(f"unknown region {region!r}; expected one of {', '.join(REGIONS)}")
    rows = frame["region"].to_numpy() == region
    if not rows.any():
        return frame
    only_here = tuple(1.0 if name == region else 0.0 for name in REGIONS)
    local = replace(population, region_probs=only_here, regional=())
    redrawn = generate_inputs(int(rows.sum()), seed, local)
    frame = frame.copy()
    frame.loc[rows, list(redrawn.columns)] = redrawn.to_numpy()
    return frame.astype(frame.dtypes.to_dict())


def default_probability(inputs: pd.DataFrame, risk: RiskModel = RiskModel()) -> np.ndarray:
    """P(default | inputs) under `risk` (the formula in the module docstring)."""
    features = pd.DataFrame(FeatureTransform().apply(inputs.to_dict("records")))
    dti = features["debt_to_income"].astype(float).fillna(0.25).to_numpy()
    lti = features["loan_to_income"].astype(float).fillna(0.4).to_numpy()
    util = features["credit_utilization"].astype(float).fillna(0.4).to_numpy()
    score = features["credit_score"].astype(float).fillna(690).to_numpy()
    late = features["num_late_payments"].astype(float).fillna(0).to_numpy()
    years = features["employment_years"].astype(float).fillna(6).to_numpy()
    term = features["loan_term_months"].astype(float).fillna(36).to_numpy()
    z = (risk.intercept + risk.w_dti * (dti - 0.25) + 0.6 * (lti - 0.4) - risk.w_score * (score - 690)
         + risk.w_late * late + 1.6 * (util - 0.4) - 0.04 * (years - 6) + 0.1 * (term - 36) / 12)
    z += features["employment_type"].map(risk.type_effects).astype(float).fillna(0.0).to_numpy()
    z += features["home_ownership"].map({"rent": 0.3, "own": -0.2}).astype(float).fillna(0.0).to_numpy()
    z += np.where(features["region"].to_numpy() == "south", risk.w_south, 0.0)
    z += np.where((dti > 0.4) & (util > 0.7), 1.0, 0.0)
    return 1.0 / (1.0 + np.exp(-z))


def sample_labels(probability: np.ndarray, seed: int) -> np.ndarray:
    """Bernoulli draws (0/1) for the given default probabilities."""
    return (np.random.default_rng(seed).random(len(probability)) < probability).astype(np.int64)


def generate(rows: int, seed: int, population: Population = Population(),
             risk: RiskModel = RiskModel()) -> tuple[pd.DataFrame, np.ndarray]:
    """Raw inputs and default labels: the bundled training set when called with the defaults."""
    inputs = generate_inputs(rows, seed, population)
    labels = sample_labels(default_probability(inputs, risk), seed + 1)
    return inputs, labels


def data_sha256(inputs: pd.DataFrame, labels: np.ndarray) -> str:
    """A content hash of a training set (inputs as CSV in column order, then labels)."""
    digest = hashlib.sha256()
    digest.update(inputs.to_csv(index=False).encode())
    digest.update(np.asarray(labels, dtype=np.int64).tobytes())
    return digest.hexdigest()


def _normalised(probs: tuple[float, ...]) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    return p / p.sum()
