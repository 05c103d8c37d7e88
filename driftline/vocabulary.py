"""The names detectors emit and every other stage reads: families, metrics and typed details.

One place for both sides, so a rule, a chart or a message can only name something a
detector reports. A stored result is (detector, feature, metric, value, threshold,
breached, details): `DETECTORS` are the detector names (per-feature `data_drift` and
the window-level `dataset_drift` are two names, so rules, inhibition and the
retraining policy can tell them apart), `METRICS` the metrics each one emits, and
the `*Details` classes what each family's ``details`` carry.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

# --- families --------------------------------------------------------------------------

DATA_DRIFT = "data_drift"
DATASET_DRIFT = "dataset_drift"
PREDICTION_DRIFT = "prediction_drift"
DATA_QUALITY = "data_quality"
SKEW = "skew"
LATENCY = "latency"
MODEL_QUALITY = "model_quality"
MULTIVARIATE_DRIFT = "multivariate_drift"
DETECTORS = (DATA_DRIFT, DATASET_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY,
             MULTIVARIATE_DRIFT)

# --- metrics ---------------------------------------------------------------------------

# data_drift and prediction_drift: the primary effect size of a feature's (or the output's) drift.
PSI = "psi"
# dataset_drift: the share of judged features that drifted.
DRIFTED_SHARE = "drifted_share"

MISSING_RATE = "missing_rate"
MISSING_FEATURE_SHARE = "missing_feature_share"
TYPE_CHANGE_SHARE = "type_change_share"
OUT_OF_RANGE_SHARE = "out_of_range_share"
UNSEEN_CATEGORY_SHARE = "unseen_category_share"
NEW_FEATURE_SHARE = "new_feature_share"
DATA_QUALITY_METRICS = (MISSING_RATE, MISSING_FEATURE_SHARE, TYPE_CHANGE_SHARE, OUT_OF_RANGE_SHARE,
                        UNSEEN_CATEGORY_SHARE, NEW_FEATURE_SHARE)

DISTRIBUTION_PSI = "distribution_psi"
PARITY_MISMATCH_RATE = "parity_mismatch_rate"
SKEW_METRICS = (DISTRIBUTION_PSI, PARITY_MISMATCH_RATE)

P50_MS = "p50_ms"
P95_MS = "p95_ms"
P99_MS = "p99_ms"
ERROR_RATE = "error_rate"
QPS = "qps"
CONCURRENCY = "concurrency"
LATENCY_METRICS = (P50_MS, P95_MS, P99_MS, ERROR_RATE, QPS, CONCURRENCY)
# The latency part whose quantiles are held to the SLO (the others are reported only).
LATENCY_TOTAL = "total"

ACCURACY = "accuracy"
PRECISION = "precision"
RECALL = "recall"
F1 = "f1"
ROC_AUC = "roc_auc"
MACRO_F1 = "macro_f1"
LOG_LOSS = "log_loss"
MAE = "mae"
RMSE = "rmse"
BIAS = "bias"  # regression's mean error: reported, never compared
# Model-quality metrics compared with a reference: higher is better for scores, lower for errors.
QUALITY_SCORES = frozenset((ACCURACY, PRECISION, RECALL, F1, ROC_AUC, MACRO_F1))
QUALITY_ERRORS = frozenset((LOG_LOSS, MAE, RMSE))
QUALITY_METRICS = QUALITY_SCORES | QUALITY_ERRORS

# multivariate_drift: the window's mean PCA reconstruction error, and a domain classifier's AUC.
PCA_RECONSTRUCTION_ERROR = "pca_reconstruction_error"
DOMAIN_CLASSIFIER_AUC = "domain_classifier_auc"
MULTIVARIATE_METRICS = (PCA_RECONSTRUCTION_ERROR, DOMAIN_CLASSIFIER_AUC)

METRICS: Mapping[str, tuple[str, ...]] = {
    DATA_DRIFT: (PSI,),
    DATASET_DRIFT: (DRIFTED_SHARE,),
    PREDICTION_DRIFT: (PSI,),
    DATA_QUALITY: DATA_QUALITY_METRICS,
    SKEW: SKEW_METRICS,
    LATENCY: LATENCY_METRICS,
    MODEL_QUALITY: (ACCURACY, PRECISION, RECALL, F1, ROC_AUC, LOG_LOSS, MAE, RMSE, BIAS, MACRO_F1),
    MULTIVARIATE_DRIFT: MULTIVARIATE_METRICS,
}

# What model quality is compared with (the ``quality_reference`` setting, ``compared_with`` in details).
QUALITY_VS_CALIBRATION = "calibration"
QUALITY_VS_TRAINING = "training"

# --- details ---------------------------------------------------------------------------

# Keys every family may set: a verdict without enough data, and why.
INSUFFICIENT_DATA_KEY = "insufficient_data"
REASON_KEY = "reason"
# A finding attributed to parity skew carries EXPLAINED_BY = SKEW.
EXPLAINED_BY_KEY = "explained_by"


@dataclass(frozen=True)
class Details:
    """Base of the typed details: every field optional, as stored results carry only what applied.

    `from_dict` keeps the known keys (a stored row from an older version may lack some);
    `to_dict` gives back the keys that were set, so ``from_dict(d).to_dict() == d``
    for whatever a detector of this version writes.
    """

    insufficient_data: bool | None = None
    reason: str | None = None

    @classmethod
    def keys(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, details: Mapping[str, Any] | None) -> "Details":
        details = details if isinstance(details, Mapping) else {}
        known = cls.keys()
        instance = cls(**{k: v for k, v in details.items() if k in known})
        object.__setattr__(instance, "_set", frozenset(k for k in details if k in known))
        return instance

    def has(self, key: str) -> bool:
        """Whether `key` was set (read from a stored result, or given a value when built)."""
        chosen = getattr(self, "_set", None)
        return key in chosen if chosen is not None else getattr(self, key, None) is not None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if self.has(f.name)}

    @property
    def insufficient(self) -> bool:
        return bool(self.insufficient_data)


@dataclass(frozen=True)
class _Attributable(Details):
    """Details of a finding that parity skew can explain (`driftline.detectors.attribution`)."""

    explained_by: str | None = None
    breached_without_skew: bool | None = None


@dataclass(frozen=True)
class DriftDetails(_Attributable):
    """data_drift / prediction_drift: the tests behind the verdict (``tests[name]`` holds value,
    p_value, p_value_adjusted, threshold, drift)."""

    kind: str | None = None
    rows: int | None = None
    tests: Mapping[str, Mapping[str, Any]] | None = None
    source: str | None = None  # prediction_drift: which model output was compared
    skewed_features: list[str] | None = None


@dataclass(frozen=True)
class DatasetDriftDetails(Details):
    """dataset_drift: which features drifted out of how many judged."""

    drifted_features: list[str] | None = None
    features: int | None = None
    explained_by_skew: list[str] | None = None


@dataclass(frozen=True)
class DataQualityDetails(_Attributable):
    """data_quality: the counts behind each share (which apply depends on the metric)."""

    events: int | None = None
    reference: float | None = None
    nulls: int | None = None
    p_value: float | None = None
    absent: int | None = None
    expected_types: list[str] | None = None
    changed: Mapping[str, int] | None = None
    below_min: int | None = None
    above_max: int | None = None
    training_min: float | None = None
    training_max: float | None = None
    window_min: float | None = None
    window_max: float | None = None
    unseen: Mapping[str, int] | None = None
    unseen_categories: int | None = None
    kind: str | None = None
    recomputed_value: float | None = None


@dataclass(frozen=True)
class SkewDetails(Details):
    """skew: distribution skew (kind, rows, parity_checked) or parity skew (sampled, compared, mismatches)."""

    kind: str | None = None
    rows: int | None = None
    parity_checked: bool | None = None
    sampled: int | None = None
    error: str | None = None
    compared: int | None = None
    mismatches: int | None = None
    examples: list[Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class LatencyDetails(Details):
    """latency: the counts behind a quantile, the error rate, QPS or concurrency."""

    events: int | None = None
    count: int | None = None
    max_ms: float | None = None
    errors: int | None = None
    window_seconds: float | None = None
    qps: float | None = None
    mean_latency_ms: float | None = None


@dataclass(frozen=True)
class QualityDetails(Details):
    """model_quality: the reference a metric was judged against and the noise margin around it."""

    task: str | None = None
    labels: int | None = None
    training: float | None = None
    expected: float | None = None
    compared_with: str | None = None
    support: int | None = None
    support_of: str | None = None
    standard_error: float | None = None
    z: float | None = None
    skewness: float | None = None
    margin: float | None = None
    minimum_margin: float | None = None
    dropped_labels: int | None = None
    skewed_features: list[str] | None = None
    # Set by the evaluation when a window with few labels is judged on labels pooled with earlier windows.
    window_labels: int | None = None
    pooled_windows: int | None = None
    pooled_labels: int | None = None

    @property
    def reference(self) -> float | None:
        """What the detector compared with: the calibration's expectation when set, else the training metric."""
        return self.expected if self.has("expected") else self.training


@dataclass(frozen=True)
class MultivariateDetails(_Attributable):
    """multivariate_drift: the rows compared and the features that contribute most.

    pca_reconstruction_error: the band ``lower``..``upper`` (``threshold`` is ``upper``) around
    ``reference_mean``, the kept ``components`` and their ``variance_share``; ``top_features``
    as ``{"name", "share"}`` (share of the error increase). domain_classifier_auc: ``folds``,
    ``auc_std`` across them; ``top_features`` as ``{"name", "importance"}`` (AUC lost when the
    feature is permuted).
    """

    rows: int | None = None
    reference_rows: int | None = None
    lower: float | None = None
    upper: float | None = None
    reference_mean: float | None = None
    components: int | None = None
    variance_share: float | None = None
    folds: int | None = None
    auc_std: float | None = None
    top_features: list[Mapping[str, Any]] | None = None
    skewed_features: list[str] | None = None


DETAILS: Mapping[str, type[Details]] = {
    DATA_DRIFT: DriftDetails,
    PREDICTION_DRIFT: DriftDetails,
    DATASET_DRIFT: DatasetDriftDetails,
    DATA_QUALITY: DataQualityDetails,
    SKEW: SkewDetails,
    LATENCY: LatencyDetails,
    MODEL_QUALITY: QualityDetails,
    MULTIVARIATE_DRIFT: MultivariateDetails,
}


def details_of(detector: str, details: Mapping[str, Any] | None) -> Details:
    """The typed details of a `detector`'s result (plain `Details` for a name this version does not know)."""
    return DETAILS.get(detector, Details).from_dict(details)
