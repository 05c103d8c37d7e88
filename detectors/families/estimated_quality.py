"""estimated_quality: a binary classifier's metrics estimated from one window's scores, judged against training;
and once labels came, whether the estimates still hold (``estimation_invalid``, `estimation_validity`)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from driftline.detectors.estimation.cbpe import (
    SUPPORT_OF,
    Estimate,
    Gap,
    calibrated_range,
    estimate_performance,
    estimation_gap,
    expected_class_counts,
    fine_bin_score_counts,
    predicted_rows,
)
from driftline.detectors.estimation.validity import WindowCheck, judge_validity, window_check
from driftline.detectors.stats.quality import quality_metrics, training_calibration
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.baseline import BINARY, CLASS, Baseline, LabelSummary
from driftline.baseline.labels import decision_cut
from driftline.vocabulary import (ESTIMATED_METRICS, ESTIMATED_QUALITY, ESTIMATION_INVALID, INSUFFICIENT_DATA,
                                  INSUFFICIENT_DATA_REASON)
from driftline.window_state import WindowState

__all__ = ["estimated_quality", "estimation_validity", "judge_estimates", "own_check"]


_SUPPORT_NAMES = {"predicted": "predicted positives", "positives": "expected positives",
                  "negatives": "expected negatives"}


def _support(metric: str, counts: Mapping[str, float]) -> tuple[float | None, str | None]:
    names = SUPPORT_OF[metric]
    if names is None:
        return None, None
    return min(counts[name] for name in names), " or ".join(_SUPPORT_NAMES[name] for name in names)


def _concept_drift(gap: Gap | None, labels: int, thresholds: WindowThresholds) -> bool | None:
    """The gap beyond ``estimated_quality_z`` standard errors, judged from ``quality_min_labels`` labels."""
    if gap is None or gap.gap is None or not gap.standard_error or labels < thresholds.quality_min_labels:
        return None
    return bool(abs(gap.gap) > thresholds.estimated_quality_z * gap.standard_error)


def judge_estimates(reference: LabelSummary, calibration: np.ndarray, rows: np.ndarray,
                    thresholds: WindowThresholds, labelled: LabelSummary | None = None,
                    training: Mapping[str, float | None] | None = None,
                    predicted: np.ndarray | None = None) -> list[WindowResult]:
    """One result per estimated metric for `rows` (window rows per score bin), with its verdict.

    Breached when the band's upper end lies below ``training - estimated_quality_max_drop``
    (the result's threshold). Untrusted (``insufficient_data`` with a reason, never
    breached): fewer than ``estimated_quality_min_rows`` scored rows, more than
    ``estimated_quality_max_outside_share`` of them outside the score range the training
    labels covered, or (all but accuracy) fewer than ``quality_min_class_count`` expected
    rows of the class the metric rests on. `labelled` (the window's joined labels, binary)
    adds ``realized``, ``gap`` and ``concept_drift`` (the gap beyond ``estimated_quality_z``
    standard errors, judged once ``quality_min_labels`` labels are in). `training`: the values
    the estimates are judged against, when not `reference`'s own metrics (a segment's). `predicted`:
    the rows predicted positive per bin (the model's own decisions, `predicted_rows`); default: the
    rows at or above ``estimated_quality_threshold``.
    """
    z = thresholds.estimated_quality_z
    decides_at = thresholds.estimated_quality_threshold
    if predicted is None:
        rows, predicted = predicted_rows(rows, decision_cut(decides_at, rows.size))
    estimates = estimate_performance(reference, calibration, rows, z, predicted, decides_at)
    training = quality_metrics(reference, decides_at) if training is None else training
    n = float(rows.sum())
    counts = expected_class_counts(calibration, rows, predicted)
    span = calibrated_range(reference)
    bins = rows.size
    outside = 0.0 if span is None or not n else float(rows[:span[0]].sum() + rows[span[1] + 1:].sum()) / n
    gaps: dict[str, Gap] = {}
    if labelled is not None and labelled.task == BINARY and labelled.n:
        gaps = estimation_gap(reference, calibration, labelled, decides_at)
    results = []
    for metric in ESTIMATED_METRICS:
        estimate: Estimate = estimates[metric]
        reference_value = training.get(metric)
        details: dict[str, Any] = dict(rows=int(n), training=reference_value, standard_error=estimate.standard_error,
                                       lower=estimate.lower, upper=estimate.upper, z=z,
                                       max_drop=thresholds.estimated_quality_max_drop,
                                       outside_calibrated_share=outside, threshold=decides_at)
        if span is not None:
            details.update(calibrated_range=[span[0] / bins, (span[1] + 1) / bins])
        support, support_of = _support(metric, counts)
        if support is not None:
            details.update(support=support, support_of=support_of)
        threshold = None if reference_value is None else reference_value - thresholds.estimated_quality_max_drop
        breached = threshold is not None and estimate.upper is not None and estimate.upper < threshold
        if n < thresholds.estimated_quality_min_rows:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {int(n)} scored rows < {thresholds.estimated_quality_min_rows}")
        elif outside > thresholds.estimated_quality_max_outside_share:
            insufficient(details, f"untrusted: {outside:.1%} of scores outside the calibrated range "
                                  f"[{details['calibrated_range'][0]:.3f}, {details['calibrated_range'][1]:.3f}] "
                                  f"> {thresholds.estimated_quality_max_outside_share:.1%}")
        elif support is not None and support < thresholds.quality_min_class_count:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {support:.0f} {support_of} < {thresholds.quality_min_class_count}")
        elif estimate.value is None:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: no estimate (one class expected only)")
        if details.get(INSUFFICIENT_DATA):
            breached = False
        gap = gaps.get(metric)
        if gap is not None:
            details.update(labels=int(labelled.n), realized=gap.realized, expected_on_labels=gap.expected,
                           gap=gap.gap, gap_standard_error=gap.standard_error)
            drift = _concept_drift(gap, int(labelled.n), thresholds)
            if drift is not None:
                details.update(concept_drift=drift)
        results.append(WindowResult(ESTIMATED_QUALITY, None, metric, estimate.value, threshold, bool(breached), details))
    return results


def _estimated(baseline: Baseline, state: WindowState) -> tuple[LabelSummary, np.ndarray] | None:
    """The training labels and calibration a window is estimated with; None when it is not estimated."""
    reference = baseline.quality
    if reference is None or reference.task != BINARY or baseline.prediction_source in (None, CLASS):
        return None
    window = state.prediction
    if window is None or window.counts is None or window.sums is None:
        return None
    calibration = training_calibration(reference)
    return None if calibration is None else (reference, calibration)


def estimated_quality(baseline: Baseline, state: WindowState, thresholds: WindowThresholds) -> list[WindowResult]:
    """CBPE for one window (`driftline.detectors.estimation.cbpe`): results as `judge_estimates`.

    Needs a binary baseline with training labels (its calibration) and the window's
    prediction counted on the baseline's bins; nothing otherwise (multiclass and
    regression are not estimated). The events' own decisions (``predicted_class``, counted
    per score bin in ``state.decisions``) are estimated as decided (`predicted_rows`).
    """
    found = _estimated(baseline, state)
    if found is None:
        return []
    reference, calibration = found
    window = state.prediction
    assert window is not None and window.counts is not None and window.sums is not None
    rows = fine_bin_score_counts(window.counts, window.sums, reference.bins)
    cut = decision_cut(thresholds.estimated_quality_threshold, reference.bins)
    decided = state.decisions if state.decisions is not None and state.decisions.bins == reference.bins else None
    rows, predicted = predicted_rows(rows, cut, None if decided is None else decided.rows,
                                     None if decided is None else decided.called)
    labelled = state.labels if state.labels.task == BINARY and state.labels.n else None
    results = judge_estimates(reference, calibration, rows, thresholds, labelled, predicted=predicted)
    if decided is not None and rows.sum():
        for result in results:
            result.details.update(decided_share=float(decided.rows.sum() / rows.sum()))
    return results


def own_check(baseline: Baseline | None, state: WindowState, thresholds: WindowThresholds) -> WindowCheck | None:
    """The window's estimates checked against its own labels (never a pool of earlier windows' labels, so the
    checks of two windows are independent); None without enough labels (``quality_min_labels``) or estimate."""
    found = None if baseline is None else _estimated(baseline, state)
    labels = state.labels
    if found is None or labels.task != BINARY or labels.n < thresholds.quality_min_labels:
        return None
    reference, calibration = found
    gaps = estimation_gap(reference, calibration, labels, thresholds.estimated_quality_threshold)
    return window_check({metric: _concept_drift(gap, int(labels.n), thresholds) for metric, gap in gaps.items()})


def estimation_validity(check: WindowCheck | None, history: Sequence[WindowCheck], thresholds: WindowThresholds,
                        labels: int = 0) -> WindowResult:
    """The ``estimation_invalid`` result: the binomial test over `history` (the earlier labelled windows' checks,
    oldest first) and this window's `check` (`driftline.detectors.estimation.validity`).

    Value: the test's p-value; threshold: ``estimation_invalid_alpha``; breached when the value is below it.
    Its feature is ``estimation_invalid`` too, so it alerts apart from the estimates' drop. Insufficient data
    (never breached) while no labelled window has been checked. Details: ``missed`` (this window's metrics
    outside their band; None when not checked), ``labelled_windows``, ``missed_windows``, ``p_value``,
    ``miss_probability``, ``alpha``, ``z``, ``windows``, ``labels`` (this window's own).
    """
    checks = [*history, check] if check is not None else list(history)
    verdict = judge_validity(checks, z=thresholds.estimated_quality_z, alpha=thresholds.estimation_invalid_alpha,
                             windows=thresholds.estimation_invalid_windows)
    details: dict[str, Any] = dict(labels=int(labels), missed=None if check is None else list(check.missed),
                                   labelled_windows=verdict.windows, missed_windows=verdict.misses,
                                   p_value=verdict.p_value, miss_probability=verdict.miss_probability,
                                   alpha=verdict.alpha, z=thresholds.estimated_quality_z,
                                   windows=thresholds.estimation_invalid_windows)
    if not verdict.windows:
        insufficient(details, f"{INSUFFICIENT_DATA_REASON}: no window with {thresholds.quality_min_labels} labels "
                              "of its own checked yet")
    return WindowResult(ESTIMATED_QUALITY, ESTIMATION_INVALID, ESTIMATION_INVALID, verdict.p_value,
                        verdict.alpha, verdict.invalid, details)
