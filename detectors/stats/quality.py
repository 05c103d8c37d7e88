"""Model-quality statistics from label summaries: metrics, supports, standard errors, calibration (pure maths)."""
from __future__ import annotations

import math

import numpy as np

from driftline import defaults
from driftline.baseline import BINARY, MULTICLASS, REGRESSION, LabelSummary
from driftline.baseline.labels import decision_cut
from driftline.vocabulary import ACCURACY, BIAS, F1, LOG_LOSS, MACRO_F1, MAE, PRECISION, RECALL, RMSE, ROC_AUC

__all__ = [
    "expected_binary_quality",
    "expected_quality_of_scores",
    "hanley_mcneil_variance",
    "null_third_cumulants",
    "null_variances",
    "quality_metrics",
    "quality_standard_errors",
    "quality_supports",
    "root_sum",
    "skew_corrected_margin",
    "training_calibration",
]


def _cut(summary: LabelSummary, threshold: float | None) -> int:
    return summary.bins // 2 if threshold is None else decision_cut(threshold, summary.bins)


def quality_metrics(summary: LabelSummary | None, threshold: float | None = None) -> dict[str, float | None]:
    r"""Quality metrics from a `LabelSummary` (pure counting, no raw predictions needed).

    Binary (the model's own decision where a pair carried one, else `threshold`, default 0.5: scores in
    bins at or above it predict positive; `LabelSummary.predicted_positive`):
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
        called_pos, called_neg = summary.predicted_positive(_cut(summary, threshold))
        tp, fp = called_pos.sum(), called_neg.sum()
        fn, tn = pos.sum() - tp, neg.sum() - fp
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        total_pos, total_neg = pos.sum(), neg.sum()
        auc = None
        if total_pos and total_neg:
            below = np.concatenate(([0.0], np.cumsum(neg)[:-1]))
            auc = float((pos * (below + 0.5 * neg)).sum() / (total_pos * total_neg))
        return {ACCURACY: float((tp + tn) / n), PRECISION: float(precision), RECALL: float(recall),
                F1: float(f1), ROC_AUC: auc, LOG_LOSS: summary.log_loss_sum / n}
    if summary.task == REGRESSION:
        return {MAE: summary.sum_abs_error / n, RMSE: math.sqrt(summary.sum_sq_error / n),
                BIAS: summary.sum_error / n}
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
    return {ACCURACY: correct / n, MACRO_F1: float(np.mean(f1s)) if f1s else 0.0}


def _binary_counts(summary: LabelSummary, threshold: float | None = None) -> dict[str, float]:
    pos, neg = summary.positives.astype(np.float64), summary.negatives.astype(np.float64)
    called_pos, called_neg = summary.predicted_positive(_cut(summary, threshold))
    tp, fp = float(called_pos.sum()), float(called_neg.sum())
    fn, tn = float(pos.sum()) - tp, float(neg.sum()) - fp
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
        return {ACCURACY: n, PRECISION: int(c["predicted"]), RECALL: int(c["actual"]),
                F1: int(min(c["predicted"], c["actual"])), ROC_AUC: int(min(c["positives"], c["negatives"])),
                LOG_LOSS: n}
    if summary.task == REGRESSION:
        return {MAE: n, RMSE: n}
    _, _, actual = _multiclass_counts(summary)
    return {ACCURACY: n, MACRO_F1: min(actual.values()) if actual else 0}


def _proportion_variance(p: float | None) -> float | None:
    return None if p is None else max(0.0, p * (1.0 - p))


def _per_row(variance: float | None, count: float) -> float | None:
    """The variance of a mean (or proportion) of `count` rows with per-row `variance`; None if no rows."""
    if variance is None or count <= 0:
        return None
    return variance / count


def root_sum(*variances: float | None) -> float | None:
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


def bin_losses(bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(midpoint score, loss if label 1, loss if label 0)`` per score bin (scores clipped as the log loss clips)."""
    mid = np.clip((np.arange(bins) + 0.5) / bins, defaults.LOG_LOSS_EPSILON, 1.0 - defaults.LOG_LOSS_EPSILON)
    return mid, -np.log(mid), -np.log1p(-mid)


def _binned_log_loss_moments(summary: LabelSummary) -> tuple[float | None, float | None]:
    """Sample variance (ddof=1) and third central moment of the per-row log loss, each row's
    score at its bin's midpoint."""
    _, loss_pos, loss_neg = bin_losses(summary.bins)
    pos, neg = summary.positives.astype(np.float64), summary.negatives.astype(np.float64)
    n = float(pos.sum() + neg.sum())
    if n < 2:
        return None, None
    mean = float((pos @ loss_pos + neg @ loss_neg) / n)
    dev_pos, dev_neg = loss_pos - mean, loss_neg - mean
    variance = float((pos @ dev_pos ** 2 + neg @ dev_neg ** 2) / (n - 1.0))
    third = float((pos @ dev_pos ** 3 + neg @ dev_neg ** 3) / n)
    return max(0.0, variance), third


def null_variances(reference: LabelSummary, current: LabelSummary,
                   threshold: float | None = None) -> dict[str, tuple[float | None, float | None]]:
    """Per metric ``(window variance, training variance)`` if the model performs as in training
    (`quality_standard_errors` has the maths); `threshold` decides the rows without the model's decision."""
    ref_metrics = quality_metrics(reference, threshold)
    if current.task == BINARY:
        r, c = _binary_counts(reference, threshold), _binary_counts(current, threshold)
        out: dict[str, tuple[float | None, float | None]] = {}
        for metric, support in ((ACCURACY, "n"), (PRECISION, "predicted"), (RECALL, "actual")):
            variance = _proportion_variance(ref_metrics[metric])
            out[metric] = (_per_row(variance, c[support]), _per_row(variance, r[support]))
        log_loss, _ = _binned_log_loss_moments(reference)
        out[LOG_LOSS] = (_per_row(log_loss, c["n"]), _per_row(log_loss, r["n"]))
        (wp, rp), (wr, rr) = out[PRECISION], out[RECALL]
        out[F1] = (None if wp is None or wr is None else max(wp, wr),
                     None if rp is None or rr is None else max(rp, rr))
        auc = ref_metrics[ROC_AUC]
        out[ROC_AUC] = (None, None) if auc is None else (
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
        return {MAE: (_per_row(abs_variance, current.n), _per_row(abs_variance, n_ref)),
                RMSE: (_per_row(square_variance, current.n), _per_row(square_variance, n_ref))}
    r_tp, r_predicted, r_actual = _multiclass_counts(reference)
    _, c_predicted, c_actual = _multiclass_counts(current)
    window_se, training_se = [], []
    for label in sorted(c_actual):
        precision = r_tp.get(label, 0) / r_predicted[label] if r_predicted.get(label) else 0.5
        recall = r_tp.get(label, 0) / r_actual[label] if r_actual.get(label) else 0.5
        vp, vr = _proportion_variance(precision), _proportion_variance(recall)
        window_se.append(math.sqrt(max(vp / max(c_predicted.get(label, 0), 1), vr / c_actual[label])))
        training_se.append(math.sqrt(max(vp / max(r_predicted.get(label, 0), 1), vr / max(r_actual.get(label, 0), 1))))
    accuracy = _proportion_variance(ref_metrics[ACCURACY])
    return {ACCURACY: (_per_row(accuracy, current.n), _per_row(accuracy, reference.n)),
            MACRO_F1: (float(np.mean(window_se)) ** 2 if window_se else None,
                         float(np.mean(training_se)) ** 2 if training_se else None)}


def _binomial_third_cumulant(p: float | None, count: float) -> float:
    """Third cumulant of a proportion of `count` Bernoulli(p) rows: p(1-p)(1-2p)/count^2."""
    if p is None or count <= 0:
        return 0.0
    return p * (1.0 - p) * (1.0 - 2.0 * p) / (count * count)


def null_third_cumulants(reference: LabelSummary, current: LabelSummary) -> dict[str, float]:
    """Per metric, the third cumulant of the window's metric in the direction of a breach
    (minus the metric for scores) under the training null; 0 where not modelled."""
    ref_metrics = quality_metrics(reference)
    if current.task == BINARY:
        c = _binary_counts(current)
        out = {metric: -_binomial_third_cumulant(ref_metrics[metric], c[support])
               for metric, support in ((ACCURACY, "n"), (PRECISION, "predicted"), (RECALL, "actual"))}
        _, third = _binned_log_loss_moments(reference)
        out[LOG_LOSS] = (third or 0.0) / (c["n"] * c["n"]) if c["n"] else 0.0
        return out
    if current.task == MULTICLASS:
        return {ACCURACY: -_binomial_third_cumulant(ref_metrics[ACCURACY], current.n)}
    return {}


def skew_corrected_margin(standard_error: float | None, third_cumulant: float, z: float) -> tuple[float | None, float]:
    r"""``(z-quantile of the difference, skewness)`` by Cornish-Fisher's first term.

    A mean of a few hundred skewed rows (log loss: mostly small losses, a few
    large ones) has a heavier tail on one side than the normal curve, so
    :math:`z \cdot SE` alone breaches more often than its nominal rate there. With
    :math:`\gamma = \kappa_3 / SE^3` the skewness in the direction of a breach,

    .. math::  \text{quantile} \approx SE \cdot \big(z + (z^2 - 1)\,\gamma / 6\big)

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
    return {metric: root_sum(window, training)
            for metric, (window, training) in null_variances(reference, current).items()}


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
    from scipy import optimize as _scipy_optimize  # here: scipy.optimize is half a second of a `detect` import

    fitted = _scipy_optimize.isotonic_regression(rate, weights=rows[filled]).x
    centres = np.arange(reference.bins, dtype=np.float64)
    return np.interp(centres, centres[filled], fitted)


def expected_binary_quality(calibration: np.ndarray, current: LabelSummary,
                            threshold: float | None = None) -> dict[str, tuple[float | None, float | None, float]]:
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
    The rows the model itself decided (``predicted_class``) count as it decided, whatever
    their bin (NannyML's CBPE from ``y_pred`` and ``y_pred_proba``): with :math:`d_b` the rows
    predicted positive in bin *b*, :math:`E[TP] = \sum_b d_b c_b` and
    :math:`E[FN] = \sum_b (m_b - d_b) c_b`, the sums over the cut above being the case
    :math:`d_b = m_b [b \ge cut]`; `threshold` (default 0.5) places the cut for the others.
    """
    rows = current.positives.astype(np.float64) + current.negatives.astype(np.float64)
    called_pos, called_neg = current.predicted_positive(_cut(current, threshold))
    return expected_quality_of_scores(calibration, rows, called_pos + called_neg)


def expected_quality_of_scores(calibration: np.ndarray, rows: np.ndarray, predicted: np.ndarray | None = None,
                               cut: int | None = None) -> dict[str, tuple[float | None, float | None, float]]:
    """`expected_binary_quality` from the rows per score bin alone (no labels needed: CBPE); `predicted`: the
    rows predicted positive per bin (default: every row in a bin at or above `cut`, the bin of 0.5 by default)."""
    rows = np.asarray(rows, dtype=np.float64)
    n = float(rows.sum())
    if predicted is None:
        cut = rows.size // 2 if cut is None else cut
        predicted = np.where(np.arange(rows.size) >= cut, rows, 0.0)
    called = np.clip(np.asarray(predicted, dtype=np.float64), 0.0, rows)  # predicted positive per bin
    rest = rows - called  # predicted negative per bin
    c = np.clip(np.asarray(calibration, dtype=np.float64), 0.0, 1.0)
    spread = c * (1.0 - c)
    skew = spread * (1.0 - 2.0 * c)  # third cumulant of one row's label
    tp, fn = float(called @ c), float(rest @ c)
    v_tp, v_fn = float(called @ spread), float(rest @ spread)
    # A row predicted negative is right when its label is 0: its correctness has the opposite skew.
    k_correct = float(called @ skew - rest @ skew)
    predicted_rows, below_rows = float(called.sum()), float(rest.sum())
    actual = tp + fn
    none = (None, None, 0.0)
    out: dict[str, tuple[float | None, float | None, float]] = {}
    out[ACCURACY] = ((tp + below_rows - fn) / n, math.sqrt(v_tp + v_fn) / n, -k_correct / n ** 3) if n else none
    out[PRECISION] = ((tp / predicted_rows, math.sqrt(v_tp) / predicted_rows,
                       -float(called @ skew) / predicted_rows ** 3) if predicted_rows else none)
    if actual > 0:
        recall = tp / actual
        out[RECALL] = (recall, math.sqrt((1 - recall) ** 2 * v_tp + recall ** 2 * v_fn) / actual, 0.0)
        total = predicted_rows + actual
        d_tp, d_fn = 2.0 * (total - tp) / total ** 2, -2.0 * tp / total ** 2
        out[F1] = (2.0 * tp / total, math.sqrt(d_tp ** 2 * v_tp + d_fn ** 2 * v_fn), 0.0)
    else:
        out[RECALL] = out[F1] = none
    expected_pos, expected_neg = rows * c, rows * (1.0 - c)
    if actual > 0 and n - actual > 0:
        below_neg = np.concatenate(([0.0], np.cumsum(expected_neg)[:-1]))
        auc = float((expected_pos * (below_neg + 0.5 * expected_neg)).sum() / (actual * (n - actual)))
        variance = hanley_mcneil_variance(auc, actual, n - actual)
        out[ROC_AUC] = (auc, None if variance is None else math.sqrt(variance), 0.0)
    else:
        out[ROC_AUC] = none
    _, loss_pos, loss_neg = bin_losses(rows.size)
    if n:
        gap = loss_pos - loss_neg
        log_loss = float(rows @ (c * loss_pos + (1.0 - c) * loss_neg)) / n
        out[LOG_LOSS] = (log_loss, math.sqrt(float((rows * spread) @ gap ** 2)) / n,
                         float((rows * skew) @ gap ** 3) / n ** 3)
    else:
        out[LOG_LOSS] = none
    return out
