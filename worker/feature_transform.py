"""The credit-default model's feature transform, shared by training, serving and the parity-skew detector.

Raw request `inputs` (what a caller sends to the worker, what an applicant filled in)
become model `features` in two steps:

1. `FeatureTransform.apply(inputs_records) -> feature_records`: interpretable
   features, still one dict per row and still holding nulls and unseen categories,
   so that data-quality problems stay visible in the logged `features`::

       debt_to_income     = monthly_debt / (annual_income / 12)
       loan_to_income     = loan_amount / annual_income
       credit_utilization = credit_balance / credit_limit
       categories         = value.strip().lower()

   a ratio is null when an operand is null or its denominator is <= 0; every other
   numeric input is passed through as a float. This step has no fitted state: the
   scheduler re-runs it on logged `inputs` and compares with the logged `features`.
2. `FeatureTransform.encode(feature_records) -> float32 matrix`: the model's input,
   with statistics fitted on the training features: a null numeric becomes the
   training median, heavy-tailed money amounts and loan_to_income are log1p-compressed (signed),
   everything is standardised, z = (x - mean) / std, and clipped to ±`Z_CLIP`;
   a categorical is one-hot over the training vocabulary plus one "unknown" column
   that takes nulls and categories never seen in training.

Pure Python + numpy: no torch, no pandas, no I/O, so the scheduler can import it. Its spec
names it by import path (driftline.transform), as a user's own transform is named.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from driftline.transform import IMPORT_KEY, import_path
from driftline.vocabulary import CATEGORICAL, NUMERIC

TRANSFORM_KIND = "credit-default"
# Bump when `apply` computes anything differently; stored with every model version.
TRANSFORM_VERSION = 1

# The raw request fields, in order: (name, kind, documented valid range or categories).
RAW_INPUTS: tuple[tuple[str, str, Any], ...] = (
    ("age", NUMERIC, (18, 100)),
    ("annual_income", NUMERIC, (0, 2_000_000)),
    ("monthly_debt", NUMERIC, (0, 100_000)),
    ("loan_amount", NUMERIC, (500, 500_000)),
    ("loan_term_months", NUMERIC, (6, 120)),
    ("credit_score", NUMERIC, (300, 850)),
    ("num_credit_lines", NUMERIC, (0, 60)),
    ("num_late_payments", NUMERIC, (0, 50)),
    ("employment_years", NUMERIC, (0, 70)),
    ("credit_limit", NUMERIC, (0, 500_000)),
    ("credit_balance", NUMERIC, (0, 500_000)),
    ("region", CATEGORICAL, ("north", "south", "east", "west", "central")),
    ("employment_type", CATEGORICAL, ("salaried", "self_employed", "contract", "unemployed", "retired")),
    ("home_ownership", CATEGORICAL, ("own", "mortgage", "rent")),
)

# The model features `apply` produces, in order.
FEATURES: tuple[tuple[str, str], ...] = (
    ("age", NUMERIC),
    ("annual_income", NUMERIC),
    ("loan_amount", NUMERIC),
    ("loan_term_months", NUMERIC),
    ("credit_score", NUMERIC),
    ("debt_to_income", NUMERIC),
    ("loan_to_income", NUMERIC),
    ("credit_utilization", NUMERIC),
    ("num_credit_lines", NUMERIC),
    ("num_late_payments", NUMERIC),
    ("employment_years", NUMERIC),
    ("region", CATEGORICAL),
    ("employment_type", CATEGORICAL),
    ("home_ownership", CATEGORICAL),
)
_PASSTHROUGH = ("age", "annual_income", "loan_amount", "loan_term_months", "credit_score",
                "num_credit_lines", "num_late_payments", "employment_years")
_CATEGORICAL_FEATURES = tuple(name for name, kind in FEATURES if kind == CATEGORICAL)
# Money amounts and the loan-to-income ratio span orders of magnitude; log1p keeps
# one rich applicant from dominating the standardised scale.
LOG_FEATURES = ("annual_income", "loan_amount", "loan_to_income")
# Standardised values beyond this many standard deviations carry no extra signal
# and would let an out-of-range input (age 500) saturate the network.
Z_CLIP = 8.0


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _ratio(numerator: Any, denominator: Any) -> float | None:
    top, bottom = _number(numerator), _number(denominator)
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


def _category(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).strip().lower()


def transform_row(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """One raw input dict -> one feature dict (the formulas in the module docstring)."""
    get = inputs.get
    features: dict[str, Any] = {name: _number(get(name)) for name in _PASSTHROUGH}
    income = get("annual_income")
    monthly_income = _number(income)
    features["debt_to_income"] = _ratio(get("monthly_debt"), None if monthly_income is None else monthly_income / 12.0)
    features["loan_to_income"] = _ratio(get("loan_amount"), income)
    features["credit_utilization"] = _ratio(get("credit_balance"), get("credit_limit"))
    for name in _CATEGORICAL_FEATURES:
        features[name] = _category(get(name))
    return {name: features[name] for name, _ in FEATURES}


@dataclass
class FeatureTransform:
    """Raw inputs -> features (`apply`) -> model matrix (`encode`); see the module docstring.

    `medians`, `means`, `stds` and `vocabulary` are fitted on training features by `fit`;
    an unfitted transform can `apply` but not `encode`.
    """

    medians: dict[str, float] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    stds: dict[str, float] = field(default_factory=dict)
    vocabulary: dict[str, list[str]] = field(default_factory=dict)
    version: int = TRANSFORM_VERSION

    numeric_features = tuple(name for name, kind in FEATURES if kind == NUMERIC)
    categorical_features = _CATEGORICAL_FEATURES

    # --- step 1: raw inputs -> features --------------------------------------------
    def apply(self, inputs_records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Feature records for raw input records (pure, deterministic, no fitted state)."""
        return [transform_row(inputs) for inputs in inputs_records]

    @staticmethod
    def input_schema() -> list[dict[str, Any]]:
        """The raw request fields: name, kind and the documented valid range or categories."""
        schema = []
        for name, kind, valid in RAW_INPUTS:
            entry: dict[str, Any] = {"name": name, "kind": kind}
            if kind == NUMERIC:
                entry["min"], entry["max"] = valid
            else:
                entry["categories"] = list(valid)
            schema.append(entry)
        return schema

    @staticmethod
    def feature_schema() -> list[dict[str, str]]:
        return [{"name": name, "kind": kind} for name, kind in FEATURES]

    # --- step 2: features -> model matrix ------------------------------------------
    @classmethod
    def fit(cls, feature_records: Sequence[Mapping[str, Any]]) -> "FeatureTransform":
        """Fit imputation, scaling and vocabularies on training feature records."""
        if not feature_records:
            raise ValueError("cannot fit a feature transform on zero rows")
        medians, means, stds, vocabulary = {}, {}, {}, {}
        for name in cls.numeric_features:
            column = np.array([np.nan if r.get(name) is None else r[name] for r in feature_records], dtype=np.float64)
            observed = column[~np.isnan(column)]
            median = float(np.median(observed)) if observed.size else 0.0
            filled = _compress(name, np.where(np.isnan(column), median, column))
            medians[name] = median
            means[name] = float(filled.mean())
            std = float(filled.std())
            stds[name] = std if std > 1e-12 else 1.0
        for name in cls.categorical_features:
            vocabulary[name] = sorted({r[name] for r in feature_records if r.get(name) is not None})
        return cls(medians=medians, means=means, stds=stds, vocabulary=vocabulary)

    @property
    def encoded_width(self) -> int:
        return len(self.numeric_features) + sum(len(v) + 1 for v in self.vocabulary.values())

    def encode(self, feature_records: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """A float32 matrix, one row per feature record (module docstring, step 2)."""
        if not self.means:
            raise ValueError("the feature transform is not fitted; call FeatureTransform.fit first")
        rows = len(feature_records)
        out = np.zeros((rows, self.encoded_width), dtype=np.float32)
        for j, name in enumerate(self.numeric_features):
            column = np.array([r.get(name) for r in feature_records], dtype=np.float64)  # None -> nan
            column = np.where(np.isfinite(column), column, self.medians[name])
            z = (_compress(name, column) - self.means[name]) / self.stds[name]
            out[:, j] = np.clip(z, -Z_CLIP, Z_CLIP)
        offset = len(self.numeric_features)
        for name in self.categorical_features:
            vocab = self.vocabulary[name]
            index = {category: k for k, category in enumerate(vocab)}
            unknown = len(vocab)
            for i, record in enumerate(feature_records):
                out[i, offset + index.get(record.get(name), unknown)] = 1.0
            offset += unknown + 1
        return out

    # --- registry round trip -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            IMPORT_KEY: import_path(FeatureTransform),
            "kind": TRANSFORM_KIND,
            "version": self.version,
            "inputs": self.input_schema(),
            "features": self.feature_schema(),
            "log_features": list(LOG_FEATURES),
            "z_clip": Z_CLIP,
            "medians": self.medians,
            "means": self.means,
            "stds": self.stds,
            "vocabulary": self.vocabulary,
        }

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "FeatureTransform":
        if spec.get("kind") != TRANSFORM_KIND:
            raise ValueError(f"unknown feature transform kind {spec.get('kind')!r}; expected {TRANSFORM_KIND!r}")
        if spec.get("version") != TRANSFORM_VERSION:
            raise ValueError(f"feature transform version {spec.get('version')!r} is not supported by this "
                             f"driftline (it implements version {TRANSFORM_VERSION})")
        return cls(medians=dict(spec.get("medians", {})), means=dict(spec.get("means", {})),
                   stds=dict(spec.get("stds", {})), vocabulary={k: list(v) for k, v in spec.get("vocabulary", {}).items()},
                   version=spec["version"])


def _compress(name: str, column: np.ndarray) -> np.ndarray:
    if name in LOG_FEATURES:
        return np.sign(column) * np.log1p(np.abs(column))
    return column
