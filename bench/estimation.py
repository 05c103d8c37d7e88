"""Benchmark: how close estimated performance (CBPE) comes to realized, per window size, and its band's coverage.

Run by hand:  .venv/bin/python bench/estimation.py [--seed 0] [--windows 200]

A calibrated synthetic binary model (scores with a normal logit, labels drawn with
P(label = 1 | score) = score), a reference of 20 000 labelled rows giving the
calibration, then windows under covariate shift without concept drift: each
window's logit mean is shifted by U(-1, 1) and its spread scaled by U(0.6, 1.4), so
the score mix (and the true metrics) move from window to window while the relation
holds. Per window size: mean and 95th percentile of |estimated - realized| for ROC AUC
and accuracy, the mean band half-width (z = `ESTIMATED_QUALITY_Z`), and the share of
windows whose realized value lies inside the band (coverage) for every metric, at
z = 3 and at z = 1.96. A second table: how often the realized-vs-estimated gap is flagged
(|gap| > z standard errors, `estimation_gap`) for ROC AUC and accuracy, on windows that
follow the calibration (false flags) and on windows under concept drift (the score's
logit explains less: slope 0.3 plus a hidden factor). A third table: multiclass accuracy and
macro F1 (`driftline.detectors.estimation.cbpe_multiclass`) on a calibrated three-class softmax
model, the same error and coverage figures. A fourth table: regression MAE and RMSE (direct
loss estimation, `driftline.detectors.estimation.dle`) on y = 2·x1 + sin(x2) + noise
whose spread grows with x1 (and in one category of g), the model predicting 2·x1 + 0.9·sin(x2);
the estimators fitted on a 20 000-row reference, windows shifted along x1 by U(-1, 1) (the
true errors move with the shift, the relation does not), then by U(2, 3) (extrapolation: few
reference rows there); coverage over all windows, and the share that `detect` marks untrusted
(predictions outside the reference's range, `outside_share`). Prints tables; asserts nothing.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from driftline import defaults
from driftline.baseline import BINARY, LabelSummary
from driftline.detectors.estimation.cbpe import estimate_performance, estimation_gap, score_counts
from driftline.detectors.estimation.cbpe_multiclass import (
    calibrated_probabilities,
    class_calibrations,
    estimate_multiclass,
    realized_multiclass,
    reference_variances,
)
from driftline.detectors.estimation.dle import (
    LossEstimator,
    estimate_regression,
    fit_loss_estimator,
    outside_share,
    realized_regression,
)
from driftline.detectors.stats.quality import quality_metrics, training_calibration
from driftline.vocabulary import ACCURACY, ESTIMATED_METRICS, MACRO_F1, MAE, RMSE, ROC_AUC

LOGIT_MEAN, LOGIT_SD = -0.5, 1.5
SIZES = (100, 500, 2000, 10_000)


def draw(rng: np.random.Generator, n: int, shift: float = 0.0, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    scores = expit(rng.normal(LOGIT_MEAN + shift, LOGIT_SD * scale, n))
    return scores, (rng.random(n) < scores).astype(int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--windows", type=int, default=200, help="windows per size")
    parser.add_argument("--reference-rows", type=int, default=20_000)
    parser.add_argument("--regression-only", action="store_true", help="only the regression table")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.regression_only:
        regression_table(rng, args.reference_rows, args.windows, defaults.ESTIMATED_QUALITY_Z)
        return
    reference = LabelSummary(task=BINARY).add(*draw(rng, args.reference_rows))
    calibration = training_calibration(reference)
    z = defaults.ESTIMATED_QUALITY_Z
    print(f"reference {args.reference_rows} rows, training ROC AUC {quality_metrics(reference)[ROC_AUC]:.3f}, "
          f"accuracy {quality_metrics(reference)[ACCURACY]:.3f}; {args.windows} windows per size; band z = {z}")
    header = ("rows", "AUC |err| mean", "AUC |err| p95", "AUC band ±", "acc |err| mean", "acc |err| p95", "acc band ±",
              *(f"cover {m} z={z:g} / 1.96" for m in ESTIMATED_METRICS))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size in SIZES:
        errors = {m: [] for m in ESTIMATED_METRICS}
        ses = {m: [] for m in ESTIMATED_METRICS}
        for _ in range(args.windows):
            scores, labels = draw(rng, size, rng.uniform(-1.0, 1.0), rng.uniform(0.6, 1.4))
            realized = quality_metrics(LabelSummary(task=BINARY).add(scores, labels))
            estimates = estimate_performance(reference, calibration, score_counts(scores, reference.bins), z)
            for metric, estimate in estimates.items():
                if estimate.value is None or estimate.standard_error is None or realized.get(metric) is None:
                    continue
                errors[metric].append(realized[metric] - estimate.value)
                ses[metric].append(estimate.standard_error)
        cells = [str(size)]
        for metric in (ROC_AUC, ACCURACY):
            err = np.abs(errors[metric])
            cells += [f"{err.mean():.4f}", f"{np.quantile(err, 0.95):.4f}", f"{z * np.mean(ses[metric]):.4f}"]
        for metric in ESTIMATED_METRICS:
            err, se = np.abs(errors[metric]), np.asarray(ses[metric])
            cells.append(f"{np.mean(err <= z * se):.1%} / {np.mean(err <= 1.96 * se):.1%} (n={err.size})")
        print("| " + " | ".join(cells) + " |")
    gap_table(rng, reference, calibration, args.windows, z)
    multiclass_table(rng, args.reference_rows, args.windows, z)
    regression_table(rng, args.reference_rows, args.windows, z)


def draw_multiclass(rng: np.random.Generator, n: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Softmax probabilities of three classes from two normal inputs, labels drawn from them (calibrated)."""
    x = rng.normal(shift, 1.0, (n, 2))
    logits = np.column_stack([1.5 * x[:, 0], 1.5 * x[:, 1], np.full(n, -0.3)])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p, (rng.random(n)[:, None] > p.cumsum(axis=1)).sum(axis=1).clip(0, 2)


def multiclass_table(rng: np.random.Generator, reference_rows: int, windows: int, z: float) -> None:
    probabilities, labels = draw_multiclass(rng, reference_rows)
    calibrations = class_calibrations(probabilities, labels, LabelSummary().bins)
    variances = reference_variances(calibrations, probabilities)
    print()
    print("| rows | multiclass accuracy |err| mean / p95 | coverage z=3 / 1.96 | macro F1 |err| mean / p95 | "
          "coverage z=3 / 1.96 |")
    print("|---|---|---|---|---|")
    for size in SIZES:
        errors: dict[str, list[float]] = {ACCURACY: [], MACRO_F1: []}
        ses: dict[str, list[float]] = {ACCURACY: [], MACRO_F1: []}
        for _ in range(windows):
            p, y = draw_multiclass(rng, size, rng.uniform(-1.0, 1.0))
            predicted = p.argmax(axis=1)
            estimates = estimate_multiclass(calibrated_probabilities(calibrations, p), predicted, z, variances)
            realized = realized_multiclass(y, predicted, 3)
            for metric in errors:
                errors[metric].append(abs(realized[metric] - estimates[metric].value))
                ses[metric].append(estimates[metric].standard_error)
        cells = [str(size)]
        for metric in (ACCURACY, MACRO_F1):
            err, se = np.asarray(errors[metric]), np.asarray(ses[metric])
            cells += [f"{err.mean():.4f} / {np.quantile(err, 0.95):.4f}",
                      f"{np.mean(err <= z * se):.1%} / {np.mean(err <= 1.96 * se):.1%}"]
        print("| " + " | ".join(cells) + " |")


REGRESSION_KINDS = {"x1": "numeric", "x2": "numeric", "g": "categorical", "pred": "numeric"}


def draw_regression(rng: np.random.Generator, n: int, shift: float = 0.0) -> pd.DataFrame:
    """Features, the model's prediction and the target; the noise's spread grows with x1 (see the docstring)."""
    x1, x2 = rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)
    g = rng.choice(np.array(["a", "b", "c"]), n)
    sd = 0.3 + 2.0 * expit(2.0 * x1) + 0.5 * (g == "c")
    return pd.DataFrame({"x1": x1, "x2": x2, "g": g, "pred": 2.0 * x1 + 0.9 * np.sin(x2),
                         "y": 2.0 * x1 + np.sin(x2) + sd * rng.normal(0.0, 1.0, n)})


def regression_table(rng: np.random.Generator, reference_rows: int, windows: int, z: float) -> None:
    reference = draw_regression(rng, reference_rows)
    started = time.process_time()
    estimator = fit_loss_estimator(reference, REGRESSION_KINDS, reference["y"].to_numpy(),
                                   reference["pred"].to_numpy(), "pred")
    fitted = time.process_time() - started
    print()
    print(f"regression: reference {reference_rows} rows (fitted on {estimator.rows}, {fitted:.1f} s CPU), "
          f"training MAE {estimator.training[MAE]:.3f}, RMSE {estimator.training[RMSE]:.3f}; {windows} windows per "
          f"size, shift U(-1, 1)")
    shift_rows(rng, estimator, windows, z, (-1.0, 1.0))
    print(f"\nthe same, extrapolating: shift U(2, 3), past the reference's bulk ({windows // 2} windows per size)")
    shift_rows(rng, estimator, windows // 2, z, (2.0, 3.0))


def shift_rows(rng: np.random.Generator, estimator: LossEstimator, windows: int, z: float,
               shifts: tuple[float, float]) -> None:
    print("| rows | MAE |err| mean / p95 | MAE band ± | MAE coverage z=3 / 1.96 | RMSE |err| mean / p95 | RMSE band ± "
          "| RMSE coverage z=3 / 1.96 | untrusted (outside range) | CPU s per window |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in SIZES:
        errors: dict[str, list[float]] = {MAE: [], RMSE: []}
        ses: dict[str, list[float]] = {MAE: [], RMSE: []}
        untrusted = []
        started = time.process_time()
        for _ in range(windows):
            window = draw_regression(rng, size, rng.uniform(*shifts))
            estimates = estimate_regression(estimator, window, z)
            untrusted.append(outside_share(estimator, window["pred"].to_numpy())
                             > defaults.ESTIMATED_QUALITY_MAX_OUTSIDE_SHARE)
            realized = realized_regression(window["y"].to_numpy(), window["pred"].to_numpy())
            for metric in errors:
                errors[metric].append(abs(realized[metric] - estimates[metric].value))
                ses[metric].append(estimates[metric].standard_error)
        cells = [str(size)]
        for metric in (MAE, RMSE):
            err, se = np.asarray(errors[metric]), np.asarray(ses[metric])
            cells += [f"{err.mean():.4f} / {np.quantile(err, 0.95):.4f}", f"{z * se.mean():.4f}",
                      f"{np.mean(err <= z * se):.1%} / {np.mean(err <= 1.96 * se):.1%}"]
        cells += [f"{np.mean(untrusted):.1%}", f"{(time.process_time() - started) / windows:.3f}"]
        print("| " + " | ".join(cells) + " |")


def drifted(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    return (rng.random(scores.size) < expit(0.3 * logit(scores) + rng.normal(0.0, 1.0, scores.size))).astype(int)


def gap_table(rng: np.random.Generator, reference: LabelSummary, calibration: np.ndarray, windows: int,
              z: float) -> None:
    print()
    print("| rows | gap flagged, calibrated: roc_auc / accuracy | gap flagged, concept drift: roc_auc / accuracy |")
    print("|---|---|---|")
    for size in SIZES:
        flags: dict[str, list[bool]] = {"calm": [], "calm_acc": [], "drift": [], "drift_acc": []}
        for _ in range(windows):
            scores, labels = draw(rng, size, rng.uniform(-1.0, 1.0), rng.uniform(0.6, 1.4))
            for name, y in (("calm", labels), ("drift", drifted(rng, scores))):
                gaps = estimation_gap(reference, calibration, LabelSummary(task=BINARY).add(scores, y))
                for metric, key in ((ROC_AUC, name), (ACCURACY, f"{name}_acc")):
                    gap = gaps[metric]
                    if gap.gap is not None and gap.standard_error:
                        flags[key].append(abs(gap.gap) > z * gap.standard_error)
        share = {k: f"{np.mean(v):.1%}" for k, v in flags.items()}
        print(f"| {size} | {share['calm']} / {share['calm_acc']} | {share['drift']} / {share['drift_acc']} |")


if __name__ == "__main__":
    main()
