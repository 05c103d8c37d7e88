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
from typing import Any, Mapping, Self

# --- feature kinds ---------------------------------------------------------------------
# A feature is compared as numbers (bins, KS, Wasserstein) or as categories (counts, chi-square).
NUMERIC = "numeric"
CATEGORICAL = "categorical"
FEATURE_KINDS = (NUMERIC, CATEGORICAL)

# --- families --------------------------------------------------------------------------

DATA_DRIFT = "data_drift"
DATASET_DRIFT = "dataset_drift"
PREDICTION_DRIFT = "prediction_drift"
DATA_QUALITY = "data_quality"
SKEW = "skew"
LATENCY = "latency"
MODEL_QUALITY = "model_quality"
# A binary classifier's quality estimated from its scores before labels arrive (CBPE).
ESTIMATED_QUALITY = "estimated_quality"
# How the features move together: PCA reconstruction error and a domain classifier.
MULTIVARIATE_DRIFT = "multivariate_drift"
# Named vectors on events (text, image, the model's own activations) against their training reference.
EMBEDDING_DRIFT = "embedding_drift"
DETECTORS = (DATA_DRIFT, DATASET_DRIFT, MULTIVARIATE_DRIFT, EMBEDDING_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW,
             LATENCY, MODEL_QUALITY, ESTIMATED_QUALITY)
# The alert family of a candidate's failed verdict: raised by the rollout analysis, not by a window's
# detectors, so it is an alert family (rules, silences, messages) without being one of DETECTORS.
ROLLOUT = "rollout"
ROLLOUT_VERDICT = "verdict"  # its one metric: the verdict itself (no value, no threshold)
ALERT_FAMILIES = (*DETECTORS, ROLLOUT)
# the families whose results carry sequential evidence (driftline.detectors.families.evidence): they page on it
SEQUENTIAL_FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, DATASET_DRIFT, ESTIMATED_QUALITY, EMBEDDING_DRIFT, MODEL_QUALITY)


@dataclass(frozen=True)
class Family:
    """How people read a family: its heading on the dashboard, and the problem an alert names."""

    title: str
    problem: str


# In DETECTORS order, which is also the dashboard's order of sections.
FAMILIES = {
    DATA_DRIFT: Family("Feature drift", "data drift"),
    DATASET_DRIFT: Family("Dataset drift", "dataset drift"),
    MULTIVARIATE_DRIFT: Family("Multivariate drift", "multivariate drift"),
    EMBEDDING_DRIFT: Family("Embedding drift", "embedding drift"),
    PREDICTION_DRIFT: Family("Prediction drift", "prediction drift"),
    DATA_QUALITY: Family("Data quality", "data quality"),
    SKEW: Family("Training-serving skew", "training-serving skew"),
    LATENCY: Family("Latency and traffic", "latency SLO breach"),
    MODEL_QUALITY: Family("Model quality", "model quality drop"),
    ESTIMATED_QUALITY: Family("Estimated quality (before labels)", "estimated quality drop"),
    ROLLOUT: Family("Rollouts", "failed rollout"),
}


def family(detector: str) -> Family:
    """The family's names; a detector this version does not know (an old row) is named after itself."""
    known = FAMILIES.get(detector)
    if known is not None:
        return known
    words = detector.replace("_", " ")
    return Family(words.capitalize(), words)

# --- metrics ---------------------------------------------------------------------------

# data_drift and prediction_drift: the primary effect size of a feature's (or the output's) drift.
PSI = "psi"
# The drift tests a feature's `tests` hold (detect's JSON, a data_drift result's details):
# significance tests (a p-value) and distances (a value against a threshold).
KS = "ks"
CHI2 = "chi2"
WASSERSTEIN = "wasserstein"
JENSENSHANNON = "jensenshannon"
LINF = "linf"
SIGNIFICANCE_TESTS = (KS, CHI2)
DISTANCES = (PSI, WASSERSTEIN, JENSENSHANNON, LINF)
# dataset_drift: the share of judged features that drifted.
DRIFTED_SHARE = "drifted_share"

MISSING_RATE = "missing_rate"
MISSING_FEATURE_SHARE = "missing_feature_share"
TYPE_CHANGE_SHARE = "type_change_share"
OUT_OF_RANGE_SHARE = "out_of_range_share"
UNSEEN_CATEGORY_SHARE = "unseen_category_share"
NEW_FEATURE_SHARE = "new_feature_share"
# the share of requests whose feature value was older than its [freshness] max_age (stale online features)
STALE_FEATURES = "stale_features"
DATA_QUALITY_METRICS = (MISSING_RATE, MISSING_FEATURE_SHARE, TYPE_CHANGE_SHARE, OUT_OF_RANGE_SHARE,
                        UNSEEN_CATEGORY_SHARE, NEW_FEATURE_SHARE, STALE_FEATURES)

DISTRIBUTION_PSI = "distribution_psi"
PARITY_MISMATCH_RATE = "parity_mismatch_rate"
SKEW_METRICS = (DISTRIBUTION_PSI, PARITY_MISMATCH_RATE)

P50_MS = "p50_ms"
P95_MS = "p95_ms"
P99_MS = "p99_ms"
ERROR_RATE = "error_rate"
QPS = "qps"
CONCURRENCY = "concurrency"
# Generated answers (docs/detectors.md, Latency): each request's decode rate, 1000 / tpot (output tokens per
# second after the first token), at its window median; and the window's output tokens per second of window.
TOKENS_PER_SECOND_P50 = "tokens_per_second_p50"
OUTPUT_TOKENS_PER_SECOND = "output_tokens_per_second"
LATENCY_METRICS = (P50_MS, P95_MS, P99_MS, ERROR_RATE, QPS, CONCURRENCY, TOKENS_PER_SECOND_P50,
                   OUTPUT_TOKENS_PER_SECOND)
# The request's whole latency; its objectives are [latency]'s top-level keys, other parts' are [latency.parts.NAME].
LATENCY_TOTAL = "total"
# A generated answer's parts: time to first token, and time per output token after the first.
LATENCY_TTFT = "ttft"
LATENCY_TPOT = "tpot"
# The events' token counts (`tokens_in`, `tokens_out`), as the window state keeps them.
TOKENS_IN = "tokens_in"
TOKENS_OUT = "tokens_out"
TOKEN_COUNTS = (TOKENS_IN, TOKENS_OUT)
# The model's own part of it: what a shadow is judged on (its queue waits behind production on purpose).
LATENCY_COMPUTE = "compute"

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
# What estimated_quality estimates, in the order `detect`'s JSON lists them.
ESTIMATED_METRICS = (ROC_AUC, ACCURACY, PRECISION, RECALL, F1)
# estimated_quality's verdict on its own estimates once labels came: realized left the bands too often
# (driftline.detectors.estimation.validity); also the result's feature, so it alerts apart from the estimates.
ESTIMATION_INVALID = "estimation_invalid"
# The event field with the model's own decision (a binary classifier's 0/1), beside its score.
PREDICTED_CLASS = "predicted_class"

# multivariate_drift: the window's mean PCA reconstruction error, and a domain classifier's AUC.
PCA_RECONSTRUCTION_ERROR = "pca_reconstruction_error"
DOMAIN_CLASSIFIER_AUC = "domain_classifier_auc"
MULTIVARIATE_METRICS = (PCA_RECONSTRUCTION_ERROR, DOMAIN_CLASSIFIER_AUC)
# embedding_drift: one result per embedding, valued by its MMD^2 (the details hold every test).
MMD2 = "mmd2"

METRICS: Mapping[str, tuple[str, ...]] = {
    DATA_DRIFT: (PSI,),
    DATASET_DRIFT: (DRIFTED_SHARE,),
    PREDICTION_DRIFT: (PSI,),
    DATA_QUALITY: DATA_QUALITY_METRICS,
    SKEW: SKEW_METRICS,
    LATENCY: LATENCY_METRICS,
    MODEL_QUALITY: (ACCURACY, PRECISION, RECALL, F1, ROC_AUC, LOG_LOSS, MAE, RMSE, BIAS, MACRO_F1),
    ESTIMATED_QUALITY: (*ESTIMATED_METRICS, ESTIMATION_INVALID),
    MULTIVARIATE_DRIFT: MULTIVARIATE_METRICS,
    EMBEDDING_DRIFT: (MMD2,),
    ROLLOUT: (ROLLOUT_VERDICT,),
}

# What model quality is compared with (the ``quality_compared_with`` setting, ``compared_with`` in details).
QUALITY_VS_CALIBRATION = "calibration"
QUALITY_VS_TRAINING = "training"
# Where a baseline's quality reference came from (`Baseline.quality_reference`): the rows the model was fitted on
# (`driftline baseline --label` alone: in-sample, optimistic) or held-out rows (`--quality-file`).
QUALITY_FROM_TRAINING_ROWS = "training rows"
QUALITY_FROM_HOLDOUT = "holdout"

# --- rollouts ----------------------------------------------------------------------------

# How a candidate version meets live traffic (the routing plan's mode).
ROLLOUT_SHADOW = "shadow"
ROLLOUT_CANARY = "canary"
ROLLOUT_AB = "ab"
ROLLOUT_MODES = (ROLLOUT_SHADOW, ROLLOUT_CANARY, ROLLOUT_AB)

# Comparison metrics, candidate minus production (an A/B test: arm B minus arm A), per window.
FLIP_RATE = "flip_rate"  # shadow: share of paired requests whose decision differs
SCORE_KS = "score_ks"  # shadow: KS statistic between the two versions' scores
SCORE_WASSERSTEIN = "score_wasserstein"  # shadow: normalised Wasserstein distance of the scores
ERROR_RATE_DELTA = "error_rate_delta"
P50_DELTA_MS = "p50_delta_ms"
P95_DELTA_MS = "p95_delta_ms"
P99_DELTA_MS = "p99_delta_ms"
QUALITY_DELTA = "quality_delta"
# The candidate's prediction drift against its own baseline (the prediction_drift family's verdict).
CANDIDATE_DRIFT = "candidate_drift"
# A/B: the always-valid p-value of the quality difference over all windows so far.
SEQUENTIAL_P_VALUE = "sequential_p_value"
ROLLOUT_METRICS = (FLIP_RATE, SCORE_KS, SCORE_WASSERSTEIN, ERROR_RATE_DELTA, P50_DELTA_MS, P95_DELTA_MS,
                   P99_DELTA_MS, QUALITY_DELTA, CANDIDATE_DRIFT, SEQUENTIAL_P_VALUE)
# The metrics a verdict judges against an allowed delta (the others are reported).
ROLLOUT_JUDGED = (FLIP_RATE, ERROR_RATE_DELTA, P99_DELTA_MS, QUALITY_DELTA, CANDIDATE_DRIFT)

# A rollout's verdict, and of each judged metric.
VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"
VERDICT_INCONCLUSIVE = "inconclusive"
VERDICTS = (VERDICT_PASS, VERDICT_FAIL, VERDICT_INCONCLUSIVE)

# What the rollout does next (`next_step`).
STEP_PROMOTE = "promote"
STEP_ROLLBACK = "rollback"
STEP_UP = "step_up"
STEP_HOLD = "hold"
# an A/B test's arms that failed a critical metric leave it (their traffic to the control); the rest go on
STEP_DROP_ARMS = "drop_arms"
STEPS = (STEP_PROMOTE, STEP_ROLLBACK, STEP_UP, STEP_HOLD, STEP_DROP_ARMS)
# What a retrained version that beat production becomes (`[alerts.retrain] rollout`): production at once,
# or the candidate of a new shadow or canary plan.
RETRAIN_ROLLOUTS = (STEP_PROMOTE, ROLLOUT_SHADOW, ROLLOUT_CANARY)

# --- details ---------------------------------------------------------------------------

# Keys every family may set: a verdict without enough data (also the window's status then), and why. A reason
# then starts with the same words, spelt for people.
INSUFFICIENT_DATA = "insufficient_data"
INSUFFICIENT_DATA_REASON = INSUFFICIENT_DATA.replace("_", " ")

# --- window statuses (window_evaluations.status) -----------------------------------------
# Evaluated with a baseline; no baseline registered for the version yet (nothing to compare with); or the
# window's whole-population data drift had too few rows for a verdict.
WINDOW_OK = "ok"
WINDOW_NO_BASELINE = "no_baseline"
WINDOW_INSUFFICIENT_DATA = INSUFFICIENT_DATA
WINDOW_STATUSES = (WINDOW_OK, WINDOW_NO_BASELINE, WINDOW_INSUFFICIENT_DATA)
REASON_KEY = "reason"
# A finding attributed to parity skew carries EXPLAINED_BY = SKEW.
EXPLAINED_BY_KEY = "explained_by"
# Drift results: where the effect-size thresholds came from ("fixed" or "reference"), and why not
# from the reference when that was asked for and could not be done.
THRESHOLD_SOURCE_KEY = "threshold_source"
THRESHOLD_NOTE_KEY = "threshold_note"


@dataclass(frozen=True)
class Details:
    """Base of the typed details: every field optional, as stored results carry only what applied.

    `from_dict` keeps the known keys (a stored row from an older version may lack some);
    `to_dict` gives back the keys that were set, so ``from_dict(d).to_dict() == d``
    for whatever a detector of this version writes.
    """

    insufficient_data: bool | None = None
    reason: str | None = None
    # drift families and estimated quality: the sequential evidence of the result's stream after
    # this window (e_value, line, paging, since_window_start_ms, ...; driftline.detectors.families.evidence)
    evidence: Mapping[str, Any] | None = None

    @classmethod
    def keys(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, details: Mapping[str, Any] | None) -> Self:
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
    """Details of a finding that parity skew can explain (`driftline.detectors.families.attribution`)."""

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
    threshold_source: str | None = None
    threshold_note: str | None = None


@dataclass(frozen=True)
class DatasetDriftDetails(Details):
    """dataset_drift: which features drifted out of how many judged."""

    drifted_features: list[str] | None = None
    features: int | None = None
    explained_by_skew: list[str] | None = None
    threshold_source: str | None = None
    threshold_note: str | None = None


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
    # stale_features: requests whose age was known, how many were older than max_age_ms, age percentiles
    aged: int | None = None
    stale: int | None = None
    max_age_ms: float | None = None
    age_p50_ms: float | None = None
    age_p95_ms: float | None = None
    age_p99_ms: float | None = None


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
    # generated answers: the tokens behind the rates, and the part a rate came from
    tokens_out: int | None = None
    tokens_in: int | None = None
    tpot_p50_ms: float | None = None
    requests: int | None = None
    direction: str | None = None  # "below": a floor breached when the value falls under it (tokens per second)


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
    # the baseline's quality_reference (QUALITY_FROM_TRAINING_ROWS, QUALITY_FROM_HOLDOUT; None: not said)
    reference_rows: str | None = None
    # the metric's spread over reference chunks of the window's labels, when wider than its standard error
    chunk_spread: float | None = None
    # Set by the evaluation when a window with few labels is judged on labels pooled with earlier windows.
    window_labels: int | None = None
    pooled_windows: int | None = None
    pooled_labels: int | None = None

    @property
    def reference(self) -> float | None:
        """What the detector compared with: the calibration's expectation when set, else the training metric."""
        return self.expected if self.has("expected") else self.training


@dataclass(frozen=True)
class RolloutDetails(Details):
    """A rollout comparison: each side's value, the interval of the difference, the rows behind it.

    ``count`` is the rows behind the comparison (the smaller side; paired requests for shadow
    metrics); ``sums`` the per-side (count, sum, sum of squares) a sequential test accumulates.
    """

    production: float | None = None
    candidate: float | None = None
    lower: float | None = None
    upper: float | None = None
    count: int | None = None
    relative: float | None = None
    metric: str | None = None  # quality_delta: which quality metric was compared
    higher_is_better: bool | None = None
    sums: Mapping[str, list[float]] | None = None
    flips: int | None = None
    largest_differences: list[Mapping[str, Any]] | None = None
    drift: bool | None = None
    p_value: float | None = None


@dataclass(frozen=True)
class RolloutVerdictDetails(Details):
    """A stored rollout verdict's details (``rollout_verdicts.details``): the window's comparisons behind it.

    ``comparisons`` holds one ``{"arm", "metric", "value", "lower", "upper", "count",
    "insufficient_data"}`` per comparison of each arm (a candidate version) with the
    ``reference`` (production, or an A/B test's control arm): ``value`` is the arm minus the
    reference (shadow metrics: the rate or distance), the interval at level ``1 - alpha``.
    ``examples`` are a shadow's largest disagreements, ``{"arm", "request_id", "production",
    "candidate", "difference"}``; ``winner`` the A/B arm a pass would promote.
    """

    reference: str | None = None
    alpha: float | None = None
    comparisons: list[Mapping[str, Any]] | None = None
    examples: list[Mapping[str, Any]] | None = None
    winner: str | None = None


@dataclass(frozen=True)
class EstimatedQualityDetails(Details):
    """estimated_quality: the estimate's band, what it was judged against, and realized beside it once labels join.

    ``value`` of the result is the estimate; ``lower``/``upper`` its band at ``z``; it
    breaches when ``upper`` < ``training`` - ``max_drop`` (the result's threshold).
    ``realized``, ``gap`` (realized minus the estimate on the labelled rows' own scores),
    ``gap_standard_error`` and ``concept_drift`` (the gap beyond ``z`` of them) once labels join.
    """

    rows: int | None = None
    training: float | None = None
    standard_error: float | None = None
    lower: float | None = None
    upper: float | None = None
    z: float | None = None
    max_drop: float | None = None
    support: float | None = None
    support_of: str | None = None
    calibrated_range: list[float] | None = None
    outside_calibrated_share: float | None = None
    labels: int | None = None
    realized: float | None = None
    expected_on_labels: float | None = None
    gap: float | None = None
    gap_standard_error: float | None = None
    concept_drift: bool | None = None
    threshold: float | None = None  # the decision threshold on the score for rows without the model's own decision
    decided_share: float | None = None  # the window's scored rows that carried the model's own decision
    # estimation_invalid: the labelled windows tested, those whose realized left a band, the test's p-value
    labelled_windows: int | None = None
    missed_windows: int | None = None
    p_value: float | None = None
    alpha: float | None = None
    miss_probability: float | None = None
    missed: list[str] | None = None  # this window's metrics outside their band (None: not judged)
    windows: int | None = None  # the most recent labelled windows the test looks at


@dataclass(frozen=True)
class MultivariateDetails(_Attributable):
    """multivariate_drift: the rows compared and the features that contribute most.

    pca_reconstruction_error: the band ``lower``..``upper`` (``threshold`` is ``upper``) around
    ``reference_mean``, the kept ``components`` and their ``variance_share``; ``top_features``
    as ``{"name", "share"}`` (share of the error increase). domain_classifier_auc: ``folds``,
    ``auc_std`` across them; ``top_features`` as ``{"name", "importance"}`` (AUC lost when the
    feature is permuted), empty unless the classifier's verdict is drift.
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


@dataclass(frozen=True)
class EmbeddingDetails(Details):
    """embedding_drift: one embedding's verdict, as `detect --embedding` shows it (docs/detectors.md).

    ``drift`` the decision rule; ``rows`` vectors judged of ``dimension``; ``mmd`` (``value``, ``threshold``,
    ``p_value``, ``drift``, ``bandwidth``), ``drifted_components`` (``share``, ``threshold``, ``drift``, ``level``,
    ``drifted``, ``p_values``), ``clusters`` (``chi2``, ``p_value``, ``drift``, ``jensenshannon``, ``moved``: the
    clusters whose share moved most, with example request ids), ``mean`` (``value``, ``threshold``, ``p_value``,
    ``drift``: the whitened squared distance of the means), ``cosine_distance`` of the means and
    ``domain_classifier`` (``auc``, ``threshold``, ``drift``, ``rows``, ``top_features``, for a drifted verdict only: on the window's sample).
    """

    drift: bool | None = None
    rows: int | None = None
    dimension: int | None = None
    mmd: Mapping[str, Any] | None = None
    drifted_components: Mapping[str, Any] | None = None
    clusters: Mapping[str, Any] | None = None
    cosine_distance: float | None = None
    mean: Mapping[str, Any] | None = None
    domain_classifier: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RolloutAlertDetails(Details):
    """rollout (an alert, not a window result): the verdict that failed the candidate and what the policy did.

    ``action`` is the policy's step (``rollback`` when it rolled back automatically, ``drop_arms`` when
    failing A/B arms left the test and the others went on, ``hold`` when a person decides); ``reasons``
    are the verdict's; ``dropped_arms`` the arms that left; ``resolved_reason`` why an alert resolved without a
    passing verdict (the plan ended).
    """

    candidate: str | None = None
    production: str | None = None
    mode: str | None = None
    verdict: str | None = None
    reasons: list[str] | None = None
    action: str | None = None
    rolled_back: bool | None = None
    dropped_arms: list[str] | None = None
    resolved_reason: str | None = None


DETAILS: Mapping[str, type[Details]] = {
    DATA_DRIFT: DriftDetails,
    PREDICTION_DRIFT: DriftDetails,
    DATASET_DRIFT: DatasetDriftDetails,
    DATA_QUALITY: DataQualityDetails,
    SKEW: SkewDetails,
    LATENCY: LatencyDetails,
    MODEL_QUALITY: QualityDetails,
    ESTIMATED_QUALITY: EstimatedQualityDetails,
    MULTIVARIATE_DRIFT: MultivariateDetails,
    EMBEDDING_DRIFT: EmbeddingDetails,
    ROLLOUT: RolloutAlertDetails,
}


def details_of(detector: str, details: Mapping[str, Any] | None) -> Details:
    """The typed details of a `detector`'s result (plain `Details` for a name this version does not know)."""
    return DETAILS.get(detector, Details).from_dict(details)


# --- alert states (alerts.state, alerts.state in the store) --------------------------------
# Alertmanager's lifecycle: breaching but not yet for long enough, announced, over.
ALERT_PENDING = "pending"
ALERT_FIRING = "firing"
ALERT_RESOLVED = "resolved"
ALERT_STATES = (ALERT_FIRING, ALERT_PENDING, ALERT_RESOLVED)
ALERT_ACTIVE = (ALERT_PENDING, ALERT_FIRING)

# --- notification states (notifications.status, the outbox) --------------------------------
# Another life than an alert's: queued and due (or waiting for its retry), claimed by a delivery job,
# delivered, given up on (kept, visible, sent again by `driftline alerts retry`).
NOTIFICATION_PENDING = "pending"
NOTIFICATION_SENDING = "sending"
NOTIFICATION_SENT = "sent"
NOTIFICATION_FAILED = "failed"
NOTIFICATION_STATES = (NOTIFICATION_PENDING, NOTIFICATION_SENDING, NOTIFICATION_SENT, NOTIFICATION_FAILED)
# rows a delivery job may still send (not yet delivered nor given up on)
NOTIFICATION_OPEN = (NOTIFICATION_PENDING, NOTIFICATION_SENDING)
