"""Evaluate one merged window against its baseline: every detector family, pure.

`evaluate_window(baseline, state, thresholds=..., slo=..., transform=...)`
returns a flat list of `DetectorResult`s (detector, feature, metric, value,
threshold, breached, details) for these families:

* ``data_drift``: per feature, the binned tests (`detectors.binned`), p-values
  corrected by Benjamini-Hochberg across the window's features, verdict by
  `detectors.decision.decide_feature`; plus one dataset-level result, detector
  ``dataset_drift`` (metric ``drifted_share``: share of drifted features against
  ``dataset_drift_share``), the name the alert rules and `detect`'s JSON use.
* ``prediction_drift``: the same tests on the model's output.
* ``data_quality``: missing rate against the training null rate, out-of-range
  share, unseen-category share, type changes, baseline features missing from
  events, features the baseline does not know.
* ``skew``: parity skew (the training transform re-run on the sample's raw
  ``inputs`` must reproduce the served features: mismatch rate per feature) and
  distribution skew (serving vs the training baseline, effect size only; it is
  data drift's comparison, so it breaches only for a feature whose parity could
  not be checked). A feature with parity skew has its ``data_drift`` result (and
  ``prediction_drift``, and the data-quality breaches the training transform's
  output does not show) reported unbreached with ``details["explained_by"] =
  "skew"``: skew is reported as skew, not as drift.
* ``latency``: p50/p95/p99 per latency part against the model's SLO (`LatencySLO`),
  error rate, QPS = events / window seconds, and in-flight concurrency by Little's
  law :math:`L = \\lambda W` (arrival rate times mean time in the system).
* ``model_quality``: from joined labels (`quality_metrics`): accuracy, precision,
  recall, F1, ROC AUC, log loss (binary); MAE, RMSE (regression); accuracy and
  macro F1 (multiclass); compared with what the training relation predicts for
  the window's scores (binary, `expected_binary_quality`) or with the training
  metrics, breaching only beyond max(floor, z x standard error) (`model_quality`).

Sample-size awareness: a result with too little data behind it has
``breached=False`` and ``details["insufficient_data"] = True``. Every threshold
default lives in `driftline.defaults`. Nothing here does I/O.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from scipy import optimize as _scipy_optimize

from detectors import binned, stats
from detectors.decision import (
    INSUFFICIENT_DATA,
    DriftThresholds,
    annotate_tests,
    benjamini_hochberg,
    decide_dataset,
    decide_feature,
)
from driftline import defaults
from driftline.baseline import (
    BINARY,
    MULTICLASS,
    REGRESSION,
    Baseline,
    LabelSummary,
    NumericProfile,
    Profile,
    category_key,
    is_null,
    json_type,
)
from driftline.errors import UserError
from driftline.vocabulary import (
    DATA_DRIFT,
    DATA_QUALITY,
    DATASET_DRIFT,
    DRIFTED_SHARE,
    LATENCY,
    MODEL_QUALITY,
    PREDICTION_DRIFT,
    QUALITY_ERRORS,
    QUALITY_SCORES,
    SKEW,
)
from driftline.window_state import FeatureWindow, WindowState

__all__ = [
    "DetectorResult",
    "LatencySLO",
    "ParityCheck",
    "WindowThresholds",
    "evaluate_window",
    "expected_binary_quality",
    "explain_drift_by_skew",
    "explain_quality_by_skew",
    "hanley_mcneil_variance",
    "quality_metrics",
    "quality_standard_errors",
    "quality_supports",
    "skew_with_parity",
    "training_calibration",
]

# The families evaluate_window can run; data_drift's run also gives the dataset_drift result.
FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY)
# What model quality is compared with (`WindowThresholds.quality_reference`).
QUALITY_VS_CALIBRATION = "calibration"
QUALITY_VS_TRAINING = "training"


@dataclass
class DetectorResult:
    """One verdict: `metric` of `feature` (None: the whole window) measured `value` against `threshold`."""

    detector: str
    feature: str | None
    metric: str
    value: float | None
    threshold: float | None
    breached: bool
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def insufficient_data(self) -> bool:
        return bool(self.details.get("insufficient_data"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and infinities become None)."""
        return {"detector": self.detector, "feature": self.feature, "metric": self.metric,
                "value": _json_number(self.value), "threshold": _json_number(self.threshold),
                "breached": self.breached, "details": _json_safe(self.details)}


def _json_number(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _json_number(value)
    return value


# --- thresholds ----------------------------------------------------------------------

@dataclass(frozen=True)
class LatencySLO:
    """A model's latency objectives (ms) and error budget; None switches a check off.

    ``max_qps`` / ``max_concurrency`` (default None: reported, never breached) cap
    throughput and in-flight requests when a deployment has a known capacity.
    """

    p50_ms: float | None = defaults.LATENCY_SLO_P50_MS
    p95_ms: float | None = defaults.LATENCY_SLO_P95_MS
    p99_ms: float | None = defaults.LATENCY_SLO_P99_MS
    error_rate: float | None = defaults.ERROR_RATE_MAX
    max_qps: float | None = None
    max_concurrency: float | None = None
    min_events: int = defaults.LATENCY_MIN_EVENTS

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "LatencySLO":
        """From a ``[latency]`` TOML section; ``[latency.models.NAME]`` overrides for `model`."""
        mapping = dict(mapping or {})
        models = mapping.pop("models", {}) or {}
        if model is not None and model in models:
            mapping.update(models[model])
        return _from_mapping(cls, mapping, "[latency]")


@dataclass(frozen=True)
class WindowThresholds:
    """Every alarm level of `evaluate_window` besides the latency SLO (defaults: `driftline.defaults`)."""

    drift: DriftThresholds = field(default_factory=DriftThresholds)
    data_quality_min_rows: int = defaults.DATA_QUALITY_MIN_ROWS
    missing_rate_increase: float = defaults.MISSING_RATE_INCREASE
    out_of_range_share: float = defaults.OUT_OF_RANGE_SHARE
    unseen_category_share: float = defaults.UNSEEN_CATEGORY_SHARE
    type_change_share: float = defaults.TYPE_CHANGE_SHARE
    missing_feature_share: float = defaults.MISSING_FEATURE_SHARE
    new_feature_share: float = defaults.NEW_FEATURE_SHARE
    skew_distribution_psi: float = defaults.SKEW_DISTRIBUTION_PSI
    parity_relative_tolerance: float = defaults.SKEW_PARITY_RELATIVE_TOLERANCE
    parity_mismatch_rate: float = defaults.SKEW_PARITY_MISMATCH_RATE
    parity_min_sample: int = defaults.SKEW_PARITY_MIN_SAMPLE
    quality_min_labels: int = defaults.QUALITY_MIN_LABELS
    quality_min_class_count: int = defaults.QUALITY_MIN_CLASS_COUNT
    quality_z: float = defaults.QUALITY_Z
    quality_reference: str = defaults.QUALITY_REFERENCE
    quality_max_drop: float = defaults.QUALITY_MAX_DROP
    quality_max_error_increase: float = defaults.QUALITY_MAX_ERROR_INCREASE
    # read by the evaluation (driftline.evaluation), which pools labels before calling model_quality
    quality_pool_min_labels: int = defaults.QUALITY_POOL_MIN_LABELS
    quality_pool_max_windows: int = defaults.QUALITY_POOL_MAX_WINDOWS

    def __post_init__(self) -> None:
        if self.quality_reference not in (QUALITY_VS_CALIBRATION, QUALITY_VS_TRAINING):
            raise UserError(f"quality_reference must be {QUALITY_VS_CALIBRATION!r} or {QUALITY_VS_TRAINING!r}, "
                            f"got {self.quality_reference!r}")
        if self.quality_z < 0 or self.quality_min_class_count < 0 or self.quality_min_labels < 0:
            raise UserError("quality_z, quality_min_class_count and quality_min_labels must not be negative")
        if self.quality_pool_min_labels < 0 or self.quality_pool_max_windows < 0:
            raise UserError("quality_pool_min_labels and quality_pool_max_windows must not be negative")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, model: str | None = None) -> "WindowThresholds":
        """From a config dict: ``drift`` (a `DriftThresholds` section), the other fields at
        the top level or in ``data_quality`` / ``skew`` / ``model_quality`` sections, and
        ``models.NAME`` overrides for `model`."""
        mapping = dict(mapping or {})
        models = mapping.pop("models", {}) or {}
        drift = DriftThresholds.from_mapping(mapping.pop("drift", None), model)
        flat: dict[str, Any] = {}
        for section in ("data_quality", "skew", "model_quality"):
            flat.update(mapping.pop(section, {}) or {})
        flat.update(mapping)
        if model is not None and model in models:
            overrides = dict(models[model])
            for section in ("data_quality", "skew", "model_quality"):
                flat.update(overrides.pop(section, {}) or {})
            flat.update(overrides)
        return _from_mapping(cls, {**flat, "drift": drift}, "[window thresholds]")


def _from_mapping(cls, mapping: Mapping[str, Any], where: str):
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(unknown)} in {where}; known: {', '.join(sorted(known))}")
    return cls(**mapping)


# --- entry point -----------------------------------------------------------------------

def evaluate_window(baseline: Baseline | None, state: WindowState, *,
                    thresholds: WindowThresholds | DriftThresholds | None = None,
                    slo: LatencySLO | None = None,
                    transform: Callable[[list[Mapping[str, Any]]], list[Mapping[str, Any]]] | Any | None = None,
                    window_seconds: float | None = None,
                    families: Iterable[str] = FAMILIES) -> list[DetectorResult]:
    """Every detector family for one merged window (module docstring).

    `baseline` None (a version not registered yet): only latency results.
    `thresholds`: a `WindowThresholds`, or just `DriftThresholds` (the rest default).
    `transform`: the training feature transform, a callable (or an object with
    ``apply``) from raw input records to feature records; without it there is no
    parity-skew result (and distribution skew is the only skew evidence).
    Attribution to skew needs the ``skew`` family in `families`.
    `window_seconds` (default `defaults.WINDOW_SECONDS`) turns the event count into QPS.
    """
    if isinstance(thresholds, DriftThresholds):
        thresholds = WindowThresholds(drift=thresholds)
    thresholds = thresholds or WindowThresholds()
    slo = slo or LatencySLO()
    if baseline is not None and state.baseline_fingerprint not in (None, baseline.fingerprint):
        raise ValueError(f"window state was binned on baseline {state.baseline_fingerprint}, "
                         f"not {baseline.fingerprint}")
    families = set(families)
    results: list[DetectorResult] = []
    if baseline is not None:
        # Skew first: a feature with parity skew has its drift and data-quality findings
        # attributed to skew (`explain_drift_by_skew`, `explain_quality_by_skew`).
        skew_results, parity = (skew_with_parity(baseline, state, thresholds, transform) if SKEW in families
                                else ([], ParityCheck()))
        drift_results: list[DetectorResult] = []
        if DATA_DRIFT in families:
            drift_results += data_drift(baseline, state, thresholds.drift)
        if PREDICTION_DRIFT in families:
            drift_results += prediction_drift(baseline, state, thresholds.drift)
        results += explain_drift_by_skew(drift_results, parity, thresholds.drift)
        if DATA_QUALITY in families:
            results += explain_quality_by_skew(data_quality(baseline, state, thresholds), baseline, parity)
        results += skew_results
        if MODEL_QUALITY in families:
            quality = model_quality(baseline, state, thresholds)
            for result in quality if parity.skewed else ():
                # The drop is real (the model was fed skewed values) and stays breached;
                # this says where to look first.
                result.details["skewed_features"] = sorted(parity.skewed)
            results += quality
    if LATENCY in families:
        results += latency(state, slo, window_seconds or defaults.WINDOW_SECONDS)
    return results


# --- drift ---------------------------------------------------------------------------------

def _insufficient(details: dict[str, Any], reason: str) -> dict[str, Any]:
    details["insufficient_data"] = True
    details["reason"] = reason
    return details


def _feature_tests(profile: Profile, window: FeatureWindow, events: int) -> tuple[dict[str, dict[str, Any]], int]:
    """The drift tests of one feature and the rows behind them (the smaller side)."""
    if isinstance(profile, NumericProfile):
        tests = binned.numeric_tests(profile, window)
        rows = min(profile.count, window.binned)
    else:
        tests = binned.categorical_tests(profile, window)
        rows = min(profile.count, sum(window.categories.values()))
    reference_rows = profile.rows
    difference, p_value = stats.missing_rate_test(profile.nulls, reference_rows, window.nulls, events)
    tests["missing"] = {"value": window.nulls / events if events else 0.0, "reference": profile.null_rate,
                        "p_value": p_value}
    return tests, rows


def _drift_result(detector: str, name: str, profile: Profile, window: FeatureWindow | None, events: int,
                  thresholds: DriftThresholds, tests: dict[str, dict[str, Any]] | None = None,
                  rows: int | None = None) -> DetectorResult:
    kind = profile.kind
    primary = "psi"
    if window is None or events == 0:
        return DetectorResult(detector, name, primary, None, thresholds.psi, False,
                              _insufficient({"kind": kind, "rows": 0}, f"{INSUFFICIENT_DATA}: no values"))
    if tests is None:
        tests, rows = _feature_tests(profile, window, events)
    drift, reason = decide_feature(tests, kind, rows, thresholds)
    annotate_tests(tests, kind, thresholds)
    details: dict[str, Any] = {"kind": kind, "rows": rows, "reason": reason, "tests": tests}
    if reason.startswith(INSUFFICIENT_DATA):
        details["insufficient_data"] = True
        if isinstance(profile, NumericProfile) and window.unbinned and not window.binned:
            details["reason"] = f"{INSUFFICIENT_DATA}: values were counted before the baseline existed"
    return DetectorResult(detector, name, primary, tests["psi"]["value"], thresholds.psi, bool(drift), details)


def data_drift(baseline: Baseline, state: WindowState, thresholds: DriftThresholds) -> list[DetectorResult]:
    """Per-feature drift with Benjamini-Hochberg across features, plus the dataset verdict."""
    names, all_tests, all_rows = [], [], []
    for name, profile in baseline.profiles.items():
        window = state.features.get(name)
        if window is None or state.events == 0:
            continue
        tests, rows = _feature_tests(profile, window, state.events)
        names.append(name)
        all_tests.append(tests)
        all_rows.append(rows)
    # Two families of hypotheses across features: distribution tests and missing-rate tests.
    for test_name in ("significance", "missing"):
        p_values = [t[_significance_name(baseline.kind(n))]["p_value"] if test_name == "significance"
                    else t["missing"]["p_value"] for n, t in zip(names, all_tests)]
        if p_values:
            _, adjusted = benjamini_hochberg(p_values, thresholds.alpha)
            for n, t, p in zip(names, all_tests, adjusted.tolist()):
                key = _significance_name(baseline.kind(n)) if test_name == "significance" else "missing"
                t[key]["p_value_adjusted"] = p
    results = []
    tested = dict(zip(names, zip(all_tests, all_rows)))
    for name, profile in baseline.profiles.items():
        feature_thresholds = thresholds.for_feature(name)
        if name in tested:
            tests, rows = tested[name]
            results.append(_drift_result(DATA_DRIFT, name, profile, state.features[name], state.events,
                                         feature_thresholds, tests, rows))
        else:
            results.append(_drift_result(DATA_DRIFT, name, profile, None, state.events, feature_thresholds))
    judged = [r for r in results if not r.insufficient_data]
    drifted = [r.feature for r in judged if r.breached]
    share = len(drifted) / len(judged) if judged else 0.0
    details: dict[str, Any] = {"drifted_features": drifted, "features": len(judged)}
    if not judged:
        _insufficient(details, f"{INSUFFICIENT_DATA}: no feature had enough rows")
    results.append(DetectorResult(DATASET_DRIFT, None, DRIFTED_SHARE, share, thresholds.dataset_drift_share,
                                  decide_dataset(len(drifted), len(judged), thresholds), details))
    return results


def _significance_name(kind: str) -> str:
    return "chi2" if kind == "categorical" else "ks"


def prediction_drift(baseline: Baseline, state: WindowState, thresholds: DriftThresholds) -> list[DetectorResult]:
    """Drift of the model's output (one feature: no multiple-testing correction)."""
    if baseline.prediction is None:
        return []
    window = state.prediction
    count = 0 if window is None else (window.count + sum(window.categories.values()))
    result = _drift_result(PREDICTION_DRIFT, "prediction", baseline.prediction, window if count else None,
                           state.events, thresholds.for_feature("prediction"))
    result.details["source"] = baseline.prediction_source
    return [result]


# --- data quality ---------------------------------------------------------------------------

def _expected_types(profile: Profile) -> set[str]:
    if isinstance(profile, NumericProfile):
        return {"number"}
    return set(profile.value_types) or {"string"}


def data_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[DetectorResult]:
    """Missing rate, out-of-range, unseen categories, type changes, missing and new features."""
    events = state.events
    enough = events >= thresholds.data_quality_min_rows
    results = []

    def result(feature: str | None, metric: str, value: float, threshold: float, breached: bool,
               details: dict[str, Any]) -> None:
        details = dict(details, events=events)
        if not enough:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {events} events < {thresholds.data_quality_min_rows}")
            breached = False
        results.append(DetectorResult(DATA_QUALITY, feature, metric, value, threshold, bool(breached), details))

    for name, profile in baseline.profiles.items():
        window = state.features.get(name) or FeatureWindow(kind=profile.kind, absent=events, nulls=events)
        rate = window.nulls / events if events else 0.0
        increase, p_value = stats.missing_rate_test(profile.nulls, profile.rows, window.nulls, events)
        limit = profile.null_rate + thresholds.missing_rate_increase
        result(name, "missing_rate", rate, limit,
               increase >= thresholds.missing_rate_increase and p_value < thresholds.drift.alpha,
               {"reference": profile.null_rate, "nulls": window.nulls, "p_value": p_value})
        absent_share = window.absent / events if events else 0.0
        result(name, "missing_feature_share", absent_share, thresholds.missing_feature_share,
               absent_share > thresholds.missing_feature_share, {"absent": window.absent})
        values = sum(window.value_types.values())
        expected = _expected_types(profile)
        changed = {k: v for k, v in window.value_types.items() if k not in expected}
        changed_count = sum(changed.values())
        share = changed_count / values if values else 0.0
        result(name, "type_change_share", share, thresholds.type_change_share,
               share > thresholds.type_change_share,
               {"expected_types": sorted(expected), "changed": changed})
        if isinstance(profile, NumericProfile):
            outside = window.below_min + window.above_max
            numbers = window.count + window.nonfinite
            share = outside / numbers if numbers else 0.0
            result(name, "out_of_range_share", share, thresholds.out_of_range_share,
                   share > thresholds.out_of_range_share,
                   {"below_min": window.below_min, "above_max": window.above_max, "training_min": profile.min,
                    "training_max": profile.max, "window_min": _finite(window.min), "window_max": _finite(window.max)})
        else:
            seen = sum(window.categories.values())
            unseen = {k: v for k, v in window.categories.items() if k not in profile.counts}
            share = sum(unseen.values()) / seen if seen else 0.0
            top = dict(sorted(unseen.items(), key=lambda kv: -kv[1])[:10])
            result(name, "unseen_category_share", share, thresholds.unseen_category_share,
                   share > thresholds.unseen_category_share, {"unseen": top, "unseen_categories": len(unseen)})
    for name, window in state.features.items():
        if name in baseline.profiles:
            continue
        share = (events - window.absent) / events if events else 0.0
        result(name, "new_feature_share", share, thresholds.new_feature_share,
               share > thresholds.new_feature_share, {"kind": window.kind})
    return results


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


# --- skew -------------------------------------------------------------------------------------

@dataclass
class ParityCheck:
    """What the parity check found, for attributing other families' findings to skew.

    ``judged``: features whose parity could be judged (a transform, enough sampled
    events with raw inputs, the transform ran); ``skewed``: those whose mismatch
    rate breached. ``served`` / ``recomputed``: the sampled feature records and
    the training transform's output for the same raw inputs, pairwise.
    """

    judged: set[str] = field(default_factory=set)
    skewed: set[str] = field(default_factory=set)
    served: list[Mapping[str, Any]] = field(default_factory=list)
    recomputed: list[Mapping[str, Any]] = field(default_factory=list)


def skew(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
         transform: Any | None) -> list[DetectorResult]:
    """Distribution skew per feature and parity skew on the sample (`skew_with_parity`)."""
    return skew_with_parity(baseline, state, thresholds, transform)[0]


def skew_with_parity(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                     transform: Any | None) -> tuple[list[DetectorResult], ParityCheck]:
    """Skew results and the `ParityCheck` behind them.

    **Parity skew** (`parity_skew`) is the evidence of training-serving skew: the
    training transform re-run on the logged raw inputs must reproduce the
    served features. **Distribution skew** (serving vs the training baseline,
    PSI on the reference deciles) is always reported, but the same comparison
    is data drift's, so it cannot tell a serving bug from a world that changed:
    it is ``breached`` only for a feature whose parity could not be checked (no
    transform, too few sampled events with raw ``inputs``, or the transform
    failed), where it is the only skew evidence there is. Where parity was
    checked, a distribution difference with matching parity is drift, and
    ``details["parity_checked"]`` says which case applies.
    """
    parity_results: list[DetectorResult] = []
    parity = ParityCheck()
    if transform is not None:
        parity_results, parity = _parity_check(baseline, state, thresholds, transform)
    results = []
    for name, profile in baseline.profiles.items():
        window = state.features.get(name)
        if isinstance(profile, NumericProfile):
            rows = min(profile.count, window.binned) if window is not None else 0
            value = binned.psi_binned(profile, window) if rows else None
        else:
            rows = min(profile.count, sum(window.categories.values())) if window is not None else 0
            value = stats.psi(*binned.category_counts(profile, window)[1:]) if rows else None
        checked = name in parity.judged
        details: dict[str, Any] = {"kind": profile.kind, "rows": rows, "parity_checked": checked}
        min_rows = thresholds.drift.for_feature(name).min_rows
        large = value is not None and value >= thresholds.skew_distribution_psi
        breached = large and not checked
        if rows < min_rows:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {rows} rows < {min_rows}")
            breached = False
        elif checked:
            details["reason"] = ("parity skew: see parity_mismatch_rate" if name in parity.skewed else
                                 "parity holds: serving computes this feature as training does, so a "
                                 "distribution difference is drift (data_drift), not skew")
        elif large:
            details["reason"] = "no parity check possible for this feature: distribution skew is the only evidence"
        results.append(DetectorResult(SKEW, name, "distribution_psi", value, thresholds.skew_distribution_psi,
                                      bool(breached), details))
    return results + parity_results, parity


def _apply(transform: Any, inputs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    apply = getattr(transform, "apply", None)
    return list(apply(inputs) if callable(apply) else transform(inputs))


def _same(served: Any, recomputed: Any, tolerance: float) -> bool:
    if is_null(served) or is_null(recomputed):
        return is_null(served) and is_null(recomputed)
    numeric = (int, float, np.integer, np.floating)
    if isinstance(served, numeric) and isinstance(recomputed, numeric) and not isinstance(served, bool):
        a, b = float(served), float(recomputed)
        return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))
    return category_key(served) == category_key(recomputed)


def parity_skew(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                transform: Any) -> list[DetectorResult]:
    """Share of sampled events whose served feature differs from the training transform's output.

    For each sample record with raw ``inputs``: recompute the features with
    `transform` and compare feature by feature with the served ones (numbers within
    a relative tolerance, categories by `category_key`, null only matches null).
    """
    return _parity_check(baseline, state, thresholds, transform)[0]


def _parity_check(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
                  transform: Any) -> tuple[list[DetectorResult], ParityCheck]:
    records = [r for r in state.sample if isinstance(r.get("inputs"), Mapping) and isinstance(r.get("features"), Mapping)]
    details: dict[str, Any] = {"sampled": len(records)}
    if len(records) < thresholds.parity_min_sample:
        _insufficient(details, f"{INSUFFICIENT_DATA}: {len(records)} sampled events with inputs "
                               f"< {thresholds.parity_min_sample}")
        return [DetectorResult(SKEW, None, "parity_mismatch_rate", None, thresholds.parity_mismatch_rate, False,
                               details)], ParityCheck()
    try:
        recomputed = _apply(transform, [r["inputs"] for r in records])
        if len(recomputed) != len(records):
            raise ValueError(f"returned {len(recomputed)} records for {len(records)} inputs")
    except Exception as exc:  # a transform that cannot process served inputs is itself skew
        details["error"] = f"{type(exc).__name__}: {exc}"
        return [DetectorResult(SKEW, None, "parity_mismatch_rate", 1.0, thresholds.parity_mismatch_rate, True,
                               details)], ParityCheck()
    parity = ParityCheck(served=[r["features"] for r in records], recomputed=recomputed)
    results = []
    tolerance = thresholds.parity_relative_tolerance
    for name in baseline.profiles:
        mismatches = []
        compared = 0
        for record, features in zip(records, recomputed):
            if name not in features and name not in record["features"]:
                continue
            compared += 1
            served, expected = record["features"].get(name), features.get(name)
            if not _same(served, expected, tolerance):
                mismatches.append({"request_id": record.get("request_id"), "served": served, "recomputed": expected})
        rate = len(mismatches) / compared if compared else 0.0
        feature_details: dict[str, Any] = {"compared": compared, "mismatches": len(mismatches),
                                           "examples": mismatches[:3]}
        breached = rate > thresholds.parity_mismatch_rate
        if compared < thresholds.parity_min_sample:
            _insufficient(feature_details, f"{INSUFFICIENT_DATA}: {compared} compared < {thresholds.parity_min_sample}")
            breached = False
        else:
            parity.judged.add(name)
            if breached:
                parity.skewed.add(name)
        results.append(DetectorResult(SKEW, name, "parity_mismatch_rate", rate, thresholds.parity_mismatch_rate,
                                      bool(breached), _json_safe(feature_details)))
    return results, parity


# --- attribution: findings that parity skew explains -------------------------------------------

def _explained(result: DetectorResult, **details: Any) -> None:
    """Mark `result` as explained by skew: not breached, the verdict it would have had kept."""
    result.details["explained_by"] = SKEW
    result.details["breached_without_skew"] = bool(result.breached)
    result.details.update(details)
    result.breached = False


def explain_drift_by_skew(results: list[DetectorResult], parity: ParityCheck,
                          thresholds: DriftThresholds) -> list[DetectorResult]:
    """Drift results of features with parity skew: explained by skew (in place; also returned).

    While serving computes a feature differently from training, its distribution
    against the training baseline measures the bug, not the world: the
    feature's ``data_drift`` result gets ``breached=False`` and
    ``details["explained_by"] = "skew"`` (the feature is still alerted, as skew),
    and it leaves the dataset-level share (numerator and denominator: its drift
    could not be judged). ``prediction_drift`` is explained the same way when any
    feature has parity skew, since the model was fed the skewed values.
    """
    if not parity.skewed:
        return results
    skewed = sorted(parity.skewed)
    for result in results:
        if result.detector == DATA_DRIFT and result.feature in parity.skewed:
            _explained(result)
        elif result.detector == PREDICTION_DRIFT:
            _explained(result, skewed_features=skewed)
    for result in results:
        if result.detector != DATASET_DRIFT:
            continue
        judged = [r for r in results if r.detector == DATA_DRIFT and r.feature is not None
                  and not r.insufficient_data and r.feature not in parity.skewed]
        drifted = [r.feature for r in judged if r.breached]
        result.value = len(drifted) / len(judged) if judged else 0.0
        result.breached = decide_dataset(len(drifted), len(judged), thresholds)
        result.details.update(drifted_features=drifted, features=len(judged), explained_by_skew=skewed)
        if not judged and not result.insufficient_data:
            _insufficient(result.details, f"{INSUFFICIENT_DATA}: no feature without skew had enough rows")
    return results


def _recomputed_share(metric: str, profile: Profile, values: list[Any], absent: int) -> float | None:
    """`metric` of data quality measured on the training transform's output for the sample."""
    rows = len(values) + absent
    present = [v for v in values if not is_null(v)]
    if metric == "missing_rate":
        return (rows - len(present)) / rows if rows else None
    if metric == "missing_feature_share":
        return absent / rows if rows else None
    if not present:
        return 0.0
    if metric == "type_change_share":
        expected = _expected_types(profile)
        return sum(json_type(v) not in expected for v in present) / len(present)
    if metric == "out_of_range_share" and isinstance(profile, NumericProfile):
        numbers = [float(v) for v in present if json_type(v) == "number"]
        if not numbers or profile.min is None:
            return 0.0
        array = np.asarray(numbers)
        return float(np.mean((array < profile.min) | (array > profile.max)))
    if metric == "unseen_category_share" and not isinstance(profile, NumericProfile):
        return sum(category_key(v) not in profile.counts for v in present) / len(present)
    return None


def explain_quality_by_skew(results: list[DetectorResult], baseline: Baseline,
                            parity: ParityCheck) -> list[DetectorResult]:
    """Data-quality breaches that the serving path causes: explained by skew (in place; also returned).

    A breached data-quality result of a feature with parity skew is explained
    by skew when the same check, run on the training transform's output for the
    sampled raw inputs, passes: the nulls, out-of-range values, unseen
    categories, wrong types or absent keys come from the serving computation,
    not from the inputs. When the recomputed features fail the check too (the
    raw inputs themselves are bad), the result stays breached: that is a
    data-quality problem of its own. ``details["recomputed_value"]`` holds the
    check's value on the recomputed sample either way.
    """
    if not parity.skewed:
        return results
    for result in results:
        name = result.feature
        if result.detector != DATA_QUALITY or not result.breached or name not in parity.skewed:
            continue
        profile = baseline.profiles.get(name)
        if profile is None:
            continue
        values = [features[name] for features in parity.recomputed if name in features]
        absent = len(parity.recomputed) - len(values)
        recomputed = _recomputed_share(result.metric, profile, values, absent)
        if recomputed is None:
            continue
        result.details["recomputed_value"] = recomputed
        if result.threshold is None or recomputed <= result.threshold:
            _explained(result)
    return results


# --- latency ----------------------------------------------------------------------------------

def latency(state: WindowState, slo: LatencySLO, window_seconds: float) -> list[DetectorResult]:
    """Latency quantiles per part against the SLO (total only), error rate, QPS, concurrency."""
    events = state.events
    enough = events >= slo.min_events
    results = []

    def result(feature: str | None, metric: str, value: float | None, threshold: float | None,
               details: dict[str, Any]) -> None:
        breached = threshold is not None and value is not None and value > threshold
        if not enough:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {events} events < {slo.min_events}")
            breached = False
        results.append(DetectorResult(LATENCY, feature, metric, value, threshold, bool(breached),
                                      dict(details, events=events)))

    objectives = {0.5: ("p50_ms", slo.p50_ms), 0.95: ("p95_ms", slo.p95_ms), 0.99: ("p99_ms", slo.p99_ms)}
    for part, histogram in state.latency.items():
        for q, (metric, objective) in objectives.items():
            result(part, metric, histogram.quantile(q), objective if part == "total" else None,
                   {"count": histogram.count, "max_ms": _finite(histogram.max)})
    error_rate = state.errors / events if events else 0.0
    result(None, "error_rate", error_rate, slo.error_rate, {"errors": state.errors})
    qps = events / window_seconds if window_seconds > 0 else 0.0
    result(None, "qps", qps, slo.max_qps, {"window_seconds": window_seconds})
    total = state.latency.get("total")
    mean_seconds = (total.mean or 0.0) / 1000.0 if total is not None and total.count else 0.0
    # Little's law: requests in flight = arrival rate x mean time each spends inside.
    result(None, "concurrency", qps * mean_seconds, slo.max_concurrency,
           {"qps": qps, "mean_latency_ms": mean_seconds * 1000.0})
    return results


# --- model quality ------------------------------------------------------------------------------

def quality_metrics(summary: LabelSummary | None) -> dict[str, float | None]:
    r"""Quality metrics from a `LabelSummary` (pure counting, no raw predictions needed).

    Binary (threshold 0.5: scores in bins at or above 0.5 predict positive):
    accuracy :math:`(TP+TN)/n`, precision :math:`TP/(TP+FP)`, recall
    :math:`TP/(TP+FN)`, F1 :math:`2PR/(P+R)` (0 when undefined), ROC AUC
    :math:`\sum_b pos_b (neg_{<b} + \tfrac12 neg_b) / (P N)` over score bins
    (pairs in one bin count as ties; None without both classes), log loss
    :math:`-\frac1n \sum \log p(y)`. Regression: MAE, RMSE, mean error (bias).
    Multiclass: accuracy and macro F1 over the labels seen.
    """
    if summary is None or summary.task is None or summary.n == 0:
        return {}
    n = summary.n
    if summary.task == BINARY:
        pos, neg = summary.positives.astype(np.float64), summary.negatives.astype(np.float64)
        cut = summary.bins // 2  # 0.5 is the lower edge of bin bins/2
        tp, fp = pos[cut:].sum(), neg[cut:].sum()
        fn, tn = pos[:cut].sum(), neg[:cut].sum()
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        total_pos, total_neg = pos.sum(), neg.sum()
        auc = None
        if total_pos and total_neg:
            below = np.concatenate(([0.0], np.cumsum(neg)[:-1]))
            auc = float((pos * (below + 0.5 * neg)).sum() / (total_pos * total_neg))
        return {"accuracy": float((tp + tn) / n), "precision": float(precision), "recall": float(recall),
                "f1": float(f1), "roc_auc": auc, "log_loss": summary.log_loss_sum / n}
    if summary.task == REGRESSION:
        return {"mae": summary.sum_abs_error / n, "rmse": math.sqrt(summary.sum_sq_error / n),
                "bias": summary.sum_error / n}
    labels = sorted({label for label, _ in summary.confusion})
    correct = sum(c for (label, predicted), c in summary.confusion.items() if label == predicted)
    f1s = []
    for label in labels:
        tp = summary.confusion.get((label, label), 0)
        predicted = sum(c for (_, p), c in summary.confusion.items() if p == label)
        actual = sum(c for (a, _), c in summary.confusion.items() if a == label)
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return {"accuracy": correct / n, "macro_f1": float(np.mean(f1s)) if f1s else 0.0}


# Metrics that are a proportion of, or a mean over, all labelled rows; the others rest on
# one class's rows (or the rarer class's) and also need `quality_min_class_count` of them.
_ROW_METRICS = frozenset(("accuracy", "log_loss", "mae", "rmse"))
_SUPPORT_NAMES = {"accuracy": "labels", "log_loss": "labels", "mae": "labels", "rmse": "labels",
                  "precision": "predicted positives", "recall": "actual positives",
                  "f1": "predicted or actual positives (the fewer)", "roc_auc": "rows of the rarer class",
                  "macro_f1": "rows of the rarest label"}


def _binary_counts(summary: LabelSummary) -> dict[str, float]:
    pos, neg = summary.positives.astype(np.float64), summary.negatives.astype(np.float64)
    cut = summary.bins // 2
    tp, fp = float(pos[cut:].sum()), float(neg[cut:].sum())
    fn, tn = float(pos[:cut].sum()), float(neg[:cut].sum())
    return {"n": float(summary.n), "predicted": tp + fp, "actual": tp + fn, "positives": tp + fn,
            "negatives": fp + tn}


def _multiclass_counts(summary: LabelSummary) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """``(true positives, predicted, actual)`` per label."""
    tp: dict[str, int] = {}
    predicted: dict[str, int] = {}
    actual: dict[str, int] = {}
    for (label, guess), count in summary.confusion.items():
        actual[label] = actual.get(label, 0) + count
        predicted[guess] = predicted.get(guess, 0) + count
        if label == guess:
            tp[label] = tp.get(label, 0) + count
    return tp, predicted, actual


def quality_supports(summary: LabelSummary | None) -> dict[str, int]:
    """The number of rows behind each quality metric (the n of its proportion or mean).

    Binary: accuracy and log loss all labelled rows, precision the predicted
    positives, recall the actual positives, F1 the fewer of those two, ROC AUC
    the rarer class. Regression: all rows. Multiclass: accuracy all rows,
    macro F1 the rarest label's rows.
    """
    if summary is None or summary.task is None or summary.n == 0:
        return {}
    n = int(summary.n)
    if summary.task == BINARY:
        c = _binary_counts(summary)
        return {"accuracy": n, "precision": int(c["predicted"]), "recall": int(c["actual"]),
                "f1": int(min(c["predicted"], c["actual"])), "roc_auc": int(min(c["positives"], c["negatives"])),
                "log_loss": n}
    if summary.task == REGRESSION:
        return {"mae": n, "rmse": n}
    _, _, actual = _multiclass_counts(summary)
    return {"accuracy": n, "macro_f1": min(actual.values()) if actual else 0}


def _proportion_variance(p: float | None) -> float | None:
    return None if p is None else max(0.0, p * (1.0 - p))


def _per_row(variance: float | None, count: float) -> float | None:
    """The variance of a mean (or proportion) of `count` rows with per-row `variance`; None if no rows."""
    if variance is None or count <= 0:
        return None
    return variance / count


def _root_sum(*variances: float | None) -> float | None:
    if any(v is None for v in variances):
        return None
    return math.sqrt(sum(variances))


def hanley_mcneil_variance(auc: float, positives: float, negatives: float) -> float | None:
    r"""Variance of an empirical ROC AUC (Hanley & McNeil, Radiology 143, 1982).

    .. math::  \mathrm{Var}(A) = \frac{A(1-A) + (n_p - 1)(Q_1 - A^2) + (n_n - 1)(Q_2 - A^2)}{n_p\, n_n},
               \quad Q_1 = \frac{A}{2 - A}, \quad Q_2 = \frac{2A^2}{1 + A}

    (Q1, Q2 under their exponential-scores approximation). None without both classes.
    """
    if positives <= 0 or negatives <= 0:
        return None
    q1 = auc / (2.0 - auc)
    q2 = 2.0 * auc * auc / (1.0 + auc)
    variance = (auc * (1.0 - auc) + (positives - 1.0) * (q1 - auc * auc)
                + (negatives - 1.0) * (q2 - auc * auc)) / (positives * negatives)
    return max(0.0, float(variance))


def _bin_losses(bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(midpoint score, loss if label 1, loss if label 0)`` per score bin (scores clipped as the log loss clips)."""
    mid = np.clip((np.arange(bins) + 0.5) / bins, defaults.LOG_LOSS_EPSILON, 1.0 - defaults.LOG_LOSS_EPSILON)
    return mid, -np.log(mid), -np.log1p(-mid)


def _binned_log_loss_moments(summary: LabelSummary) -> tuple[float | None, float | None]:
    """Sample variance (ddof=1) and third central moment of the per-row log loss, each row's
    score at its bin's midpoint."""
    _, loss_pos, loss_neg = _bin_losses(summary.bins)
    pos, neg = summary.positives.astype(np.float64), summary.negatives.astype(np.float64)
    n = float(pos.sum() + neg.sum())
    if n < 2:
        return None, None
    mean = float((pos @ loss_pos + neg @ loss_neg) / n)
    dev_pos, dev_neg = loss_pos - mean, loss_neg - mean
    variance = float((pos @ dev_pos ** 2 + neg @ dev_neg ** 2) / (n - 1.0))
    third = float((pos @ dev_pos ** 3 + neg @ dev_neg ** 3) / n)
    return max(0.0, variance), third


def _null_variances(reference: LabelSummary, current: LabelSummary) -> dict[str, tuple[float | None, float | None]]:
    """Per metric ``(window variance, training variance)`` if the model performs as in training
    (`quality_standard_errors` has the maths)."""
    ref_metrics = quality_metrics(reference)
    if current.task == BINARY:
        r, c = _binary_counts(reference), _binary_counts(current)
        out: dict[str, tuple[float | None, float | None]] = {}
        for metric, support in (("accuracy", "n"), ("precision", "predicted"), ("recall", "actual")):
            variance = _proportion_variance(ref_metrics[metric])
            out[metric] = (_per_row(variance, c[support]), _per_row(variance, r[support]))
        log_loss, _ = _binned_log_loss_moments(reference)
        out["log_loss"] = (_per_row(log_loss, c["n"]), _per_row(log_loss, r["n"]))
        (wp, rp), (wr, rr) = out["precision"], out["recall"]
        out["f1"] = (None if wp is None or wr is None else max(wp, wr),
                     None if rp is None or rr is None else max(rp, rr))
        auc = ref_metrics["roc_auc"]
        out["roc_auc"] = (None, None) if auc is None else (
            hanley_mcneil_variance(auc, c["positives"], c["negatives"]),
            hanley_mcneil_variance(auc, r["positives"], r["negatives"]))
        return out
    if current.task == REGRESSION:
        n_ref = float(reference.n)
        mean_abs, mean_sq = reference.sum_abs_error / n_ref, reference.sum_sq_error / n_ref
        mu = reference.sum_error / n_ref
        sigma2 = max(0.0, mean_sq - mu * mu)
        abs_variance = max(0.0, mean_sq - mean_abs * mean_abs)
        rmse = math.sqrt(mean_sq)
        # Delta method: Var(RMSE) = Var(MSE) / (2 RMSE)^2, Var(e^2) as for normal errors.
        square_variance = (2.0 * sigma2 * sigma2 + 4.0 * mu * mu * sigma2) / (4.0 * mean_sq) if rmse > 0 else 0.0
        return {"mae": (_per_row(abs_variance, current.n), _per_row(abs_variance, n_ref)),
                "rmse": (_per_row(square_variance, current.n), _per_row(square_variance, n_ref))}
    r_tp, r_predicted, r_actual = _multiclass_counts(reference)
    _, c_predicted, c_actual = _multiclass_counts(current)
    window_se, training_se = [], []
    for label in sorted(c_actual):
        precision = r_tp.get(label, 0) / r_predicted[label] if r_predicted.get(label) else 0.5
        recall = r_tp.get(label, 0) / r_actual[label] if r_actual.get(label) else 0.5
        vp, vr = _proportion_variance(precision), _proportion_variance(recall)
        window_se.append(math.sqrt(max(vp / max(c_predicted.get(label, 0), 1), vr / c_actual[label])))
        training_se.append(math.sqrt(max(vp / max(r_predicted.get(label, 0), 1), vr / max(r_actual.get(label, 0), 1))))
    accuracy = _proportion_variance(ref_metrics["accuracy"])
    return {"accuracy": (_per_row(accuracy, current.n), _per_row(accuracy, reference.n)),
            "macro_f1": (float(np.mean(window_se)) ** 2 if window_se else None,
                         float(np.mean(training_se)) ** 2 if training_se else None)}


def _binomial_third_cumulant(p: float | None, count: float) -> float:
    """Third cumulant of a proportion of `count` Bernoulli(p) rows: p(1-p)(1-2p)/count^2."""
    if p is None or count <= 0:
        return 0.0
    return p * (1.0 - p) * (1.0 - 2.0 * p) / (count * count)


def _null_third_cumulants(reference: LabelSummary, current: LabelSummary) -> dict[str, float]:
    """Per metric, the third cumulant of the window's metric in the direction of a breach
    (minus the metric for scores) under the training null; 0 where not modelled."""
    ref_metrics = quality_metrics(reference)
    if current.task == BINARY:
        c = _binary_counts(current)
        out = {metric: -_binomial_third_cumulant(ref_metrics[metric], c[support])
               for metric, support in (("accuracy", "n"), ("precision", "predicted"), ("recall", "actual"))}
        _, third = _binned_log_loss_moments(reference)
        out["log_loss"] = (third or 0.0) / (c["n"] * c["n"]) if c["n"] else 0.0
        return out
    if current.task == MULTICLASS:
        return {"accuracy": -_binomial_third_cumulant(ref_metrics["accuracy"], current.n)}
    return {}


def _skew_corrected_margin(standard_error: float | None, third_cumulant: float, z: float) -> tuple[float | None, float]:
    r"""``(z-quantile of the difference, skewness)`` by Cornish-Fisher's first term.

    A mean of a few hundred skewed rows (log loss: mostly small losses, a few
    large ones) has a heavier tail on one side than the normal curve, so
    :math:`z \cdot SE` alone breaches more often than its nominal rate there. With
    :math:`\gamma = \kappa_3 / SE^3` the skewness in the direction of a breach,

    .. math::  	ext{quantile} pprox SE \cdot ig(z + (z^2 - 1)\,\gamma / 6ig)

    and :math:`\gamma` is floored at 0 (the margin never gets narrower than z·SE).
    """
    if standard_error is None:
        return None, 0.0
    if standard_error <= 0:
        return 0.0, 0.0
    gamma = max(0.0, third_cumulant / standard_error ** 3)
    return standard_error * (z + (z * z - 1.0) * gamma / 6.0), gamma


def quality_standard_errors(reference: LabelSummary | None, current: LabelSummary | None) -> dict[str, float | None]:
    r"""Standard error of *window metric − training metric* if the model performs as in training.

    Under that null hypothesis every dispersion is the training one (its metric
    value, its per-row spread) and only the counts come from each side, so the
    standard error of the difference is :math:`\sqrt{V (1/m + 1/M)}` with *m* the
    window's and *M* the training's support (`quality_supports`):

    * accuracy, precision, recall: binomial, :math:`V = p_0 (1 - p_0)` with
      :math:`p_0` the training value; the support is all rows, the predicted
      positives and the actual positives respectively.
    * F1: the larger of the precision and recall standard errors. F1 is their
      harmonic mean, so its first-order (delta-method) error is a weighted mix of
      theirs with weights summing to at most 1: the larger one bounds it.
    * ROC AUC: Hanley & McNeil (1982) at the training AUC, with the window's and
      the training's class counts (`hanley_mcneil_variance`), variances added.
    * log loss: :math:`V` is the sample variance of the training per-row loss,
      taken with each row's score at its score bin's midpoint (the summary keeps
      counts per bin, not rows; 1000 bins are exact to a few per cent except for
      scores in the outermost bins, where the loss is underestimated).
    * MAE: :math:`V = \overline{e^2} - \overline{|e|}^2` of the training errors (exact).
    * RMSE: delta method on the MSE, :math:`SE_{RMSE} = SE_{MSE} / (2\,RMSE)`, with
      :math:`\mathrm{Var}(e^2) = 2\sigma^4 + 4\mu^2\sigma^2` as for normal errors
      of mean :math:`\mu` and variance :math:`\sigma^2` (the summary has no fourth
      moment); heavier-tailed errors make this an underestimate.
    * multiclass: accuracy binomial; macro F1 the mean over the window's labels of
      each label's F1 error (as binary F1, one-vs-rest; a label training never
      had gets :math:`p_0 = 0.5`, the largest variance).

    None where a side has no rows behind the metric; {} without comparable summaries.
    """
    if reference is None or current is None or reference.task != current.task or not reference.n or not current.n:
        return {}
    return {metric: _root_sum(window, training)
            for metric, (window, training) in _null_variances(reference, current).items()}


def training_calibration(reference: LabelSummary) -> np.ndarray | None:
    """P(label = 1 | score bin) in training: the reliability curve the model is held to.

    The per-bin positive rate, fitted by isotonic regression (pool adjacent
    violators, ``scipy.optimize.isotonic_regression``, weighted by the bin's rows)
    so that a thousand sparse bins give a smooth, monotone curve without a
    bandwidth to choose; bins training never filled take the nearest filled bins'
    values (linear in between, flat beyond). None without binary training labels.
    """
    if reference is None or reference.task != BINARY or reference.positives is None:
        return None
    rows = (reference.positives + reference.negatives).astype(np.float64)
    filled = rows > 0
    if not filled.any():
        return None
    rate = reference.positives[filled] / rows[filled]
    fitted = _scipy_optimize.isotonic_regression(rate, weights=rows[filled]).x
    centres = np.arange(reference.bins, dtype=np.float64)
    return np.interp(centres, centres[filled], fitted)


def expected_binary_quality(calibration: np.ndarray,
                            current: LabelSummary) -> dict[str, tuple[float | None, float | None, float]]:
    r"""Binary metrics expected for the window's own scores if labels follow `calibration`.

    Returns ``{metric: (expected value, standard error, third cumulant)}``, the
    last in the direction of a breach (of minus the metric for scores), for the
    skewness correction; 0 where not modelled (recall, F1, ROC AUC).

    With :math:`m_b` window rows in score bin *b* and :math:`c_b` the training
    calibration, labels are independent Bernoulli(:math:`c_b`) under the null
    hypothesis "the relation between inputs and labels is the training one", so
    with *cut* the bin of score 0.5, :math:`PP = \sum_{b \ge cut} m_b`:

    .. math::
        E[TP] = \sum_{b \ge cut} m_b c_b, \quad E[FN] = \sum_{b < cut} m_b c_b, \quad
        V_{TP} = \sum_{b \ge cut} m_b c_b (1 - c_b), \quad V_{FN} = \sum_{b < cut} m_b c_b (1 - c_b)

    accuracy :math:`(E[TP] + N_{<cut} - E[FN]) / n`, variance :math:`(V_{TP} + V_{FN}) / n^2`;
    precision :math:`E[TP] / PP`, variance :math:`V_{TP} / PP^2`; recall
    :math:`R = E[TP] / A`, :math:`A = E[TP] + E[FN]`, variance by the delta method
    :math:`((1 - R)^2 V_{TP} + R^2 V_{FN}) / A^2`; F1 :math:`2E[TP] / (PP + A)`,
    delta method likewise; log loss :math:`\frac1n \sum_b m_b (c_b \ell^1_b + (1 - c_b) \ell^0_b)`
    with the bin midpoint's losses, variance
    :math:`\frac1{n^2} \sum_b m_b c_b (1 - c_b)(\ell^1_b - \ell^0_b)^2`; ROC AUC from
    the expected class counts per bin, Hanley-McNeil variance at that value.
    Third cumulants: :math:`\sum m_b q_b (1 - q_b)(1 - 2 q_b)` over the rows' chance
    :math:`q_b` of being right (accuracy: :math:`c_b` above the cut, :math:`1 - c_b`
    below; precision: :math:`c_b` above) over :math:`n^3` (:math:`PP^3`), and
    :math:`\sum m_b c_b (1 - c_b)(1 - 2c_b)(\ell^1_b - \ell^0_b)^3 / n^3` for log loss.
    A covariate shift moves the scores, so these expectations move with it; only
    labels that stop following the training calibration (concept drift) open a gap.
    """
    pos, neg = current.positives.astype(np.float64), current.negatives.astype(np.float64)
    rows = pos + neg
    n = float(rows.sum())
    cut = current.bins // 2
    c = np.clip(np.asarray(calibration, dtype=np.float64), 0.0, 1.0)
    spread = rows * c * (1.0 - c)
    skew = spread * (1.0 - 2.0 * c)  # third cumulant of each bin's positive count
    above, below = slice(cut, None), slice(None, cut)
    tp, fn = float(rows[above] @ c[above]), float(rows[below] @ c[below])
    v_tp, v_fn = float(spread[above].sum()), float(spread[below].sum())
    # A row below the cut is right when its label is 0: its correctness has the opposite skew.
    k_correct = float(skew[above].sum() - skew[below].sum())
    predicted, below_rows = float(rows[above].sum()), float(rows[below].sum())
    actual = tp + fn
    none = (None, None, 0.0)
    out: dict[str, tuple[float | None, float | None, float]] = {}
    out["accuracy"] = ((tp + below_rows - fn) / n, math.sqrt(v_tp + v_fn) / n, -k_correct / n ** 3) if n else none
    out["precision"] = ((tp / predicted, math.sqrt(v_tp) / predicted, -float(skew[above].sum()) / predicted ** 3)
                        if predicted else none)
    if actual > 0:
        recall = tp / actual
        out["recall"] = (recall, math.sqrt((1 - recall) ** 2 * v_tp + recall ** 2 * v_fn) / actual, 0.0)
        total = predicted + actual
        d_tp, d_fn = 2.0 * (total - tp) / total ** 2, -2.0 * tp / total ** 2
        out["f1"] = (2.0 * tp / total, math.sqrt(d_tp ** 2 * v_tp + d_fn ** 2 * v_fn), 0.0)
    else:
        out["recall"] = out["f1"] = none
    expected_pos, expected_neg = rows * c, rows * (1.0 - c)
    if actual > 0 and n - actual > 0:
        below_neg = np.concatenate(([0.0], np.cumsum(expected_neg)[:-1]))
        auc = float((expected_pos * (below_neg + 0.5 * expected_neg)).sum() / (actual * (n - actual)))
        variance = hanley_mcneil_variance(auc, actual, n - actual)
        out["roc_auc"] = (auc, None if variance is None else math.sqrt(variance), 0.0)
    else:
        out["roc_auc"] = none
    _, loss_pos, loss_neg = _bin_losses(current.bins)
    if n:
        gap = loss_pos - loss_neg
        log_loss = float(rows @ (c * loss_pos + (1.0 - c) * loss_neg)) / n
        out["log_loss"] = (log_loss, math.sqrt(float(spread @ gap ** 2)) / n, float(skew @ gap ** 3) / n ** 3)
    else:
        out["log_loss"] = none
    return out


def _references(reference: LabelSummary | None, current: LabelSummary, compare_with: str
                ) -> tuple[dict[str, float | None], dict[str, float | None], dict[str, float], bool]:
    """``(reference value, standard error of the difference, its third cumulant, calibrated?)`` per metric."""
    training = quality_metrics(reference)
    if reference is None or reference.task != current.task or not reference.n:
        return training, {}, {}, False
    variances = _null_variances(reference, current)
    errors = {metric: _root_sum(window, ref) for metric, (window, ref) in variances.items()}
    if compare_with != QUALITY_VS_CALIBRATION or current.task != BINARY:
        return training, errors, _null_third_cumulants(reference, current), False
    calibration = training_calibration(reference)
    if calibration is None or calibration.size != current.bins:
        return training, errors, _null_third_cumulants(reference, current), False
    values, calibrated_errors, cumulants = {}, {}, {}
    for metric, (value, window_se, third) in expected_binary_quality(calibration, current).items():
        values[metric] = value
        cumulants[metric] = third
        # The reference's own error (finite training labels behind the curve),
        # approximated by the training metric's sampling variance.
        training_variance = variances.get(metric, (None, None))[1]
        calibrated_errors[metric] = None if window_se is None or training_variance is None else \
            math.sqrt(window_se ** 2 + training_variance)
    return values, calibrated_errors, cumulants, True


def model_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[DetectorResult]:
    r"""Quality metrics of the window's joined labels against the model's reference, sample-size aware.

    The reference (``quality_reference``): ``"calibration"`` (default, binary
    tasks) is the value each metric would have on *this window's scores* if the
    labels followed the training calibration (`expected_binary_quality`), so a
    covariate shift, which moves the scores but not the relation, does not read as a
    quality drop; ``"training"`` (and regression, multiclass) is the training metric.

    A score (higher is better) breaches when it falls below
    ``reference - margin``, an error (lower is better) when it rises above
    ``reference + margin``, with

    .. math::  \text{margin} = \max(\text{floor},\; z \cdot SE)

    where *SE* is the standard error of the difference under the null hypothesis
    (`expected_binary_quality`, `quality_standard_errors`), *z* is ``quality_z``
    (one-sided) and the floor is ``quality_max_drop`` (scores, absolute) or
    ``quality_max_error_increase`` × reference (errors, relative): the floor
    keeps huge windows from flagging trivial drops, the z-term keeps small
    windows from flagging noise. A metric with fewer than ``quality_min_labels``
    labels, or (precision, recall, F1, ROC AUC, macro F1) fewer than
    ``quality_min_class_count`` rows behind it (`quality_supports`), is
    insufficient data. Details carry ``training``, ``expected`` (calibration
    reference), ``compared_with``, ``support``, ``standard_error``, ``z``,
    ``margin`` and ``minimum_margin``.
    """
    summary = state.labels
    if summary.task is None or summary.n == 0:
        return []
    current = quality_metrics(summary)
    reference_summary = baseline.quality if baseline.quality is not None and \
        baseline.quality.task == summary.task else None
    training = quality_metrics(reference_summary)
    reference, errors, cumulants, calibrated = _references(reference_summary, summary, thresholds.quality_reference)
    compared_with = QUALITY_VS_CALIBRATION if calibrated else QUALITY_VS_TRAINING
    supports = quality_supports(summary)
    z = thresholds.quality_z
    results = []
    for metric, value in current.items():
        if metric not in QUALITY_SCORES and metric not in QUALITY_ERRORS:
            details: dict[str, Any] = {"task": summary.task, "labels": summary.n}
            results.append(DetectorResult(MODEL_QUALITY, None, metric, value, None, False, details))
            continue
        support = supports.get(metric, summary.n)
        details = {"task": summary.task, "labels": summary.n, "training": training.get(metric),
                   "compared_with": compared_with, "support": support,
                   "support_of": _SUPPORT_NAMES.get(metric, "labels")}
        if calibrated:
            details["expected"] = reference.get(metric)
        if summary.dropped:
            details["dropped_labels"] = summary.dropped
        target = reference.get(metric)
        threshold = None
        breached = False
        if target is not None and value is not None:
            standard_error = errors.get(metric)
            noise, skewness = _skew_corrected_margin(standard_error, cumulants.get(metric, 0.0), z)
            floor = (thresholds.quality_max_drop if metric in QUALITY_SCORES
                     else target * thresholds.quality_max_error_increase)
            margin = floor if noise is None else max(floor, noise)
            details.update(standard_error=standard_error, z=z, skewness=skewness, margin=margin,
                           minimum_margin=floor)
            if metric in QUALITY_SCORES:
                threshold = target - margin
                breached = value < threshold
            else:
                threshold = target + margin
                breached = value > threshold
        if summary.n < thresholds.quality_min_labels:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {summary.n} labels < {thresholds.quality_min_labels}")
            breached = False
        elif metric not in _ROW_METRICS and support < thresholds.quality_min_class_count:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {support} {details['support_of']} "
                                   f"< {thresholds.quality_min_class_count}")
            breached = False
        results.append(DetectorResult(MODEL_QUALITY, None, metric, value, threshold, bool(breached), details))
    return results
