r"""Direct loss estimation (DLE): a regression model's MAE and RMSE from its inputs and predictions alone.

The method of NannyML's DLE (NannyML documentation, "Direct Loss Estimation"): on the
reference, where the target *y* is known, a gradient-boosted regressor (scikit-learn's
``HistGradientBoostingRegressor``, Poisson loss: a mean estimate that stays positive)
learns each row's loss from the model's features and its prediction :math:`\hat y`:
:math:`f_a(x) \approx E[|y - \hat y| \mid x]` and :math:`f_s(x) \approx E[(y - \hat y)^2 \mid x]`.
A window's estimates are the means of those predicted losses over its rows,

.. math::
    \widehat{MAE} = \frac1n \sum_i f_a(x_i), \qquad \widehat{RMSE} = \sqrt{\frac1n \sum_i f_s(x_i)}.

Assumptions: the relation between the features and the loss is the reference's (no
concept drift), and the estimator learnt it. Trees extrapolate flat: a window whose
predictions leave the range the reference's cover (`outside_share`) is estimated with the
loss at the range's edge, and its band does not hold (the caller marks it untrusted).

Cross-fitting: the (capped) reference is cut into K folds; fold *k*'s estimators are fitted
on the others, so each reference row has a held-out prediction. A window is scored by the
mean of the K fitted estimators. From the held-out residuals :math:`r_i = \ell_i - f(x_i)`:

* per-row spread: :math:`Var(\ell_i \mid x_i) \approx c\, f(x_i)^2` with
  :math:`c = \sum r_i^2 / \sum f(x_i)^2` (the loss's scale follows its predicted mean);
* the estimator's own error: the reference rows in ten equal bins of the model's prediction
  :math:`\hat y` (a covariate shift moves it), each bin's relative bias
  :math:`\rho_b = \sum_b r_i / \sum_b f(x_i)`; :math:`s^2` = the mean of :math:`\rho_b^2` less
  its sampling part :math:`\sum_b r_i^2 / (\sum_b f(x_i))^2` (at least 0): a relative error that
  does not average out within a window. (Bins of the predicted loss itself would select rows
  where the held-out estimator happens to be high or low and overstate it.)

Standard error of the realized metric around the estimate
:math:`SE^2 = c \sum_i f(x_i)^2 / n^2 + s^2 \hat m^2` (:math:`\hat m` the estimated mean loss);
RMSE's by the delta method, :math:`SE_{MSE} / (2\,\widehat{RMSE})`. Band: value ± z·SE.

>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(0)
>>> def draw(n, shift):  # the noise grows with x; the model predicts the mean
...     x = rng.normal(shift, 1.0, n)
...     return pd.DataFrame({"x": x, "pred": x, "y": x + (0.5 + (x > 1)) * rng.normal(size=n)})
>>> ref = draw(4000, 0.0)
>>> fit = fit_loss_estimator(ref, {"x": "numeric"}, ref["y"].to_numpy(), ref["pred"].to_numpy(), "pred")
>>> window = draw(2000, 1.5)
>>> estimate = estimate_regression(fit, window, z=3.0)[MAE]
>>> realized = realized_regression(window["y"].to_numpy(), window["pred"].to_numpy())[MAE]
>>> bool(estimate.lower <= realized <= estimate.upper and estimate.value > 1.5 * fit.training[MAE])
True

Nothing here does I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.detectors.estimation.cbpe import Estimate
from driftline.vocabulary import CATEGORICAL, MAE, RMSE

__all__ = ["REGRESSION_METRICS", "LossEstimator", "estimate_losses", "estimate_regression", "fit_loss_estimator",
           "outside_share", "realized_regression", "row_losses"]

REGRESSION_METRICS = (MAE, RMSE)
_BIAS_BINS = 10
# HistGradientBoosting's categorical support takes at most this many categories (its max_bins less one)
_MAX_CATEGORIES = 254


@dataclass(frozen=True)
class _LossModel:
    """One loss's K fold estimators and what their held-out predictions measured."""

    models: list[Any]
    scale: float  # the loss's reference mean: targets are fitted divided by it
    spread: float  # c: Var(loss | x) ~ c f(x)^2
    model_error: float  # s^2: the estimator's relative error, squared

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.scale * np.mean([m.predict(x) for m in self.models], axis=0)


class _NoLoss:
    """The estimator of a loss that was zero on every row it would be fitted on (a Poisson fit refuses those)."""

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.zeros(len(x))


@dataclass(frozen=True)
class LossEstimator:
    """Estimators of each row's absolute and squared error, fitted on a regression model's reference."""

    columns: list[str]  # features, then the prediction
    categories: dict[str, list[Any]]  # categorical columns: the codes' categories
    absolute: _LossModel
    squared: _LossModel
    training: dict[str, float | None]  # realized MAE and RMSE on the reference's labelled rows
    rows: int  # reference rows the estimators were fitted on
    unit: float  # losses are fitted on errors divided by this power of two (`_unit`), so squares stay finite
    prediction_range: tuple[float, float]  # the reference's predictions, central LOSS_ESTIMATOR_RANGE share

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        return _encode(frame, self.columns, self.categories)


def _encode(frame: pd.DataFrame, columns: list[str], categories: Mapping[str, list[Any]]) -> np.ndarray:
    """The columns as numbers: categories as their reference codes (unseen or null: NaN)."""
    out = np.empty((len(frame), len(columns)), dtype=np.float64)
    for j, column in enumerate(columns):
        if column in categories:
            codes = {c: float(i) for i, c in enumerate(categories[column])}
            out[:, j] = [codes.get(v, np.nan) for v in frame[column].astype(object).tolist()]
        else:
            out[:, j] = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    out[~np.isfinite(out)] = np.nan
    return out


def _categories(series: pd.Series) -> list[Any]:
    counts = series.dropna().astype(object).value_counts()
    return counts.index[:_MAX_CATEGORIES].tolist()  # the rarest beyond that are read as missing


def _model(categorical: np.ndarray, seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(loss="poisson", max_iter=defaults.LOSS_ESTIMATOR_TREES,
                                         max_leaf_nodes=defaults.LOSS_ESTIMATOR_LEAVES,
                                         learning_rate=defaults.LOSS_ESTIMATOR_LEARNING_RATE,
                                         categorical_features=categorical if categorical.any() else None,
                                         early_stopping=False, random_state=seed)


def _fit_loss(x: np.ndarray, loss: np.ndarray, folds: np.ndarray, categorical: np.ndarray, seed: int) -> _LossModel:
    # scikit-learn takes about a second to import: only a regression --label pays it. Imported before
    # threadpool_limits, or the OpenMP runtime it loads escapes the limit.
    import sklearn.ensemble  # noqa: F401
    from threadpoolctl import threadpool_limits

    scale = float(loss.mean()) or 1.0
    held_out = np.empty_like(loss)
    models = []
    # One thread: OpenMP workers spinning on a busy machine cost more than the fit itself.
    with threadpool_limits(limits=1, user_api="openmp"):
        for k in range(int(folds.max()) + 1):
            target = loss[folds != k] / scale
            model = _model(categorical, seed).fit(x[folds != k], target) if target.any() else _NoLoss()
            held_out[folds == k] = scale * model.predict(x[folds == k])
            models.append(model)
    residual = loss - held_out
    spread = float((residual ** 2).sum() / max(float((held_out ** 2).sum()), 1e-300))
    order = np.argsort(x[:, -1], kind="stable")
    excess = []
    for part in np.array_split(order, _BIAS_BINS):
        predicted = float(held_out[part].sum())
        if predicted ** 2 > 0:  # a bin of (nearly) no predicted loss says nothing of the relative bias
            excess.append((residual[part].sum() / predicted) ** 2 - (residual[part] ** 2).sum() / predicted ** 2)
    return _LossModel(models, scale, spread, max(0.0, float(np.mean(excess))) if excess else 0.0)


def fit_loss_estimator(frame: pd.DataFrame, kinds: Mapping[str, str], truth: np.ndarray, predicted: np.ndarray,
                       prediction: str, max_rows: int = defaults.LOSS_ESTIMATOR_MAX_ROWS,
                       folds: int = defaults.LOSS_ESTIMATOR_FOLDS, seed: int = 0) -> LossEstimator:
    """Cross-fitted estimators of |y - ŷ| and (y - ŷ)² from `frame`'s `kinds` columns and the `prediction` column.

    `truth` and `predicted`: the reference's targets and predictions (rows where either is not
    finite are left out). Fitted on at most `max_rows` rows (a seeded uniform sample).
    Deterministic for a given `seed`. Needs at least `folds` rows (callers ask for more).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        labelled = np.flatnonzero(np.isfinite(truth - predicted))  # both finite, and their difference too
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(labelled, size=max_rows, replace=False)) if labelled.size > max_rows else labelled
    if keep.size < folds:
        raise ValueError(f"fit_loss_estimator needs at least {folds} labelled rows")
    columns = [c for c in kinds if c != prediction] + [prediction]
    rows = frame.iloc[keep]
    categories = {c: _categories(rows[c]) for c in columns if kinds.get(c) == CATEGORICAL}
    error = truth[keep] - predicted[keep]
    unit = _unit(error)
    error = error / unit
    x = _encode(rows, columns, categories)
    categorical = np.array([c in categories for c in columns])
    assignment = rng.permutation(np.arange(keep.size) % folds)
    absolute = _fit_loss(x, np.abs(error), assignment, categorical, seed)
    squared = _fit_loss(x, error ** 2, assignment, categorical, seed)
    training = realized_regression(truth, predicted)
    tail = (1.0 - defaults.LOSS_ESTIMATOR_RANGE) / 2.0
    span = (float(np.quantile(predicted[labelled], tail)), float(np.quantile(predicted[labelled], 1.0 - tail)))
    return LossEstimator(columns, categories, absolute, squared, training, int(keep.size), unit, span)


def outside_share(estimator: LossEstimator, predicted: np.ndarray) -> float:
    """The share of the finite `predicted` values outside the estimator's `prediction_range` (0 without any)."""
    predicted = np.asarray(predicted, dtype=np.float64)
    predicted = predicted[np.isfinite(predicted)]
    if not predicted.size:
        return 0.0
    low, high = estimator.prediction_range
    return float(((predicted < low) | (predicted > high)).mean())


def _mean_loss(model: _LossModel, losses: np.ndarray) -> tuple[float, float]:
    """The window's mean predicted loss and its standard error (module docstring)."""
    n = losses.size
    mean = float(losses.mean())
    return mean, math.sqrt(model.spread * float((losses ** 2).sum()) / n ** 2 + model.model_error * mean ** 2)


def row_losses(estimator: LossEstimator, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's predicted absolute and squared error, in `estimator.unit`s (NaN where the prediction is not
    finite): what `estimate_losses` averages, over any subset of the rows."""
    from threadpoolctl import threadpool_limits

    x = estimator.encode(frame)
    scored = np.isfinite(x[:, -1])
    absolute, squared = np.full(len(x), np.nan), np.full(len(x), np.nan)
    if scored.any():
        with threadpool_limits(limits=1, user_api="openmp"):
            absolute[scored] = np.maximum(estimator.absolute.predict(x[scored]), 0.0)
            squared[scored] = np.maximum(estimator.squared.predict(x[scored]), 0.0)
    return absolute, squared


def estimate_regression(estimator: LossEstimator, frame: pd.DataFrame, z: float) -> dict[str, Estimate]:
    """MAE and RMSE expected for `frame`'s rows (those with a finite prediction), with their bands at `z`."""
    return estimate_losses(estimator, *row_losses(estimator, frame), z)


def estimate_losses(estimator: LossEstimator, absolute: np.ndarray, squared: np.ndarray,
                    z: float) -> dict[str, Estimate]:
    """MAE and RMSE with their bands at `z` from `row_losses` (rows without a prediction, NaN, left out)."""
    absolute, squared = absolute[np.isfinite(absolute)], squared[np.isfinite(squared)]
    if not absolute.size:
        return {metric: Estimate(None, None, None, None) for metric in REGRESSION_METRICS}
    # in units of `estimator.unit` (squares of which stay finite); scaled back at the end
    mae, mae_se = _mean_loss(estimator.absolute, absolute)
    mse, mse_se = _mean_loss(estimator.squared, squared)
    rmse = math.sqrt(mse)
    rmse_se = mse_se / (2.0 * rmse) if rmse > 0 else 0.0
    unit = estimator.unit
    mae, mae_se, rmse, rmse_se = mae * unit, mae_se * unit, rmse * unit, rmse_se * unit

    def band(value: float, se: float) -> Estimate:
        return Estimate(value, se, max(0.0, value - z * se), value + z * se)

    return {MAE: band(mae, mae_se), RMSE: band(rmse, rmse_se)}


def _unit(error: np.ndarray) -> float:
    """A power of two at least the largest |error| (1 for none): errors divided by it are exact and their squares
    finite, however large the target's values."""
    largest = float(np.abs(error).max()) if error.size else 0.0
    return math.ldexp(1.0, math.frexp(largest)[1]) if largest > 0 else 1.0


def realized_regression(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float | None]:
    """MAE and RMSE of the rows where both are finite (None without any)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a difference beyond the float range: left out as not finite
        error = np.asarray(truth, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
    error = error[np.isfinite(error)]
    if not error.size:
        return {MAE: None, RMSE: None}
    unit = _unit(error)
    return {MAE: float(np.abs(error / unit).mean()) * unit, RMSE: float(np.sqrt(((error / unit) ** 2).mean())) * unit}
