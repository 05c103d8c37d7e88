"""Evaluate one merged window against its baseline: every detector family, pure.

`evaluate_window(baseline, state, thresholds=..., slo=..., transform=...)`
returns a flat list of `DetectorResult`s (detector, feature, metric, value,
threshold, breached, details) for these families:

* ``data_drift``: per feature, the binned tests (`detectors.binned`), p-values
  corrected by Benjamini-Hochberg across the window's features, verdict by
  `detectors.decision.decide_feature`; plus one dataset-level result
  (share of drifted features against ``dataset_drift_share``).
* ``prediction_drift``: the same tests on the model's output.
* ``data_quality``: missing rate against the training null rate, out-of-range
  share, unseen-category share, type changes, baseline features missing from
  events, features the baseline does not know.
* ``skew``: distribution skew (serving vs the training baseline, effect size only)
  and parity skew (the training transform re-run on the sample's raw ``inputs``
  must reproduce the served features: mismatch rate per feature).
* ``latency``: p50/p95/p99 per latency part against the model's SLO (`LatencySLO`),
  error rate, QPS = events / window seconds, and in-flight concurrency by Little's
  law :math:`L = \\lambda W` (arrival rate times mean time in the system).
* ``model_quality``: from joined labels (`quality_metrics`): accuracy, precision,
  recall, F1, ROC AUC, log loss (binary); MAE, RMSE (regression); accuracy and
  macro F1 (multiclass); compared with the training metrics in the baseline.

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
    CategoricalProfile,
    LabelSummary,
    NumericProfile,
    Profile,
    category_key,
    is_null,
)
from driftline.errors import UserError
from driftline.window_state import FeatureWindow, WindowState

__all__ = [
    "DetectorResult",
    "LatencySLO",
    "WindowThresholds",
    "evaluate_window",
    "quality_metrics",
]

DATA_DRIFT = "data_drift"
PREDICTION_DRIFT = "prediction_drift"
DATA_QUALITY = "data_quality"
SKEW = "skew"
LATENCY = "latency"
MODEL_QUALITY = "model_quality"
FAMILIES = (DATA_DRIFT, PREDICTION_DRIFT, DATA_QUALITY, SKEW, LATENCY, MODEL_QUALITY)


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
    quality_max_drop: float = defaults.QUALITY_MAX_DROP
    quality_max_error_increase: float = defaults.QUALITY_MAX_ERROR_INCREASE

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
    parity-skew result. `window_seconds` (default `defaults.WINDOW_SECONDS`) turns
    the event count into QPS.
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
        if DATA_DRIFT in families:
            results += data_drift(baseline, state, thresholds.drift)
        if PREDICTION_DRIFT in families:
            results += prediction_drift(baseline, state, thresholds.drift)
        if DATA_QUALITY in families:
            results += data_quality(baseline, state, thresholds)
        if SKEW in families:
            results += skew(baseline, state, thresholds, transform)
        if MODEL_QUALITY in families:
            results += model_quality(baseline, state, thresholds)
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
    results.append(DetectorResult(DATA_DRIFT, None, "drifted_share", share, thresholds.dataset_drift_share,
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

def skew(baseline: Baseline, state: WindowState, thresholds: WindowThresholds,
         transform: Any | None) -> list[DetectorResult]:
    """Distribution skew per feature (effect size vs training) and parity skew on the sample."""
    results = []
    for name, profile in baseline.profiles.items():
        window = state.features.get(name)
        if isinstance(profile, NumericProfile):
            rows = min(profile.count, window.binned) if window is not None else 0
            value = binned.psi_binned(profile, window) if rows else None
        else:
            rows = min(profile.count, sum(window.categories.values())) if window is not None else 0
            value = stats.psi(*binned.category_counts(profile, window)[1:]) if rows else None
        details: dict[str, Any] = {"kind": profile.kind, "rows": rows}
        min_rows = thresholds.drift.for_feature(name).min_rows
        breached = value is not None and value >= thresholds.skew_distribution_psi
        if rows < min_rows:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {rows} rows < {min_rows}")
            breached = False
        results.append(DetectorResult(SKEW, name, "distribution_psi", value, thresholds.skew_distribution_psi,
                                      bool(breached), details))
    if transform is not None:
        results += parity_skew(baseline, state, thresholds, transform)
    return results


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
    records = [r for r in state.sample if isinstance(r.get("inputs"), Mapping) and isinstance(r.get("features"), Mapping)]
    details: dict[str, Any] = {"sampled": len(records)}
    if len(records) < thresholds.parity_min_sample:
        _insufficient(details, f"{INSUFFICIENT_DATA}: {len(records)} sampled events with inputs "
                               f"< {thresholds.parity_min_sample}")
        return [DetectorResult(SKEW, None, "parity_mismatch_rate", None, thresholds.parity_mismatch_rate, False,
                               details)]
    try:
        recomputed = _apply(transform, [r["inputs"] for r in records])
        if len(recomputed) != len(records):
            raise ValueError(f"returned {len(recomputed)} records for {len(records)} inputs")
    except Exception as exc:  # a transform that cannot process served inputs is itself skew
        details["error"] = f"{type(exc).__name__}: {exc}"
        return [DetectorResult(SKEW, None, "parity_mismatch_rate", 1.0, thresholds.parity_mismatch_rate, True,
                               details)]
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
        results.append(DetectorResult(SKEW, name, "parity_mismatch_rate", rate, thresholds.parity_mismatch_rate,
                                      bool(breached), _json_safe(feature_details)))
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


# Higher is better for these; the rest are errors (lower is better).
_SCORES = frozenset(("accuracy", "precision", "recall", "f1", "roc_auc", "macro_f1"))
_ERRORS = frozenset(("log_loss", "mae", "rmse"))


def model_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[DetectorResult]:
    """Quality metrics of the window's joined labels against the training metrics."""
    summary = state.labels
    if summary.task is None or summary.n == 0:
        return []
    current = quality_metrics(summary)
    reference = quality_metrics(baseline.quality) if baseline.quality is not None and \
        baseline.quality.task == summary.task else {}
    results = []
    for metric, value in current.items():
        if metric not in _SCORES and metric not in _ERRORS:
            details: dict[str, Any] = {"task": summary.task, "labels": summary.n}
            results.append(DetectorResult(MODEL_QUALITY, None, metric, value, None, False, details))
            continue
        training = reference.get(metric)
        details = {"task": summary.task, "labels": summary.n, "training": training}
        threshold = None
        breached = False
        if training is not None and value is not None:
            if metric in _SCORES:
                threshold = training - thresholds.quality_max_drop
                breached = value < threshold
            else:
                threshold = training * (1.0 + thresholds.quality_max_error_increase)
                breached = value > threshold
        if summary.n < thresholds.quality_min_labels:
            _insufficient(details, f"{INSUFFICIENT_DATA}: {summary.n} labels < {thresholds.quality_min_labels}")
            breached = False
        results.append(DetectorResult(MODEL_QUALITY, None, metric, value, threshold, bool(breached), details))
    return results
