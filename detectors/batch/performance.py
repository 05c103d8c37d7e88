"""`detect --label`: each window's estimated performance and, when the current data holds labels, realized.

Pure: the reference's labels give, once, the calibration of a binary classifier
(`PerformanceReference`, CBPE), the per-class calibrations of a multiclass one
(`MulticlassReference`), or the loss estimators of a regression model (`RegressionReference`,
direct loss estimation); each window's predictions give the estimate with its band. A binary classifier's
own decisions (``--prediction-class``) are estimated as decided; with labels in the current data each
window also says whether the estimates still hold (`EstimateChecks`: ``estimation_invalid``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from driftline.detectors.families.results import insufficient
from driftline.detectors.families.estimated_quality import judge_estimates
from driftline.detectors.estimation.cbpe_multiclass import (
    calibrated_probabilities,
    class_calibrations,
    estimate_multiclass,
    realized_multiclass,
    reference_variances,
)
from driftline.detectors.estimation.cbpe import Estimate, predicted_rows, score_counts
from driftline.detectors.estimation.validity import WindowCheck, judge_validity, window_check
from driftline.detectors.estimation.dle import (
    LossEstimator,
    estimate_losses,
    fit_loss_estimator,
    outside_share,
    realized_regression,
    row_losses,
)
from driftline.detectors.stats.quality import quality_metrics, training_calibration
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline import defaults
from driftline.baseline import BINARY, LabelSummary, category_key
from driftline.baseline.decisions import decision_values
from driftline.baseline.labels import decision_cut
from driftline.window_state.decisions import DecisionCounts
from driftline.errors import UserError
from driftline.vocabulary import INSUFFICIENT_DATA, INSUFFICIENT_DATA_REASON, NUMERIC, REASON_KEY

__all__ = ["EstimateChecks", "MulticlassReference", "PerformanceReference", "RegressionReference", "check_decision",
           "check_label", "for_segment", "performance_reference", "window_performance"]

_NOT_ESTIMATED = ("estimated performance covers binary classifiers (labels 0/1, a score in [0, 1] in --prediction), "
                  "multiclass ones (one probability column per class: --prediction p_a,p_b,p_c) and regression "
                  "models (a numeric label, not only 0/1, and the numeric prediction in --prediction)")


def _scores(frame: pd.DataFrame, prediction: str, where: str) -> np.ndarray:
    series = frame[prediction]
    if not pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        raise UserError(f"--prediction {prediction} must hold the model's scores (numbers in [0, 1]) for --label; "
                        f"the {where} holds {series.dtype} values. {_NOT_ESTIMATED}")
    scores = series.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = scores[np.isfinite(scores)]
    if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
        raise UserError(f"--prediction {prediction} has values outside [0, 1] in the {where} "
                        f"({finite.min():.4g} to {finite.max():.4g}). {_NOT_ESTIMATED}")
    return scores


def _labels(frame: pd.DataFrame, label: str, where: str) -> np.ndarray:
    present = frame[label].dropna()
    values = set(present.unique().tolist())
    if not values <= {0, 1, True, False}:
        shown = ", ".join(map(str, sorted(values, key=str)[:5]))
        raise UserError(f"--label {label}: the {where} holds {len(values)} distinct values ({shown}"
                        f"{', ...' if len(values) > 5 else ''}), not 0/1. {_NOT_ESTIMATED}")
    return frame[label].to_numpy(dtype=object)


def _decisions(frame: pd.DataFrame, column: str | None, where: str) -> np.ndarray | None:
    """The model's decisions in `column` (--prediction-class) as 1.0 / 0.0 / NaN (a null: none given)."""
    if column is None:
        return None
    if column not in frame.columns:
        raise UserError(f"--prediction-class {column}: no such column in the {where} "
                        f"(columns: {', '.join(map(str, frame.columns))})")
    values = decision_values(frame[column])
    odd = frame[column][np.isnan(values) & frame[column].notna().to_numpy()]
    if len(odd):
        shown = ", ".join(map(repr, odd.unique().tolist()[:5]))
        raise UserError(f"--prediction-class {column} must hold the model's decisions, 0/1 or true/false (1: the "
                        f"positive class); the {where} holds {shown}")
    return values


def check_decision(reference: pd.DataFrame, column: str, label: str | None, probabilities: Any) -> None:
    """--prediction-class needs --label, a binary model (one score column) and the column in the reference."""
    if label is None:
        raise UserError(f"--prediction-class {column} needs --label: the decisions are what the estimates follow")
    if probabilities:
        raise UserError("--prediction-class is a binary classifier's decision (0/1); a multiclass model's "
                        "estimates follow its most probable class already")
    _decisions(reference, column, "reference")


@dataclass(frozen=True)
class PerformanceReference:
    """The reference's label summary and training calibration, from its scores and labels (and decisions)."""

    prediction: str
    label: str
    summary: LabelSummary
    calibration: np.ndarray
    training: dict[str, float | None] | None = None  # what estimates are judged against; None: `summary`'s metrics
    decision: str | None = None  # the column of the model's own decisions (--prediction-class)

    @classmethod
    def from_frame(cls, reference: pd.DataFrame, prediction: str | None, label: str,
                   decision: str | None = None) -> "PerformanceReference":
        """Raises `UserError` without --prediction, without the label column, or for a non-binary model."""
        prediction = check_label(reference, prediction, label)
        scores = _scores(reference, prediction, "reference")
        labels = _labels(reference, label, "reference")
        summary = LabelSummary(task=BINARY).add(scores, labels, _decisions(reference, decision, "reference"))
        if not summary.n or not summary.positives.sum() or not summary.negatives.sum():
            raise UserError(f"--label {label}: the reference needs rows of both labels (0 and 1) with a score")
        calibration = training_calibration(summary)
        assert calibration is not None  # a binary summary with rows always has one
        return cls(prediction, label, summary, calibration, decision=decision)


def check_label(reference: pd.DataFrame, prediction: str | None, label: str) -> str:
    """The one prediction column; `UserError` without it, without the label column, or when they are the same."""
    if prediction is None:
        raise UserError(f"--label {label} needs --prediction COL, the column of the model's scores "
                        f"(the probability of label 1) or of its predicted values (regression) in both files")
    if label not in reference.columns:
        raise UserError(f"--label {label}: the reference has no such column; performance is estimated from the "
                        f"reference's labels (columns: {', '.join(map(str, reference.columns))})")
    if label == prediction:
        raise UserError(f"--label and --prediction name the same column {label}")
    return prediction


def _numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype)


def _finite(frame: pd.DataFrame, column: str) -> np.ndarray:
    values = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isfinite(values), values, np.nan)  # infinities are skipped as nulls are


def is_regression(reference: pd.DataFrame, label: str) -> bool:
    """A numeric label holding values other than 0 and 1 (a binary label is 0/1 only)."""
    if not _numeric(reference[label]):
        return False
    values = _finite(reference, label)
    values = values[np.isfinite(values)]
    return bool(values.size) and not np.isin(values, (0.0, 1.0)).all()


@dataclass(frozen=True)
class RegressionReference:
    """A regression model's loss estimators (direct loss estimation), fitted on the reference's labelled rows."""

    prediction: str
    label: str
    estimator: LossEstimator

    @classmethod
    def from_frame(cls, reference: pd.DataFrame, prediction: str, label: str,
                   kinds: dict[str, str]) -> "RegressionReference":
        """`kinds`: the monitored columns (`feature_kinds`, the prediction among them), the estimators' inputs."""
        _regression_values(reference, prediction, label, "reference")
        truth, predicted = _finite(reference, label), _finite(reference, prediction)
        labelled = int((np.isfinite(truth) & np.isfinite(predicted)).sum())
        if labelled < defaults.LOSS_ESTIMATOR_MIN_ROWS:
            raise UserError(f"--label {label}: the reference has {labelled} rows with a finite label and prediction; "
                            f"estimating a regression model's error needs {defaults.LOSS_ESTIMATOR_MIN_ROWS}")
        return cls(prediction, label, fit_loss_estimator(reference, kinds, truth, predicted, prediction))


def _regression_values(frame: pd.DataFrame, prediction: str, label: str | None, where: str) -> None:
    for option, column in (("--prediction", prediction), ("--label", label)):
        if column is not None and not _numeric(frame[column]) and frame[column].notna().any():
            raise UserError(f"{option} {column} must hold numbers for a regression model (the reference's label "
                            f"is numeric); the {where} holds {frame[column].dtype} values")


@dataclass(frozen=True)
class MulticlassReference:
    """The reference's classes (sorted), their probability columns (same order) and per-class calibrations."""

    columns: list[str]
    label: str
    classes: list[str]
    calibrations: list[np.ndarray]
    training: dict[str, float | None]
    variances: dict[str, float]  # the calibration's error, approximately (`reference_variances`)

    @classmethod
    def from_frame(cls, reference: pd.DataFrame, columns: list[str], label: str) -> "MulticlassReference":
        if label not in reference.columns:
            raise UserError(f"--label {label}: the reference has no such column; performance is estimated from the "
                            f"reference's labels (columns: {', '.join(map(str, reference.columns))})")
        missing = [c for c in columns if c not in reference.columns]
        if missing:
            raise UserError(f"--prediction: column(s) {', '.join(missing)} not in the reference")
        present = reference[label].dropna()
        classes = sorted({category_key(v) for v in present.unique().tolist()})
        if len(columns) != len(classes):
            raise UserError(f"--prediction names {len(columns)} probability columns but --label {label} has "
                            f"{len(classes)} classes ({', '.join(classes[:10])}): name one column per class, "
                            f"in the classes' sorted order")
        probabilities = _probabilities(reference, columns, "reference")
        labels = _class_index(reference[label], classes)
        keep = labels >= 0
        bins = LabelSummary().bins
        calibrations = class_calibrations(probabilities[keep], labels[keep], bins)
        training = realized_multiclass(labels[keep], probabilities[keep].argmax(axis=1), len(classes))
        return cls(list(columns), label, classes, calibrations, training,
                   reference_variances(calibrations, probabilities[keep]))


def _probabilities(frame: pd.DataFrame, columns: list[str], where: str) -> np.ndarray:
    for column in columns:
        _scores(frame, column, where)  # numbers in [0, 1], or a clear error
    values = frame[columns].to_numpy(dtype=np.float64, na_value=np.nan)
    return np.nan_to_num(values, nan=0.0)


def _class_index(series: pd.Series, classes: list[str]) -> np.ndarray:
    """Each row's class position in `classes`; -1 for a null or a class the reference never had."""
    position = {c: i for i, c in enumerate(classes)}
    return np.array([-1 if pd.isna(v) else position.get(category_key(v), -1) for v in series.tolist()], dtype=np.intp)


Reference = PerformanceReference | MulticlassReference | RegressionReference


def for_segment(reference: Reference, rows: pd.DataFrame, min_rows: int, threshold: float | None = None) -> Reference:
    """`reference` with the training values of one segment's reference `rows`, for that segment's windows.

    The calibration (or the loss estimators) stay the whole reference's: a score means what it
    means everywhere. What each estimate is judged against becomes the segment's own training
    performance, so a segment that was always harder than average is not read as a drop. With
    fewer than `min_rows` labelled rows (or one class only) the whole reference's values stay.
    """
    if reference.label not in rows.columns:
        return reference
    if isinstance(reference, RegressionReference):
        truth, predicted = _finite(rows, reference.label), _finite(rows, reference.prediction)
        if int((np.isfinite(truth) & np.isfinite(predicted)).sum()) < min_rows:
            return reference
        estimator = replace(reference.estimator, training=realized_regression(truth, predicted))
        return replace(reference, estimator=estimator)
    if isinstance(reference, MulticlassReference):
        labels = _class_index(rows[reference.label], reference.classes)
        keep = labels >= 0
        if int(keep.sum()) < min_rows:
            return reference
        predicted = _probabilities(rows, reference.columns, "reference").argmax(axis=1)
        return replace(reference, training=realized_multiclass(labels[keep], predicted[keep], len(reference.classes)))
    decisions = None if reference.decision is None else _decisions(rows, reference.decision, "reference")
    summary = LabelSummary(task=BINARY).add(_scores(rows, reference.prediction, "reference"),
                                            _labels(rows, reference.label, "reference"), decisions)
    if summary.n < min_rows or not summary.positives.sum() or not summary.negatives.sum():
        return reference
    return replace(reference, training=quality_metrics(summary, threshold))


def performance_reference(reference: pd.DataFrame, prediction: str | list[str] | None, label: str,
                          kinds: dict[str, str] | None = None, decision: str | None = None) -> Reference:
    """Binary (one score column), multiclass (several probability columns) or regression (a numeric label not
    only 0/1; `kinds`, the monitored columns, are the loss estimators' inputs) reference for `detect --label`;
    `decision`: a binary classifier's column of its own decisions (--prediction-class)."""
    if isinstance(prediction, list) and len(prediction) > 1:
        return MulticlassReference.from_frame(reference, prediction, label)
    if isinstance(prediction, list):
        prediction = prediction[0] if prediction else None
    prediction = check_label(reference, prediction, label)
    if is_regression(reference, label):
        if decision is not None:
            raise UserError(f"--prediction-class {decision}: a regression model makes no class decision")
        return RegressionReference.from_frame(reference, prediction, label, kinds or {prediction: NUMERIC})
    return PerformanceReference.from_frame(reference, prediction, label, decision)


def _multiclass_performance(reference: MulticlassReference, frame: pd.DataFrame,
                            thresholds: WindowThresholds) -> dict[str, Any]:
    probabilities = _probabilities(frame, reference.columns, "current data")
    predicted = probabilities.argmax(axis=1)
    calibrated = calibrated_probabilities(reference.calibrations, probabilities)
    z = thresholds.estimated_quality_z
    estimates = estimate_multiclass(calibrated, predicted, z, reference.variances)
    estimated = {}
    for metric, estimate in estimates.items():
        training = reference.training.get(metric)
        alert = (training is not None and estimate.upper is not None
                 and estimate.upper < training - thresholds.estimated_quality_max_drop)
        entry = _estimate_entry(estimate, training)
        if len(frame) < thresholds.estimated_quality_min_rows:
            insufficient(entry, f"{INSUFFICIENT_DATA_REASON}: {len(frame)} scored rows < "
                                f"{thresholds.estimated_quality_min_rows}")
        else:
            entry["alert"] = bool(alert)
        estimated[metric] = entry
    out: dict[str, Any] = {"estimated": estimated}
    if reference.label in frame.columns:
        labels = _class_index(frame[reference.label], reference.classes)
        labelled = frame[reference.label].notna().to_numpy()
        realized = realized_multiclass(np.where(labels[labelled] >= 0, labels[labelled], -1), predicted[labelled],
                                       len(reference.classes))
        expected = estimate_multiclass(calibrated[labelled], predicted[labelled], z, reference.variances)
        out["realized"] = _realized_entries(realized, expected, int(labelled.sum()), thresholds)
    return out


def _estimate_entry(estimate: Estimate, training: float | None) -> dict[str, Any]:
    """An estimate's entry before it is judged (``alert`` false)."""
    return {"value": estimate.value, "lower": estimate.lower, "upper": estimate.upper, "alert": False,
            "standard_error": estimate.standard_error, "training": training}


def _realized_entries(realized: dict[str, float | None], expected: dict[str, Estimate], labels: int,
                      thresholds: WindowThresholds) -> dict[str, dict[str, Any]]:
    """Each metric realized on the labelled rows, its gap to what the estimate expects on those rows, and whether
    the gap is beyond ``z`` standard errors (from ``quality_min_labels`` labels): the concept-drift signal."""
    out = {}
    for metric, on_labels in expected.items():
        value = realized[metric]
        gap = None if value is None or on_labels.value is None else value - on_labels.value
        concept = None
        if gap is not None and on_labels.standard_error and labels >= thresholds.quality_min_labels:
            concept = bool(abs(gap) > thresholds.estimated_quality_z * on_labels.standard_error)
        out[metric] = {"value": value, "labels": labels, "gap": gap, "concept_drift": concept}
    return out


def _entry(result: Any) -> dict[str, Any]:
    d = result.details
    entry = {"value": result.value, "lower": d.get("lower"), "upper": d.get("upper"), "alert": result.breached,
             "standard_error": d.get("standard_error"), "training": d.get("training")}
    if d.get(INSUFFICIENT_DATA):
        insufficient(entry, d.get(REASON_KEY))
    return entry


def _regression_performance(reference: RegressionReference, frame: pd.DataFrame,
                            thresholds: WindowThresholds) -> dict[str, Any]:
    has_label = reference.label in frame.columns
    _regression_values(frame, reference.prediction, reference.label if has_label else None, "current data")
    predicted = _finite(frame, reference.prediction)
    z = thresholds.estimated_quality_z
    losses = row_losses(reference.estimator, frame)
    estimates = estimate_losses(reference.estimator, *losses, z)
    rows = int(np.isfinite(predicted).sum())
    outside = outside_share(reference.estimator, predicted)
    estimated = {}
    for metric, estimate in estimates.items():
        training = reference.estimator.training.get(metric)
        threshold = None if training is None else training * (1.0 + thresholds.estimated_quality_max_error_increase)
        entry = _estimate_entry(estimate, training)
        if rows < thresholds.estimated_quality_min_rows:
            insufficient(entry, f"{INSUFFICIENT_DATA_REASON}: {rows} predicted rows < {thresholds.estimated_quality_min_rows}")
        elif outside > thresholds.estimated_quality_max_outside_share:
            low, high = reference.estimator.prediction_range
            insufficient(entry, f"untrusted: {outside:.1%} of predictions outside the reference's range "
                                f"[{low:.4g}, {high:.4g}] > {thresholds.estimated_quality_max_outside_share:.1%}")
        else:  # an error: lower is better, so even the band's optimistic end is worse than training
            entry["alert"] = bool(threshold is not None and estimate.lower is not None and estimate.lower > threshold)
        estimated[metric] = entry
    out: dict[str, Any] = {"estimated": estimated}
    if has_label:
        truth = _finite(frame, reference.label)
        labelled = np.isfinite(truth) & np.isfinite(predicted)
        realized = realized_regression(truth[labelled], predicted[labelled])
        absolute, squared = losses
        expected = estimate_losses(reference.estimator, absolute[labelled], squared[labelled], z)
        out["realized"] = _realized_entries(realized, expected, int(labelled.sum()), thresholds)
    return out


def window_performance(reference: Reference, frame: pd.DataFrame, thresholds: WindowThresholds) -> dict[str, Any]:
    """``{"estimated": {metric: {value, lower, upper, alert, ...}}, "realized": {metric: {value, gap, ...}}}``.

    ``realized`` only when `frame` holds the label column: the metric on the rows
    with a label, ``gap`` realized minus what the estimate expects on those rows,
    ``concept_drift`` the gap beyond ``z`` standard errors (`judge_estimates`).
    Multiclass: accuracy and macro F1 only (`driftline.detectors.estimation.cbpe_multiclass`).
    Regression: MAE and RMSE (`driftline.detectors.estimation.dle`), alerting when the
    band's lower end exceeds ``training * (1 + estimated_quality_max_error_increase)``.
    """
    if isinstance(reference, RegressionReference):
        return _regression_performance(reference, frame, thresholds)
    if isinstance(reference, MulticlassReference):
        return _multiclass_performance(reference, frame, thresholds)
    scores = _scores(frame, reference.prediction, "current data")
    bins = reference.summary.bins
    decisions = _decisions(frame, reference.decision, "current data")
    decided = DecisionCounts(bins, np.zeros(bins, dtype=np.int64), np.zeros(bins, dtype=np.int64))
    if decisions is not None:
        decided.add(scores, decisions)
    rows, predicted = predicted_rows(score_counts(scores, bins), decision_cut(thresholds.estimated_quality_threshold,
                                                                              bins), decided.rows, decided.called)
    labelled = None
    if reference.label in frame.columns:
        labelled = LabelSummary(task=BINARY).add(scores, _labels(frame, reference.label, "current data"), decisions)
    results = judge_estimates(reference.summary, reference.calibration, rows, thresholds, labelled,
                              reference.training, predicted)
    out: dict[str, Any] = {"estimated": {r.metric: _entry(r) for r in results}}
    if labelled is not None:
        out["realized"] = {r.metric: {"value": r.details.get("realized"), "labels": int(labelled.n),
                                      "gap": r.details.get("gap"), "concept_drift": r.details.get("concept_drift")}
                           for r in results}
    return out


class EstimateChecks:
    """The windows of one `detect` run, in order: each labelled window's estimates checked against what came true,
    and whether the estimates still hold over the windows up to and including it (``estimation_invalid``,
    `driftline.detectors.estimation.validity`)."""

    def __init__(self, thresholds: WindowThresholds):
        self.thresholds = thresholds
        self.checks: list[WindowCheck] = []

    def judged(self, performance: dict[str, Any]) -> dict[str, Any]:
        """`performance` (one window's) with ``estimation_invalid`` when it holds ``realized`` (labels)."""
        realized = performance.get("realized")
        if not isinstance(realized, dict):
            return performance
        check = window_check({metric: entry.get("concept_drift") for metric, entry in realized.items()})
        if check is not None:
            self.checks.append(check)
        verdict = judge_validity(self.checks, z=self.thresholds.estimated_quality_z,
                                 alpha=self.thresholds.estimation_invalid_alpha,
                                 windows=self.thresholds.estimation_invalid_windows)
        performance["estimation_invalid"] = verdict.invalid
        return performance
