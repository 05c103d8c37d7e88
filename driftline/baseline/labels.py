"""`LabelSummary`: predictions joined with their labels, summarised so quality metrics come from counts."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.baseline.decisions import decision_values, split_decisions
from driftline.baseline.predictions import CLASS, PROBABILITY, prediction_values
from driftline.baseline.values import category_key, is_null, json_type, stored_sum

# Task of a label summary.
BINARY = "binary"
REGRESSION = "regression"
MULTICLASS = "multiclass"
# Integer labels and integer predictions with at most this many distinct labels
# are class ids (multiclass), not counts to regress on.
_MAX_CLASSES_AS_INTEGERS = 20


def _score_bin(scores: np.ndarray, bins: int) -> np.ndarray:
    return np.clip(np.floor(np.clip(scores, 0.0, 1.0) * bins), 0, bins - 1).astype(np.intp)


def decision_cut(threshold: float, bins: int) -> int:
    """The first score bin at or above `threshold` (to the nearest bin edge): rows there are predicted positive."""
    return int(min(max(round(threshold * bins), 0), bins))


_DECISION_ARRAYS = ("decided_positives", "decided_negatives", "called_positives", "called_negatives")


@dataclass
class LabelSummary:
    """Predictions joined with their labels, summarised so quality metrics come from counts.

    * ``binary`` (labels 0/1 or booleans, predictions a score in [0, 1] or 0/1):
      counts of (label, score bin) on `defaults.QUALITY_SCORE_BINS` equal-width bins
      of [0, 1], plus the summed log loss per label. Accuracy, precision, recall,
      F1 at threshold 0.5 are exact; ROC AUC counts pairs in one bin as ties. Pairs that
      came with the model's own decision (``predicted_class``, `driftline.baseline.decisions`)
      are also counted per (label, score bin) as decided and as called positive, so the
      threshold metrics follow the decision (`predicted_positive`); None while no pair had one.
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
    # binary, pairs with the model's own decision: label-1 / label-0 rows per score bin that carried one, and
    # of those the rows the model called positive (None: no pair carried a decision)
    decided_positives: np.ndarray | None = None
    decided_negatives: np.ndarray | None = None
    called_positives: np.ndarray | None = None
    called_negatives: np.ndarray | None = None
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

    def add(self, predictions: Any, labels: Any, decisions: Any = None) -> "LabelSummary":
        """Count (prediction, label) pairs; pairs with a null on either side are skipped.

        `decisions`: the model's own decision per pair (binary; `decision_values` reads them); predictions
        stored with their decision (`driftline.baseline.decisions.with_decisions`) carry theirs.
        """
        labels_array = np.asarray(labels if not isinstance(labels, pd.Series) else labels.to_numpy(), dtype=object)
        if isinstance(predictions, pd.Series):
            predictions = predictions.to_numpy()
        if decisions is None and (isinstance(predictions, list) or getattr(predictions, "dtype", None) == object):
            predictions, decisions = split_decisions(predictions)
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
            if decisions is not None:
                self._add_decisions(decision_values(decisions)[keep], positive, index)
        else:
            error = p - y
            self.sum_error += float(error.sum())
            self.sum_abs_error += float(np.abs(error).sum())
            self.sum_sq_error += float((error * error).sum())
            self.sum_label += float(y.sum())
            self.sum_sq_label += float((y * y).sum())
        return self

    def _add_decisions(self, decided: np.ndarray, positive: np.ndarray, index: np.ndarray) -> None:
        given = ~np.isnan(decided)
        if not given.any():
            return
        called = decided == 1.0
        for name, rows in zip(_DECISION_ARRAYS, (positive & given, ~positive & given, positive & called,
                                                  ~positive & called)):
            counts = np.bincount(index[rows], minlength=self.bins).astype(np.int64)
            held = getattr(self, name)
            setattr(self, name, counts if held is None else held + counts)

    def predicted_positive(self, cut: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Binary: (label-1 rows, label-0 rows) predicted positive per score bin, as float64: the model's own
        decision where the pair carried one, else a score in a bin at or above `cut` (default: the bin of 0.5)."""
        cut = self.bins // 2 if cut is None else cut
        below = np.arange(self.bins) < cut
        pos, neg = self.positives.astype(np.float64), self.negatives.astype(np.float64)
        if self.decided_positives is None:
            return np.where(below, 0.0, pos), np.where(below, 0.0, neg)
        undecided_pos = pos - self.decided_positives
        undecided_neg = neg - self.decided_negatives
        return (np.where(below, 0.0, undecided_pos) + self.called_positives,
                np.where(below, 0.0, undecided_neg) + self.called_negatives)

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
        for name in _DECISION_ARRAYS:
            theirs = getattr(other, name)
            if theirs is not None:
                mine = getattr(out, name)
                setattr(out, name, theirs.copy() if mine is None else mine + theirs)
        out.sum_error += other.sum_error
        out.sum_abs_error += other.sum_abs_error
        out.sum_sq_error += other.sum_sq_error
        out.sum_label += other.sum_label
        out.sum_sq_label += other.sum_sq_label
        for pair, count in other.confusion.items():
            out.confusion[pair] = out.confusion.get(pair, 0) + count
        return out

    def copy(self) -> "LabelSummary":
        out = self._copy_counts()
        for name in _DECISION_ARRAYS:
            held = getattr(self, name)
            setattr(out, name, None if held is None else held.copy())
        return out

    def _copy_counts(self) -> "LabelSummary":
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
            if self.decided_positives is not None:
                data.update({name: getattr(self, name).tolist() for name in _DECISION_ARRAYS})
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
            if "decided_positives" in data:
                for name in _DECISION_ARRAYS:
                    setattr(out, name, np.asarray(data[name], dtype=np.int64))
        for name in ("sum_error", "sum_abs_error", "sum_sq_error", "sum_label", "sum_sq_label"):
            setattr(out, name, stored_sum(data.get(name)))
        out.confusion = {(str(a), str(b)): int(c) for a, b, c in data.get("confusion", [])}
        return out
