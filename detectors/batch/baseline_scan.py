"""The first pass of a bounded-memory baseline: `BaselineScan`, a fold of a training table's chunks.

Per chunk (a Parquet row group, a CSV block, a Spark or Dask partition) and mergeable, in table order:

* the numeric columns (features, and the prediction when it is a number) through
  `driftline.detectors.batch.summary.summarize` under a scan plan: counts, Chan's mean and M2,
  min, max, the values themselves while a column holds at most ``exact_values``, and a bottom-k
  row sample (its values start the exact quantile search, `driftline.detectors.batch.quantiles`);
  plus the infinite values, which a baseline counts apart from nulls;
* the categorical columns by `driftline.baseline.count_categories` itself (keys, nulls, JSON types),
  merged in order of first appearance as the whole column would be counted;
* the prediction's source (`driftline.baseline.prediction_values`): a chunk that has predictions
  must agree with the first one's;
* with labels, `TaskEvidence`: what `LabelSummary.infer_task` reads of the whole columns, so the
  training quality is summarized in a later pass under the task the whole table implies.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from driftline.baseline import BINARY, CLASS, MULTICLASS, PROBABILITY, REGRESSION, count_categories, json_type, \
    prediction_values
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.summary import BatchSummary, merge, summarize
from driftline.detectors.batch.windowing import check_chunk
from driftline.errors import UserError

__all__ = ["BaselineScan", "PREDICTION", "ScanPart", "TaskEvidence", "prediction_column"]

# The name the prediction's values (one number or one class per row) take in a chunk: no column has it.
PREDICTION = "\x00prediction"
# Distinct labels `TaskEvidence` keeps: one more than `infer_task`'s limit for integer class ids.
_MAX_CLASSES = 20


def prediction_column(chunk: pd.DataFrame, column: str) -> tuple[str | None, np.ndarray]:
    """(the source, or None for a chunk without any prediction, the values) of one chunk's predictions."""
    source, values = prediction_values(chunk[column])
    if source == CLASS and all(v is None for v in values.tolist()):
        return None, values
    return source, values


@dataclass
class TaskEvidence:
    """Mergeable facts about labels and predictions that decide `LabelSummary.infer_task` for the whole table."""

    labels: int = 0  # non-null labels
    numeric: bool = True  # every non-null label a number or a boolean
    zero_one: bool = True  # every label 0 or 1
    labels_integral: bool = True  # every label a whole number
    scores_integral: bool = True  # every finite prediction a whole number
    low: float = np.inf  # the finite predictions' range (all rows', labelled or not, as infer_task reads them)
    high: float = -np.inf
    distinct: frozenset = field(default_factory=frozenset)  # up to _MAX_CLASSES + 1 label values

    @classmethod
    def of(cls, predictions: pd.Series, labels: pd.Series) -> "TaskEvidence":
        out = cls()
        source, scores = prediction_values(predictions)
        if source != CLASS:
            finite = scores[np.isfinite(scores)]
            out.scores_integral = bool((np.round(finite) == finite).all())
            if finite.size:
                out.low, out.high = float(finite.min()), float(finite.max())
        values = pd.Series(np.asarray(labels, dtype=object)).dropna().tolist()
        out.labels = len(values)
        if not values:
            return out
        if not all(json_type(v) in ("number", "boolean") for v in values):
            out.numeric = False
            return out
        y = np.asarray(values, dtype=np.float64)
        out.zero_one = bool(np.isin(y, (0.0, 1.0)).all())
        out.labels_integral = bool((np.round(y) == y).all())
        out.distinct = frozenset(np.unique(y)[:_MAX_CLASSES + 1].tolist())
        return out

    def merged(self, other: "TaskEvidence") -> "TaskEvidence":
        distinct = self.distinct | other.distinct
        if len(distinct) > _MAX_CLASSES + 1:
            distinct = frozenset(sorted(distinct)[:_MAX_CLASSES + 1])
        return TaskEvidence(self.labels + other.labels, self.numeric and other.numeric,
                            self.zero_one and other.zero_one, self.labels_integral and other.labels_integral,
                            self.scores_integral and other.scores_integral,
                            min(self.low, other.low), max(self.high, other.high), distinct)

    def task(self, source: str | None) -> str:
        """`LabelSummary.infer_task`'s answer for the whole table (its rule, on these facts)."""
        if not self.labels or not self.numeric or source == CLASS:
            return MULTICLASS
        if self.zero_one and (self.low > self.high or (self.low >= 0.0 and self.high <= 1.0)):
            return BINARY
        if source == PROBABILITY:
            return MULTICLASS
        if self.labels_integral and self.scores_integral and len(self.distinct) <= _MAX_CLASSES:
            return MULTICLASS
        return REGRESSION


@dataclass
class ScanPart:
    """What the first pass holds of some rows of the table (module docstring)."""

    summary: BatchSummary
    categories: dict[str, tuple[dict[str, int], int, dict[str, int]]]  # count_categories per categorical column
    infinite: dict[str, int]  # numeric column -> +/-inf values
    source: str | None = None  # the prediction's source, None before any prediction
    evidence: TaskEvidence | None = None


def _merge_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, count in b.items():
        out[key] = out.get(key, 0) + count
    return out


@dataclass(frozen=True)
class BaselineScan:
    """The first pass (module docstring). `plan`: a scan plan of the numeric columns (the prediction as
    `PREDICTION` when it is a number), sampling every column the baseline reads."""

    plan: Plan
    categorical: tuple[str, ...]
    prediction: str | None = None
    prediction_kind: str | None = None  # "numeric" or "categorical": the first chunk's
    label: str | None = None
    read: tuple[str, ...] = ()  # every column the later passes need (features, prediction, label, embeddings)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.read

    def prepared(self, chunk: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
        """`chunk` with the prediction's values as `PREDICTION`, and their source."""
        if self.prediction is None:
            return chunk, None
        source, values = prediction_column(chunk, self.prediction)
        if self.prediction_kind == "numeric":
            values = np.asarray(values, dtype=np.float64) if source != CLASS else np.full(len(chunk), np.nan)
        return chunk.assign(**{PREDICTION: values}), source

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> ScanPart:
        chunk, source = self.prepared(chunk)
        check_chunk(chunk, self.plan, "training data")
        summary = summarize(chunk, self.plan, row_offset)
        infinite = {}
        for name in self.plan.kinds:
            raw = chunk[name].to_numpy(dtype=np.float64, na_value=np.nan)
            infinite[name] = int(np.isinf(raw).sum())
        categories = {name: count_categories(chunk[name].astype(object)) for name in self.categorical}
        if self.prediction is not None and self.prediction_kind != "numeric":
            categories[PREDICTION] = count_categories(pd.Series(chunk[PREDICTION].to_numpy(), dtype=object))
        evidence = None
        if self.label is not None and self.prediction is not None:
            evidence = TaskEvidence.of(chunk[self.prediction], chunk[self.label])
        return ScanPart(summary, categories, infinite, source, evidence)

    def merge(self, a: ScanPart, b: ScanPart) -> ScanPart:
        if a.source is not None and b.source is not None and a.source != b.source:
            raise UserError(f"the prediction column {self.prediction} holds {a.source} values in some rows and "
                            f"{b.source} values in others; fix the file or register it with --in-memory")
        categories = {name: (_merge_counts(a.categories[name][0], b.categories[name][0]),
                             a.categories[name][1] + b.categories[name][1],
                             _merge_counts(a.categories[name][2], b.categories[name][2])) for name in a.categories}
        evidence = None if a.evidence is None or b.evidence is None else a.evidence.merged(b.evidence)
        return ScanPart(merge(a.summary, b.summary, self.plan), categories,
                        {name: a.infinite[name] + b.infinite[name] for name in a.infinite},
                        a.source if a.source is not None else b.source, evidence)
