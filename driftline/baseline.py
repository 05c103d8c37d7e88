"""The training baseline of a model version: everything the detectors need, computed once.

`compute_baseline(features, categorical=..., predictions=..., labels=...)` reads a
model version's training data once; from then on detectors compare windows with
this summary and never re-read the raw training set. The store keeps it as JSON
(`Baseline.to_dict()` / `Baseline.from_dict()`).

Per numeric feature (`NumericProfile`):

* **fine bins** at the training quantiles 1/B, 2/B, ..., (B-1)/B
  (B = `defaults.BASELINE_FINE_BINS` = 1000), with the two outermost 1/B of
  probability each split into `defaults.BASELINE_TAIL_BINS` (50) finer quantile
  bins (heavy tails are wide, and out-of-range window values land there);
  the training min and max are edges too; repeated edges are merged so the edges
  are strictly increasing. Every bin is ``[e_i, e_{i+1})`` (numpy
  ``searchsorted(edges, x, side="right")``) and the two outer bins are open,
  ``(-inf, min)`` and ``[max, +inf)``, so any window value lands in a bin and a
  value out of the training range stays visible there. Open outer bins lose
  nothing thanks to the per-bin **sums**: the Wasserstein integral over a bin is
  exact from its count and sum (see detectors/binned.py).
* **counts and sums** of the training values per fine bin;
* the **decile edges** (`detectors.stats.decile_edges`, the same arithmetic), a
  subset of the fine edges, so decile PSI re-aggregates fine bins exactly;
* min, max, mean, standard deviation (``ddof=0``, as the normalised Wasserstein
  uses it), null count and rate.

Per categorical feature (`CategoricalProfile`): counts per category key
(`category_key`: strings as they are, integral numbers without ".0", booleans as
"true"/"false"), null count, and the JSON types the values had.

The prediction (`Baseline.prediction`) is profiled like a feature: a numeric
score (regression output or probability) as a numeric profile, class labels as
a categorical one. A list of class probabilities becomes one number: the positive
class's probability ``p[1]`` when there are two classes, else the winning class's
probability ``max(p)`` (the model's confidence); `prediction_values` does this for
the baseline and the window alike.

With labels, `Baseline.quality` is the `LabelSummary` of the training predictions
against their labels, from which detectors compute the training metrics that
production quality is compared with.

A bounded uniform sample of training rows (features, prediction, label) is kept
for drill-down, reports and skew checks.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.errors import UserError

NUMERIC = "numeric"
CATEGORICAL = "categorical"
BASELINE_FORMAT = 1

# Task of a label summary.
BINARY = "binary"
REGRESSION = "regression"
MULTICLASS = "multiclass"

# How a prediction became a number or a class (Baseline.prediction_source).
SCORE = "score"
PROBABILITY = "probability"
CLASS = "class"


# --- small shared helpers -------------------------------------------------------

def json_type(value: Any) -> str:
    """The JSON type name of a non-null feature value: number, string, boolean, array or object."""
    kind = type(value)
    if kind is float or kind is int:
        return "number"
    if kind is str:
        return "string"
    if kind is bool or isinstance(value, np.bool_):
        return "boolean"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def category_key(value: Any) -> str:
    """The string a categorical value is counted under (also the JSON key of its count).

    Strings stay as they are; booleans become "true"/"false"; integral numbers lose
    their ".0" (so 1, 1.0 and numpy's int64(1) are one category "1"); other
    numbers use Python's shortest repr.
    """
    if isinstance(value, str):
        # Truncated (defaults.CATEGORY_MAX_CHARS) so one huge string cannot make a huge key in every window.
        return value if len(value) <= defaults.CATEGORY_MAX_CHARS else value[:defaults.CATEGORY_MAX_CHARS]
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


def _finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def stored_sum(value: Any) -> float:
    """A stored sum; an older version wrote an overflowed one as null: unknown, read as zero (docs/window-state.md)."""
    if value is None:
        return 0.0
    value = float(value)
    return value if math.isfinite(value) else 0.0


def is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


# --- profiles --------------------------------------------------------------------

def _fine_probabilities(fine_bins: int) -> np.ndarray:
    """0, 1/B ... (B-1)/B, 1, with each outer 1/B split into `BASELINE_TAIL_BINS` parts.

    The tails are where a window's values go past the training data and where the
    ECDFs cross inside a wide bin; finer tail bins keep the Wasserstein distance
    from bins exact there too. The training min and max (probabilities 0 and 1)
    are edges, so the open outer bins hold exactly the out-of-range values, where
    one ECDF is flat and the Wasserstein integral has no sign change.
    """
    tail = np.arange(1, defaults.BASELINE_TAIL_BINS) / (defaults.BASELINE_TAIL_BINS * fine_bins)
    return np.concatenate(([0.0], tail, np.arange(1, fine_bins) / fine_bins, 1.0 - tail[::-1], [1.0]))


@dataclass
class NumericProfile:
    """Training distribution of one numeric feature (module docstring)."""

    edges: np.ndarray  # strictly increasing inner edges of the fine bins (float64)
    counts: np.ndarray  # int64, len(edges) + 1
    sums: np.ndarray  # float64 sum of the values in each fine bin
    decile_edges: np.ndarray  # inner edges of the ten PSI bins, a subset of `edges`
    count: int  # finite values
    nulls: int  # None / NaN
    nonfinite: int  # +/-inf, kept out of bins and moments
    min: float | None
    max: float | None
    mean: float | None
    std: float | None  # population (ddof=0)
    distinct: int = 0  # distinct finite values (a feature with few is binned value by value for JS)

    kind = NUMERIC

    @property
    def rows(self) -> int:
        return self.count + self.nulls + self.nonfinite

    @property
    def null_rate(self) -> float:
        return self.nulls / self.rows if self.rows else 0.0

    @property
    def value_types(self) -> dict[str, int]:
        return {"number": self.count + self.nonfinite}

    @property
    def decile_index(self) -> np.ndarray:
        """Positions of the decile edges among the fine edges (for re-aggregation)."""
        return np.searchsorted(self.edges, self.decile_edges)

    @classmethod
    def from_values(cls, values: Any, fine_bins: int = defaults.BASELINE_FINE_BINS) -> "NumericProfile":
        array = np.asarray(values, dtype=np.float64).ravel()
        nan = np.isnan(array)
        finite_mask = np.isfinite(array)
        finite = np.sort(array[finite_mask])
        n = finite.size
        nonfinite = int(array.size - n - nan.sum())
        if n:
            edges = np.unique(np.quantile(finite, _fine_probabilities(fine_bins)))
            decile = np.unique(np.quantile(finite, np.arange(1, defaults.PSI_NUMERIC_BINS) / defaults.PSI_NUMERIC_BINS))
            # Same probabilities (k/10 == 100k/1000 exactly in floating point) and
            # the same data, so every decile is one of the fine edges.
            if not np.isin(decile, edges).all():  # pragma: no cover - arithmetic guarantee
                edges = np.union1d(edges, decile)
            index = np.searchsorted(edges, finite, side="right")
            counts = np.bincount(index, minlength=edges.size + 1).astype(np.int64)
            sums = np.bincount(index, weights=finite, minlength=edges.size + 1)
            mean, std = float(finite.mean()), float(finite.std())
            low, high = float(finite[0]), float(finite[-1])
            distinct = int(np.count_nonzero(np.diff(finite))) + 1
        else:
            distinct = 0
            edges = np.empty(0)
            decile = np.empty(0)
            counts = np.zeros(1, dtype=np.int64)
            sums = np.zeros(1)
            mean = std = low = high = None
        return cls(edges=edges, counts=counts, sums=sums, decile_edges=decile, count=int(n),
                   nulls=int(nan.sum()), nonfinite=nonfinite, min=low, max=high, mean=mean, std=std,
                   distinct=distinct)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": NUMERIC, "edges": self.edges.tolist(), "counts": self.counts.tolist(),
                "sums": self.sums.tolist(), "decile_edges": self.decile_edges.tolist(), "count": self.count,
                "nulls": self.nulls, "nonfinite": self.nonfinite, "min": _finite_or_none(self.min),
                "max": _finite_or_none(self.max), "mean": _finite_or_none(self.mean),
                "std": _finite_or_none(self.std), "distinct": self.distinct}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NumericProfile":
        edges = np.asarray(data["edges"], dtype=np.float64)
        counts = np.asarray(data["counts"], dtype=np.int64)
        sums = np.asarray(data["sums"], dtype=np.float64)
        if counts.size != edges.size + 1 or sums.size != counts.size:
            raise UserError(f"baseline numeric profile is inconsistent: {edges.size} edges, "
                            f"{counts.size} counts, {sums.size} sums")
        return cls(edges=edges, counts=counts, sums=sums,
                   decile_edges=np.asarray(data["decile_edges"], dtype=np.float64), count=int(data["count"]),
                   nulls=int(data["nulls"]), nonfinite=int(data.get("nonfinite", 0)), min=data["min"],
                   max=data["max"], mean=data["mean"], std=data["std"], distinct=int(data.get("distinct", 0)))


@dataclass
class CategoricalProfile:
    """Training distribution of one categorical feature: counts per `category_key`."""

    counts: dict[str, int]
    nulls: int
    value_types: dict[str, int]  # JSON type -> count of non-null values

    kind = CATEGORICAL

    @property
    def count(self) -> int:
        return int(sum(self.counts.values()))

    @property
    def rows(self) -> int:
        return self.count + self.nulls

    @property
    def null_rate(self) -> float:
        return self.nulls / self.rows if self.rows else 0.0

    @property
    def frequencies(self) -> dict[str, float]:
        total = self.count
        return {k: v / total for k, v in self.counts.items()} if total else {}

    @classmethod
    def from_values(cls, values: Any) -> "CategoricalProfile":
        counts, nulls, types = count_categories(values)
        return cls(counts=counts, nulls=nulls, value_types=types)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": CATEGORICAL, "counts": dict(self.counts), "nulls": self.nulls,
                "value_types": dict(self.value_types)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CategoricalProfile":
        return cls(counts={str(k): int(v) for k, v in data["counts"].items()}, nulls=int(data["nulls"]),
                   value_types={str(k): int(v) for k, v in data.get("value_types", {}).items()})


Profile = NumericProfile | CategoricalProfile


def count_categories(values: Any) -> tuple[dict[str, int], int, dict[str, int]]:
    """``(counts per category_key, nulls, counts per JSON type)`` of a column, vectorised by pandas.

    pandas hashes the Python objects once (C speed); only the distinct values are
    turned into keys in Python.
    """
    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=object), dtype=object)
    counted = series.value_counts(dropna=True, sort=False)
    counts: dict[str, int] = {}
    types: dict[str, int] = {}
    for value, count in zip(counted.index.tolist(), counted.to_numpy().tolist()):
        key = category_key(value)
        counts[key] = counts.get(key, 0) + int(count)
        kind = json_type(value)
        types[kind] = types.get(kind, 0) + int(count)
    nulls = int(len(series) - sum(counts.values()))
    return counts, nulls, types


def profile_from_dict(data: Mapping[str, Any]) -> Profile:
    kind = data.get("kind")
    if kind == NUMERIC:
        return NumericProfile.from_dict(data)
    if kind == CATEGORICAL:
        return CategoricalProfile.from_dict(data)
    raise UserError(f"baseline profile has unknown kind {kind!r}")


# --- predictions ------------------------------------------------------------------

def prediction_values(predictions: Any) -> tuple[str, np.ndarray]:
    """``(source, values)``: predictions as one number or one class per row.

    * numbers (bools excluded) -> ``("score", float64)``;
    * lists of class probabilities -> ``("probability", float64)``: ``p[1]`` for two
      classes (the positive class), ``max(p)`` for more (the winning class's probability);
    * anything else (strings, booleans) -> ``("class", object array of category keys)``.

    Nulls (an error event has no prediction) are NaN / None.
    """
    if isinstance(predictions, pd.Series):
        predictions = predictions.to_numpy()
    array = np.asarray(predictions) if not isinstance(predictions, list) else None
    if array is not None and array.dtype.kind in "fiu" and array.ndim == 1:
        return SCORE, array.astype(np.float64)
    if array is not None and array.dtype.kind == "f" and array.ndim == 2:
        return PROBABILITY, _probability_score(array)
    values = list(predictions) if array is None or array.ndim else [predictions]
    non_null = [v for v in values if not is_null(v)]
    if non_null and all(isinstance(v, (list, tuple, np.ndarray)) for v in non_null):
        scores = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            if not is_null(v) and len(v):
                p = np.asarray(v, dtype=np.float64)
                scores[i] = p[1] if p.size == 2 else p.max()
        return PROBABILITY, scores
    if non_null and all(json_type(v) == "number" for v in non_null):
        return SCORE, np.array([np.nan if is_null(v) else float(v) for v in values], dtype=np.float64)
    return CLASS, np.array([None if is_null(v) else category_key(v) for v in values], dtype=object)


def _probability_score(matrix: np.ndarray) -> np.ndarray:
    return matrix[:, 1].astype(np.float64) if matrix.shape[1] == 2 else matrix.max(axis=1).astype(np.float64)


# --- labels joined with predictions (model quality) -------------------------------

# Integer labels and integer predictions with at most this many distinct labels
# are class ids (multiclass), not counts to regress on.
_MAX_CLASSES_AS_INTEGERS = 20


def _score_bin(scores: np.ndarray, bins: int) -> np.ndarray:
    return np.clip(np.floor(np.clip(scores, 0.0, 1.0) * bins), 0, bins - 1).astype(np.intp)


@dataclass
class LabelSummary:
    """Predictions joined with their labels, summarised so quality metrics come from counts.

    * ``binary`` (labels 0/1 or booleans, predictions a score in [0, 1] or 0/1):
      counts of (label, score bin) on `defaults.QUALITY_SCORE_BINS` equal-width bins
      of [0, 1], plus the summed log loss per label. Accuracy, precision, recall,
      F1 at threshold 0.5 are exact; ROC AUC counts pairs in one bin as ties.
    * ``regression`` (numeric labels otherwise): n, sum of errors, absolute and
      squared errors, of labels and squared labels (MAE, RMSE, bias, R^2).
    * ``multiclass`` (anything else): counts of (label, predicted class).

    The task is fixed by the first `add` (or given); merging needs equal tasks.
    """

    task: str | None = None
    bins: int = defaults.QUALITY_SCORE_BINS
    positives: np.ndarray | None = None  # binary: count of label 1 per score bin
    negatives: np.ndarray | None = None  # binary: count of label 0 per score bin
    log_loss_sum: float = 0.0  # binary: sum of -log p(label)
    n: int = 0
    sum_error: float = 0.0  # regression: sum(prediction - label)
    sum_abs_error: float = 0.0
    sum_sq_error: float = 0.0
    sum_label: float = 0.0
    sum_sq_label: float = 0.0
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)  # multiclass
    dropped: int = 0  # pairs lost merging summaries whose tasks disagreed
    out_of_range: int = 0  # pairs not counted: a number of magnitude above defaults.VALUE_MAX_ABS (sums would overflow)

    @staticmethod
    def infer_task(predictions: Any, labels: Any) -> str:
        """binary, regression or multiclass, from the values (the rule in the class docstring).

        Numeric labels in {0, 1} with scores in [0, 1] (or a positive-class
        probability): binary. Other numeric labels with numeric predictions:
        regression, unless labels and predictions are all integers with at most
        `_MAX_CLASSES_AS_INTEGERS` distinct labels (integer class ids). Anything
        else (string labels, several class probabilities): multiclass.
        """
        label_values = pd.Series(np.asarray(labels, dtype=object)).dropna().tolist()
        source, scores = prediction_values(predictions)
        if not label_values or not all(json_type(v) in ("number", "boolean") for v in label_values):
            return MULTICLASS
        y = np.asarray(label_values, dtype=np.float64)
        finite = scores[np.isfinite(scores)] if source != CLASS else None
        if source == CLASS:
            return MULTICLASS
        if np.isin(y, (0.0, 1.0)).all() and (finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0)):
            return BINARY
        if source == PROBABILITY:
            return MULTICLASS
        integral = (np.round(y) == y).all() and (np.round(finite) == finite).all()
        if integral and np.unique(y).size <= _MAX_CLASSES_AS_INTEGERS:
            return MULTICLASS
        return REGRESSION

    def add(self, predictions: Any, labels: Any) -> "LabelSummary":
        """Count (prediction, label) pairs; pairs with a null on either side are skipped."""
        labels_array = np.asarray(labels if not isinstance(labels, pd.Series) else labels.to_numpy(), dtype=object)
        if isinstance(predictions, pd.Series):
            predictions = predictions.to_numpy()
        if len(labels_array) != len(predictions):
            raise ValueError(f"{len(predictions)} predictions but {len(labels_array)} labels")
        if len(labels_array) == 0:
            return self
        if self.task is None:
            self.task = self.infer_task(predictions, labels_array)
        source, values = prediction_values(predictions)
        label_null = np.array([is_null(v) for v in labels_array], dtype=bool)
        if self.task == MULTICLASS:
            if source == PROBABILITY:
                predicted = np.array([None if is_null(p) else str(int(np.argmax(p))) for p in predictions], dtype=object)
            elif source == CLASS:
                predicted = values
            else:
                predicted = np.array([None if np.isnan(v) else category_key(v) for v in values], dtype=object)
            keep = ~label_null & np.array([p is not None for p in predicted], dtype=bool)
            pairs = pd.Series(list(zip([category_key(v) for v in labels_array[keep]], predicted[keep].tolist())),
                              dtype=object).value_counts(sort=False)
            for pair, count in pairs.items():
                self.confusion[pair] = self.confusion.get(pair, 0) + int(count)
            self.n += int(keep.sum())
            return self
        if source == CLASS:
            raise ValueError(f"{self.task} quality needs numeric predictions, got class labels")
        y = np.array([np.nan if label_null[i] else float(v) for i, v in enumerate(labels_array)], dtype=np.float64)
        keep = np.isfinite(y) & np.isfinite(values)
        sane = (np.abs(y) <= defaults.VALUE_MAX_ABS) & (np.abs(values) <= defaults.VALUE_MAX_ABS)
        self.out_of_range += int((keep & ~sane).sum())
        keep &= sane
        y, p = y[keep], values[keep]
        self.n += int(y.size)
        if self.task == BINARY:
            if self.positives is None:
                self.positives = np.zeros(self.bins, dtype=np.int64)
                self.negatives = np.zeros(self.bins, dtype=np.int64)
            positive = y == 1.0
            index = _score_bin(p, self.bins)
            self.positives += np.bincount(index[positive], minlength=self.bins)
            self.negatives += np.bincount(index[~positive], minlength=self.bins)
            clipped = np.clip(p, defaults.LOG_LOSS_EPSILON, 1.0 - defaults.LOG_LOSS_EPSILON)
            self.log_loss_sum += float(-np.log(np.where(positive, clipped, 1.0 - clipped)).sum())
        else:
            error = p - y
            self.sum_error += float(error.sum())
            self.sum_abs_error += float(np.abs(error).sum())
            self.sum_sq_error += float((error * error).sum())
            self.sum_label += float(y.sum())
            self.sum_sq_label += float((y * y).sum())
        return self

    def merge(self, other: "LabelSummary") -> "LabelSummary":
        if other.task is None or (other.n == 0 and self.task is not None):
            return self.copy()
        if self.task is None or (self.n == 0 and self.task != other.task):
            return other.copy()
        if self.task != other.task:
            # Two collectors guessed different tasks from their first labels (no
            # baseline labels to decide): keep the larger side, count the other as
            # dropped rather than fail a flush.
            kept, lost = (self, other) if self.n >= other.n else (other, self)
            out = kept.copy()
            out.dropped += lost.n + lost.dropped
            return out
        out = self.copy()
        out.dropped += other.dropped
        out.out_of_range += other.out_of_range
        out.n += other.n
        if other.positives is not None:
            out.positives = other.positives.copy() if out.positives is None else out.positives + other.positives
            out.negatives = other.negatives.copy() if out.negatives is None else out.negatives + other.negatives
        out.log_loss_sum += other.log_loss_sum
        out.sum_error += other.sum_error
        out.sum_abs_error += other.sum_abs_error
        out.sum_sq_error += other.sum_sq_error
        out.sum_label += other.sum_label
        out.sum_sq_label += other.sum_sq_label
        for pair, count in other.confusion.items():
            out.confusion[pair] = out.confusion.get(pair, 0) + count
        return out

    def copy(self) -> "LabelSummary":
        return LabelSummary(task=self.task, bins=self.bins,
                            positives=None if self.positives is None else self.positives.copy(),
                            negatives=None if self.negatives is None else self.negatives.copy(),
                            log_loss_sum=self.log_loss_sum, n=self.n, sum_error=self.sum_error,
                            sum_abs_error=self.sum_abs_error, sum_sq_error=self.sum_sq_error,
                            sum_label=self.sum_label, sum_sq_label=self.sum_sq_label, confusion=dict(self.confusion),
                            dropped=self.dropped, out_of_range=self.out_of_range)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task": self.task, "bins": self.bins, "n": self.n, "dropped": self.dropped}
        if self.out_of_range:
            data["out_of_range"] = self.out_of_range
        if self.task == BINARY and self.positives is not None:
            data.update(positives=self.positives.tolist(), negatives=self.negatives.tolist(),
                        log_loss_sum=self.log_loss_sum)
        elif self.task == REGRESSION:
            data.update(sum_error=self.sum_error, sum_abs_error=self.sum_abs_error, sum_sq_error=self.sum_sq_error,
                        sum_label=self.sum_label, sum_sq_label=self.sum_sq_label)
        elif self.task == MULTICLASS:
            data["confusion"] = [[label, predicted, count] for (label, predicted), count in self.confusion.items()]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LabelSummary":
        out = cls(task=data.get("task"), bins=int(data.get("bins", defaults.QUALITY_SCORE_BINS)), n=int(data.get("n", 0)),
                  dropped=int(data.get("dropped", 0)), out_of_range=int(data.get("out_of_range", 0)))
        if "positives" in data:
            out.positives = np.asarray(data["positives"], dtype=np.int64)
            out.negatives = np.asarray(data["negatives"], dtype=np.int64)
            out.log_loss_sum = stored_sum(data.get("log_loss_sum"))
        for name in ("sum_error", "sum_abs_error", "sum_sq_error", "sum_label", "sum_sq_label"):
            setattr(out, name, stored_sum(data.get(name)))
        out.confusion = {(str(a), str(b)): int(c) for a, b, c in data.get("confusion", [])}
        return out


# --- the baseline -------------------------------------------------------------------

@dataclass
class Baseline:
    """A model version's training summary (module docstring). Build with `compute_baseline`."""

    rows: int
    profiles: dict[str, Profile]  # feature name -> profile, in training column order
    prediction: Profile | None = None
    prediction_source: str | None = None  # SCORE, PROBABILITY or CLASS
    quality: LabelSummary | None = None
    sample: list[dict[str, Any]] = field(default_factory=list)
    fine_bins: int = defaults.BASELINE_FINE_BINS
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = self._compute_fingerprint()

    @property
    def feature_names(self) -> list[str]:
        return list(self.profiles)

    def kind(self, name: str) -> str:
        """"numeric" or "categorical"; a KeyError names an unknown feature."""
        try:
            return self.profiles[name].kind
        except KeyError:
            raise KeyError(f"feature {name!r} is not in the baseline (known: {', '.join(self.profiles)})") from None

    def profile(self, name: str) -> Profile:
        return self.profiles[name]

    @property
    def numeric(self) -> dict[str, NumericProfile]:
        return {k: v for k, v in self.profiles.items() if isinstance(v, NumericProfile)}

    @property
    def categorical(self) -> dict[str, CategoricalProfile]:
        return {k: v for k, v in self.profiles.items() if isinstance(v, CategoricalProfile)}

    def _compute_fingerprint(self) -> str:
        # Window states count on these bins; states built on different bins must not merge.
        digest = hashlib.sha1(f"{BASELINE_FORMAT}:{self.rows}".encode())
        parts = list(self.profiles.items()) + ([("\x00prediction", self.prediction)] if self.prediction else [])
        for name, profile in parts:
            digest.update(name.encode("utf-8", "surrogatepass") + b"\x00" + profile.kind.encode())
            if isinstance(profile, NumericProfile):
                digest.update(np.ascontiguousarray(profile.edges, dtype="<f8").tobytes())
        return digest.hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (no NaN, no numpy types): what the store keeps."""
        return {"format": BASELINE_FORMAT, "rows": self.rows, "fine_bins": self.fine_bins,
                "fingerprint": self.fingerprint,
                "features": [{"name": name, **profile.to_dict()} for name, profile in self.profiles.items()],
                "prediction": None if self.prediction is None else self.prediction.to_dict(),
                "prediction_source": self.prediction_source,
                "quality": None if self.quality is None else self.quality.to_dict(),
                "sample": self.sample}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Baseline":
        if not isinstance(data, Mapping) or data.get("format") != BASELINE_FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise UserError(f"not a driftline baseline (format {found!r}, expected {BASELINE_FORMAT})")
        profiles = {entry["name"]: profile_from_dict(entry) for entry in data["features"]}
        return cls(rows=int(data["rows"]), profiles=profiles,
                   prediction=None if data.get("prediction") is None else profile_from_dict(data["prediction"]),
                   prediction_source=data.get("prediction_source"),
                   quality=None if data.get("quality") is None else LabelSummary.from_dict(data["quality"]),
                   sample=list(data.get("sample") or []), fine_bins=int(data.get("fine_bins", defaults.BASELINE_FINE_BINS)),
                   fingerprint=str(data.get("fingerprint") or ""))


def _is_categorical_column(column: pd.Series) -> bool:
    return not pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype)


def _json_value(value: Any) -> Any:
    """A JSON-safe copy of one cell: numpy scalars to Python, NaN to None."""
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def compute_baseline(features: pd.DataFrame, *, categorical: Iterable[str] = (),
                     predictions: np.ndarray | pd.Series | list | None = None, labels: Any = None,
                     sample_size: int = defaults.BASELINE_SAMPLE_SIZE, seed: int = 0,
                     fine_bins: int = defaults.BASELINE_FINE_BINS) -> Baseline:
    """Summarise a model version's training data (module docstring).

    `features`: one row per training example, one column per model feature.
    Columns named in `categorical`, and any non-numeric or boolean column, are
    categorical; the rest numeric. `predictions` (optional, one per row): the
    model's outputs on the training rows; `labels` (optional, needs predictions):
    their true labels, for the training quality metrics. A uniform sample of
    `sample_size` rows (seeded by `seed`) is kept. Raises `UserError` for input a
    user can fix (no rows, unknown categorical column, length mismatch).
    """
    if not isinstance(features, pd.DataFrame):
        raise UserError(f"baseline features must be a pandas DataFrame, got {type(features).__name__}")
    if len(features) == 0 or features.shape[1] == 0:
        raise UserError(f"cannot compute a baseline from {len(features)} rows and {features.shape[1]} columns")
    if fine_bins < defaults.PSI_NUMERIC_BINS or fine_bins % defaults.PSI_NUMERIC_BINS:
        raise UserError(f"fine_bins must be a multiple of {defaults.PSI_NUMERIC_BINS}, got {fine_bins}")
    names = [str(c) for c in features.columns]
    if len(set(names)) != len(names):
        raise UserError("baseline feature names must be unique")
    categorical = set(categorical)
    unknown = sorted(categorical - set(names))
    if unknown:
        raise UserError(f"categorical column(s) not in the data: {', '.join(unknown)}")
    profiles: dict[str, Profile] = {}
    for name, column in zip(names, (features.iloc[:, j] for j in range(features.shape[1]))):
        if name in categorical or _is_categorical_column(column):
            profiles[name] = CategoricalProfile.from_values(column.astype(object))
        else:
            profiles[name] = NumericProfile.from_values(column.to_numpy(dtype=np.float64, na_value=np.nan), fine_bins)

    prediction = source = quality = None
    if predictions is not None:
        if len(predictions) != len(features):
            raise UserError(f"{len(predictions)} predictions for {len(features)} training rows")
        source, values = prediction_values(predictions)
        prediction = (CategoricalProfile.from_values(values) if source == CLASS
                      else NumericProfile.from_values(values, fine_bins))
        if labels is not None:
            if len(labels) != len(features):
                raise UserError(f"{len(labels)} labels for {len(features)} training rows")
            quality = LabelSummary().add(predictions, labels)
    elif labels is not None:
        raise UserError("training labels need the training predictions too (for the training metrics)")

    rng = np.random.default_rng(seed)
    take = np.sort(rng.choice(len(features), size=min(sample_size, len(features)), replace=False))
    records = features.iloc[take].astype(object).to_dict(orient="records")
    prediction_list = None if predictions is None else (
        predictions.to_numpy() if isinstance(predictions, pd.Series) else predictions)
    label_list = None if labels is None else (labels.to_numpy() if isinstance(labels, pd.Series) else labels)
    sample = []
    for position, record in zip(take.tolist(), records):
        row: dict[str, Any] = {"features": {str(k): _json_value(v) for k, v in record.items()}}
        if prediction_list is not None:
            row["prediction"] = _json_value(prediction_list[position])
        if label_list is not None:
            row["label"] = _json_value(label_list[position])
        sample.append(row)
    return Baseline(rows=len(features), profiles=profiles, prediction=prediction, prediction_source=source,
                    quality=quality, sample=sample, fine_bins=fine_bins)
