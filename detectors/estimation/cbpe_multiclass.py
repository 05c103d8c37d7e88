r"""CBPE for multiclass classifiers: accuracy and macro F1 from per-class probabilities alone.

As the binary method (`driftline.detectors.estimation.cbpe`), one class at a time: class *k*'s
calibration :math:`c_k(p)` = P(label = k | the model's probability of k in score bin *b*),
an isotonic fit on the reference (one-vs-rest, `training_calibration`); a row's calibrated
probabilities are those, normalised to sum to 1. The predicted class is the argmax of the
model's probabilities; a row is right with chance :math:`q_i` = its calibrated probability of
the predicted class, so

.. math::
    \widehat{acc} = \frac1n \sum_i q_i, \qquad
    \widehat{F1}_k = \frac{2\,E[TP_k]}{PP_k + E[A_k]}, \quad
    E[TP_k] = \sum_{i: \hat y_i = k} \tilde c_{ik}, \quad E[A_k] = \sum_i \tilde c_{ik}

and macro F1 the mean over the reference's classes. Standard errors: labels independent
across rows, so accuracy :math:`\sqrt{\sum q_i (1 - q_i)} / n`; macro F1 by the delta
method over every row's label at once: a row of label *j* adds
:math:`g_{ij} = \frac1K \left(\frac{2[\hat y_i = j]}{PP_j + E[A_j]} - \frac{2 E[TP_j]}{(PP_j + E[A_j])^2}\right)`
to macro F1, so its variance is :math:`\sum_i \left(\sum_j \tilde c_{ij} g_{ij}^2 - (\sum_j \tilde c_{ij} g_{ij})^2\right)`
(a row's label counts for one class and against the others: the classes' F1 are not independent, and
summing their variances alone understated the spread by a quarter). The calibration's own error is
approximated, as in the binary case, by the metric's sampling variance on the reference
(`reference_variances`), added.
"""
from __future__ import annotations

import math

import numpy as np

from driftline.detectors.estimation.cbpe import Estimate
from driftline.detectors.stats.quality import training_calibration
from driftline.baseline import BINARY, LabelSummary
from driftline.vocabulary import ACCURACY, MACRO_F1

__all__ = ["MULTICLASS_METRICS", "calibrated_probabilities", "class_calibrations", "estimate_multiclass",
           "realized_multiclass", "reference_variances"]

MULTICLASS_METRICS = (ACCURACY, MACRO_F1)


def class_calibrations(probabilities: np.ndarray, labels: np.ndarray, bins: int) -> list[np.ndarray]:
    """Per class *k*, P(label = k | probability of k's score bin), from the reference (`labels`: class index)."""
    out = []
    for k in range(probabilities.shape[1]):
        summary = LabelSummary(task=BINARY).add(probabilities[:, k], (labels == k).astype(int))
        calibration = training_calibration(summary)
        out.append(calibration if calibration is not None else np.zeros(bins))
    return out


def calibrated_probabilities(calibrations: list[np.ndarray], probabilities: np.ndarray) -> np.ndarray:
    """Each row's calibrated class probabilities, normalised to sum to 1 (uniform where all are 0)."""
    bins = calibrations[0].size
    index = np.clip(np.floor(np.clip(probabilities, 0.0, 1.0) * bins), 0, bins - 1).astype(np.intp)
    raw = np.column_stack([calibrations[k][index[:, k]] for k in range(len(calibrations))])
    total = raw.sum(axis=1, keepdims=True)
    uniform = np.full_like(raw, 1.0 / raw.shape[1])
    return np.where(total > 0, raw / np.where(total > 0, total, 1.0), uniform)


def _f1(tp: float, fn: float, predicted: float) -> float:
    denominator = predicted + tp + fn
    return 2.0 * tp / denominator if denominator else 0.0


def _macro_f1_variance(calibrated: np.ndarray, predicted: np.ndarray, tps: np.ndarray,
                       denominators: np.ndarray) -> float:
    """Macro F1's variance by the delta method over every row's label at once (module docstring)."""
    classes = calibrated.shape[1]
    safe = np.where(denominators > 0, denominators, 1.0)
    own = (predicted[:, None] == np.arange(classes)[None, :]) * (2.0 / safe)[None, :]
    gradient = np.where(denominators > 0, own - (2.0 * tps / safe ** 2)[None, :], 0.0) / classes
    first = (calibrated * gradient).sum(axis=1)
    return float(((calibrated * gradient ** 2).sum(axis=1) - first ** 2).sum())


def reference_variances(calibrations: list[np.ndarray], probabilities: np.ndarray) -> dict[str, float]:
    """The sampling variance of each metric over the reference's own rows: the calibration's error, approximately."""
    estimates = estimate_multiclass(calibrated_probabilities(calibrations, probabilities),
                                    probabilities.argmax(axis=1), 0.0)
    return {metric: (e.standard_error or 0.0) ** 2 for metric, e in estimates.items()}


def estimate_multiclass(calibrated: np.ndarray, predicted: np.ndarray, z: float,
                        extra_variances: dict[str, float] | None = None) -> dict[str, Estimate]:
    """Accuracy and macro F1 expected for rows with `calibrated` probabilities and `predicted` class indices;
    `extra_variances` (`reference_variances`) are added to the window's."""
    n, classes = calibrated.shape
    if n == 0:
        return {metric: Estimate(None, None, None, None) for metric in MULTICLASS_METRICS}
    q = calibrated[np.arange(n), predicted]
    accuracy = float(q.mean())
    accuracy_se = math.sqrt(float((q * (1.0 - q)).sum())) / n
    f1s, tps, denominators = [], [], []
    for k in range(classes):
        mine = predicted == k
        tp, actual, pp = float(calibrated[mine, k].sum()), float(calibrated[:, k].sum()), float(mine.sum())
        f1s.append(_f1(tp, actual - tp, pp))
        tps.append(tp)
        denominators.append(pp + actual)
    macro_variance = _macro_f1_variance(calibrated, predicted, np.asarray(tps), np.asarray(denominators))
    macro = float(np.mean(f1s))
    extra = extra_variances or {}
    accuracy_se = math.sqrt(accuracy_se ** 2 + extra.get(ACCURACY, 0.0))
    macro_se = math.sqrt(macro_variance + extra.get(MACRO_F1, 0.0))

    def band(value: float, se: float) -> Estimate:
        return Estimate(value, se, max(0.0, value - z * se), min(1.0, value + z * se))

    return {ACCURACY: band(accuracy, accuracy_se), MACRO_F1: band(macro, macro_se)}


def realized_multiclass(labels: np.ndarray, predicted: np.ndarray, classes: int) -> dict[str, float | None]:
    """Accuracy and macro F1 (over the `classes` reference classes, 0 where undefined) of labelled rows."""
    if labels.size == 0:
        return {ACCURACY: None, MACRO_F1: None}
    f1s = []
    for k in range(classes):
        tp = float(((predicted == k) & (labels == k)).sum())
        f1s.append(_f1(tp, float(((predicted != k) & (labels == k)).sum()), float((predicted == k).sum())))
    return {ACCURACY: float((labels == predicted).mean()), MACRO_F1: float(np.mean(f1s))}
