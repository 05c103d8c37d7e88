"""Mergeable summaries of table chunks for bounded-memory batch detection: `summarize`, `merge`.

The batch half of the window-state idea (`driftline.window_state`): a chunk of rows
(a pandas DataFrame: a Parquet row group, a CSV block, a Spark or Dask partition) becomes a
`BatchSummary`; any number of summaries of one window (or of the reference) merge into one,
associatively and commutatively, and `driftline.detectors.batch.finish` turns the reference's
and each window's merged summary into the `driftline detect` JSON. Memory is bounded by the
plan (`driftline.detectors.batch.plan.Plan`), never by the table:

* per **numeric** column: rows, missing (null, NaN, +/-inf: the in-memory path drops them the
  same way), count, mean and M2 (Chan's parallel update), min, max, and either the finite
  values themselves while the merged summary holds at most ``plan.exact_values`` of them and the
  plan does not bin the column from its first value (``plan.binned``, `Plan.for_rows`: an engine's
  partition of a longer table) (then every statistic is computed exactly as in memory) or counts
  and value sums on the plan's fine bins (which contain the reference's decile edges, so PSI stays exact), plus counts at
  the reference's distinct values when it has at most
  ``defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES`` of them (Jensen-Shannon value by value);
* per **categorical** column: rows, missing and the count of every category, in order of
  first appearance (so chi-square, Jensen-Shannon, PSI and L-infinity are the in-memory values);
* a **bounded uniform sample** of whole rows: the ``plan.sample_rows`` rows with the smallest
  key, the key a hash of the row's position in its table (bottom-k sampling), so the merge of
  two samples is the sample of the union, whatever the split; it feeds the multivariate
  detectors, ``--label`` (CBPE, DLE), ``--segment-by`` and reference-derived thresholds;
* the first and last timestamp (for windows of ``--chunk-size`` rows with ``--timestamp``).

Pure: no I/O, no printing. A chunk must carry its position: `summarize(chunk, plan,
row_offset)` with ``row_offset`` the table row of the chunk's first row (engines pass each
partition's offset), so samples and windows do not depend on how the table was split.
"""
from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from driftline.detectors.batch.plan import Plan

__all__ = ["BatchSummary", "CategoricalSummary", "NumericSummary", "ROW", "KEY", "merge", "summarize",
           "row_keys", "sample_bound"]

NUMERIC = "numeric"
# Columns the sample adds to the rows it keeps: the row's position in its table, and its sampling key.
ROW = "__driftline_row"
KEY = "__driftline_key"
# Rows below which a chunk's columns are summarized in the calling thread: handing 23 columns to a pool costs
# about half a millisecond, more than their work on a small piece (short --chunk-period windows cut many).
PARALLEL_MIN_ROWS = 20_000
# Row positions keyed at a time by `sample_bound` (32 MB of keys).
SAMPLE_BOUND_STEP = 4_000_000


def row_keys(rows: np.ndarray, seed: int) -> np.ndarray:
    """A uint64 pseudo-random key per table row position (splitmix64): the bottom-k sample's order."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((0x9E3779B97F4A7C15 * (seed + 1)) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def sample_bound(first: int, stop: int, plan: "Plan") -> int | None:
    """`summarize`'s ``sample_below`` for the rows `first` to `stop` - 1 of a table: one above the largest key of
    their bottom-k sample (k = ``plan.sample_rows``); None when they are at most k rows (or the key is the largest).

    Keys depend on positions alone, so whoever knows a table's (or window's) rows knows its sample's keys: its
    partitions, given this bound, send just the rows the merged sample holds (k in all, however many partitions).
    """
    k = plan.sample_rows
    if stop - first <= k:
        return None
    best = np.empty(0, dtype=np.uint64)
    for begin in range(first, stop, SAMPLE_BOUND_STEP):
        keys = np.concatenate((best, row_keys(np.arange(begin, min(stop, begin + SAMPLE_BOUND_STEP)), plan.seed)))
        best = np.partition(keys, k - 1)[:k] if keys.size > k else keys
    top = int(best.max())
    return top + 1 if top < np.iinfo(np.uint64).max else None


@dataclass
class NumericSummary:
    """What a table part holds of one numeric column (see the module docstring)."""

    rows: int = 0
    missing: int = 0
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = np.inf
    max: float = -np.inf
    above: int = 0  # values above the reference's maximum (plan.maxima), for the KS bound at that point
    parts: list[np.ndarray] | None = None  # the finite values, while count <= plan.exact_values; else None
    counts: np.ndarray | None = None  # per plan fine bin, once the values are dropped
    sums: np.ndarray | None = None  # value sums per fine bin
    at_distinct: np.ndarray | None = None  # counts at plan.distinct values, then one count for any other value

    @property
    def exact(self) -> bool:
        return self.parts is not None

    @property
    def values(self) -> np.ndarray | None:
        """The finite values (table order within each merged part), or None once binned."""
        if self.parts is None:
            return None
        if len(self.parts) != 1:
            self.parts = [np.concatenate(self.parts) if self.parts else np.empty(0, dtype=np.float64)]
        return self.parts[0]

    def _bin(self, values: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = np.searchsorted(edges, values, side="right")  # bins [e_i, e_i+1), as two_sample.bin_counts
        size = edges.size + 1
        return (np.bincount(index, minlength=size).astype(np.int64),
                np.bincount(index, weights=values, minlength=size))

    def _distinct_counts(self, values: np.ndarray, distinct: np.ndarray) -> np.ndarray:
        position = np.searchsorted(distinct, values, side="left")
        inside = position < distinct.size
        hit = np.zeros(values.size, dtype=bool)
        hit[inside] = distinct[position[inside]] == values[inside]
        counts = np.bincount(position[hit], minlength=distinct.size).astype(np.int64)
        return np.append(counts, np.int64(values.size - int(hit.sum())))

    def binned(self, plan: "Plan", name: str) -> "NumericSummary":
        """This summary with its values folded into the plan's bins (the values dropped)."""
        if self.values is None:
            return self
        edges = plan.edges[name]
        counts, sums = self._bin(self.values, edges)
        distinct = plan.distinct.get(name)
        at_distinct = self._distinct_counts(self.values, distinct) if distinct is not None else None
        return NumericSummary(self.rows, self.missing, self.count, self.mean, self.m2, self.min, self.max,
                              self.above, None, counts, sums, at_distinct)

    @classmethod
    def of(cls, raw: np.ndarray, plan: "Plan", name: str) -> "NumericSummary":
        finite = raw if np.isfinite(raw).all() else raw[np.isfinite(raw)]
        out = cls(rows=int(raw.size), missing=int(raw.size - finite.size), count=int(finite.size))
        if finite.size:
            out.mean = float(finite.mean())
            centred = finite - out.mean
            out.m2 = float(np.dot(centred, centred))
            out.min, out.max = float(finite.min()), float(finite.max())
            top = plan.maxima.get(name)
            if top is not None and out.max > top:
                out.above = int((finite > top).sum())
        if out.count <= plan.exact_values and name not in plan.binned:
            # a copy, not a view: a view would keep the whole chunk's block alive
            out.parts = [finite.copy() if finite is raw else finite]
            return out
        if plan.edges.get(name) is not None:
            out.parts = [finite]
            return out.binned(plan, name)
        return out  # a scan without bins (plan.Plan.scan): the sample stands in for the values

    def merged(self, other: "NumericSummary", plan: "Plan", name: str) -> "NumericSummary":
        count = self.count + other.count
        if count:
            delta = other.mean - self.mean
            mean = self.mean + delta * other.count / count
            m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / count
        else:
            mean, m2 = 0.0, 0.0
        out = NumericSummary(self.rows + other.rows, self.missing + other.missing, count, mean, m2,
                             min(self.min, other.min), max(self.max, other.max), self.above + other.above)
        if self.parts is not None and other.parts is not None and count <= plan.exact_values:
            out.parts = [*self.parts, *other.parts]  # concatenated once, when read
            return out
        if plan.edges.get(name) is None:
            return out  # a scan without bins: no values, no bins
        a, b = self.binned(plan, name), other.binned(plan, name)
        out.counts = a.counts + b.counts  # type: ignore[operator]
        out.sums = a.sums + b.sums  # type: ignore[operator]
        if a.at_distinct is not None and b.at_distinct is not None:
            out.at_distinct = a.at_distinct + b.at_distinct
        return out

    @property
    def std(self) -> float:
        """Population standard deviation (ddof=0); numpy's own when the values are held."""
        if self.values is not None:
            return float(np.std(self.values)) if self.values.size else 0.0
        return float(np.sqrt(self.m2 / self.count)) if self.count else 0.0


@dataclass
class CategoricalSummary:
    """Rows, missing values and the count of every category (first appearance first) of one column."""

    rows: int = 0
    missing: int = 0
    counts: dict[Any, int] = field(default_factory=dict)

    @classmethod
    def of(cls, series: pd.Series) -> "CategoricalSummary":
        present = series.dropna()
        counts = present.value_counts(sort=False)
        return cls(int(len(series)), int(len(series) - len(present)),
                   dict(zip(counts.index.tolist(), counts.to_numpy().astype(np.int64).tolist())))

    def merged(self, other: "CategoricalSummary") -> "CategoricalSummary":
        counts = dict(self.counts)
        for key, count in other.counts.items():
            counts[key] = counts.get(key, 0) + count
        return CategoricalSummary(self.rows + other.rows, self.missing + other.missing, counts)


@dataclass
class BatchSummary:
    """The mergeable summary of some rows of one table (the reference, or one window of the current data)."""

    rows: int
    columns: dict[str, NumericSummary | CategoricalSummary]
    sample: pd.DataFrame  # at most plan.sample_rows rows: the plan's sample columns, ROW and KEY
    first_time: pd.Timestamp | None = None
    last_time: pd.Timestamp | None = None

    def sample_threshold(self, plan: "Plan") -> int | None:
        """The largest sampled key once the sample is full (rows with larger keys never enter it), else None."""
        if len(self.sample) < plan.sample_rows:
            return None
        return int(self.sample[KEY].max())

    def sample_frame(self) -> pd.DataFrame:
        """The sampled rows in table order, without the sampling columns (what in-memory code takes)."""
        return self.sample.sort_values(ROW, kind="stable").drop(columns=[ROW, KEY]).reset_index(drop=True)


def _bottom_k(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    if len(frame) <= k:
        return frame
    keys = frame[KEY].to_numpy()
    keep = np.argpartition(keys, k - 1)[:k]
    return frame.iloc[np.sort(keep)]


def _column(name: str, kind: str, series: pd.Series, plan: "Plan") -> NumericSummary | CategoricalSummary:
    if kind == NUMERIC:
        return NumericSummary.of(series.to_numpy(dtype=np.float64, na_value=np.nan), plan, name)
    return CategoricalSummary.of(series)


def summarize(chunk: pd.DataFrame, plan: "Plan", row_offset: int | np.ndarray = 0,
              times: pd.Series | None = None, sample_below: int | None = None,
              pool: Executor | None = None) -> BatchSummary:
    """One chunk's summary under `plan`; ``row_offset``: the table row of its first row (or each row's, an array).

    `times` (parsed timestamps of the chunk's rows, UTC) sets the first/last time. Columns the
    plan monitors must be in the chunk (callers check names once, with a clear error).
    `sample_below` (`BatchSummary.sample_threshold` of a full summary this one will be merged into)
    leaves out of the sample the rows whose key could not enter the merged sample anyway: the
    merge is the same, the chunk's sample costs nothing once the running sample is full.
    `pool` (threads) summarizes the columns of a chunk of at least ``PARALLEL_MIN_ROWS`` rows in parallel
    (numpy and Arrow release the GIL); the same result.
    """
    names = list(plan.kinds)
    series = [chunk[name] for name in names]  # here: columns are taken from the frame by one thread
    kinds = [plan.kinds[name] for name in names]
    plans = [plan] * len(names)
    parallel = pool is not None and len(names) > 1 and len(chunk) >= PARALLEL_MIN_ROWS
    parts = (pool.map(_column, names, kinds, series, plans) if parallel and pool is not None
             else map(_column, names, kinds, series, plans))
    columns: dict[str, NumericSummary | CategoricalSummary] = dict(zip(names, parts))
    rows = (np.asarray(row_offset, dtype=np.int64) if isinstance(row_offset, np.ndarray)
            else np.arange(row_offset, row_offset + len(chunk), dtype=np.int64))
    keys = row_keys(rows, plan.seed)
    if sample_below is not None:
        kept = np.flatnonzero(keys < np.uint64(sample_below))
        chunk_rows, rows, keys = kept, rows[kept], keys[kept]
    else:
        chunk_rows = None
    if keys.size > plan.sample_rows:
        keep = np.sort(np.argpartition(keys, plan.sample_rows - 1)[:plan.sample_rows])
        rows, keys = rows[keep], keys[keep]
        chunk_rows = keep if chunk_rows is None else chunk_rows[keep]
    part = chunk if chunk_rows is None else chunk.iloc[chunk_rows]
    sample = part[[c for c in plan.sample_columns if c in part.columns]].reset_index(drop=True)
    sample[ROW] = rows
    sample[KEY] = keys
    first = last = None
    if times is not None and len(times):
        first, last = times.min(), times.max()
    return BatchSummary(len(chunk), columns, sample, first, last)


def _merge_time(a: pd.Timestamp | None, b: pd.Timestamp | None, pick: Any) -> pd.Timestamp | None:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


def merge(a: BatchSummary, b: BatchSummary, plan: "Plan") -> BatchSummary:
    """The summary of the rows of `a` and `b` together (associative, commutative up to category order:
    merge in table order to keep the in-memory path's category order, and so its last floating-point bits)."""
    columns: dict[str, NumericSummary | CategoricalSummary] = {}
    for name, left in a.columns.items():
        right = b.columns[name]
        if isinstance(left, NumericSummary):
            assert isinstance(right, NumericSummary)
            columns[name] = left.merged(right, plan, name)
        else:
            assert isinstance(right, CategoricalSummary)
            columns[name] = left.merged(right)
    if len(a.sample) == 0:
        sample = b.sample
    elif len(b.sample) == 0:
        sample = a.sample
    else:
        sample = _bottom_k(pd.concat([a.sample, b.sample], ignore_index=True), plan.sample_rows)
    return BatchSummary(a.rows + b.rows, columns, sample, _merge_time(a.first_time, b.first_time, min),
                        _merge_time(a.last_time, b.last_time, max))
