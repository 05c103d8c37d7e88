"""Exact quantiles of numeric columns too long to hold, in a few passes of bin counts: `RankSearch`.

A quantile by numpy's default rule reads two order statistics (0-based ranks). Given bin edges whose
exact counts a pass over the table measured (`BinCounts`), each wanted rank lies in one known bin; when
the bins holding wanted ranks together hold at most ``budget`` values, one more pass collects their
values (`BinValues`) and every wanted order statistic is read off them exactly. Otherwise the range of
values each of those bins holds (a counting pass measures each bin's smallest and largest value too) is
cut into `SPLITS` equal-width parts and counted again: the bins start as the gaps between the distinct
values of a uniform row sample (about 1/``sample`` of the column each), so a pass or two suffices at any
size; a bin whose values are all one value (a spike of ties) is settled without collecting anything.

>>> import numpy as np
>>> values = np.random.default_rng(0).normal(size=10_000)
>>> search = RankSearch.start({"x": values[:100]}, {"x": values.size}, {"x": [0.1, 0.5, 0.9]}, budget=500)
>>> while not search.done:
...     if search.wants_values:
...         search = search.with_values({"x": search.values_fold().summarize_array("x", values)})
...     else:
...         search = search.with_counts({"x": search.counts_fold().summarize_array("x", values)})
>>> bool((search.quantiles("x") == np.quantile(values, [0.1, 0.5, 0.9])).all())
True

Pure: the passes themselves are run by the caller (`driftline.detectors.batch.baseline`), on a file's chunks
or on an engine's partitions; the folds here are picklable and small.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from driftline.detectors.stats import two_sample

__all__ = ["BinCounts", "BinValues", "RankSearch", "SPLITS"]

# Equal-width parts a bin holding a wanted rank is cut into when its values are too many to collect.
SPLITS = 64


def _finite(chunk: Any, name: str) -> np.ndarray:
    raw = chunk[name].to_numpy(dtype=np.float64, na_value=np.nan)
    return raw[np.isfinite(raw)]


Counted = tuple[np.ndarray, np.ndarray, np.ndarray]  # per bin: count, smallest value, largest value


@dataclass(frozen=True)
class BinCounts:
    """A pass: each column's exact count per bin (``[e_i, e_i+1)``, outer bins open), and each bin's value range."""

    edges: dict[str, np.ndarray]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.edges)

    def summarize_array(self, name: str, finite: np.ndarray) -> Counted:
        edges = self.edges[name]
        index = np.searchsorted(edges, finite, side="right")
        counts = np.bincount(index, minlength=edges.size + 1).astype(np.int64)
        low, high = np.full(edges.size + 1, np.inf), np.full(edges.size + 1, -np.inf)
        np.minimum.at(low, index, finite)
        np.maximum.at(high, index, finite)
        return counts, low, high

    def summarize(self, chunk: Any, row_offset: int = 0) -> dict[str, Counted]:
        return {name: self.summarize_array(name, _finite(chunk, name)) for name in self.edges}

    def merge(self, a: dict[str, Counted], b: dict[str, Counted]) -> dict[str, Counted]:
        return {name: (a[name][0] + b[name][0], np.minimum(a[name][1], b[name][1]), np.maximum(a[name][2], b[name][2]))
                for name in a}


@dataclass(frozen=True)
class BinValues:
    """A pass: each column's finite values that fall in the given bins."""

    edges: dict[str, np.ndarray]
    bins: dict[str, np.ndarray]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.edges)

    def summarize_array(self, name: str, finite: np.ndarray) -> np.ndarray:
        index = np.searchsorted(self.edges[name], finite, side="right")
        return finite[np.isin(index, self.bins[name])]

    def summarize(self, chunk: Any, row_offset: int = 0) -> dict[str, np.ndarray]:
        return {name: self.summarize_array(name, _finite(chunk, name)) for name in self.edges}

    def merge(self, a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {name: np.concatenate((a[name], b[name])) for name in a}


@dataclass(frozen=True)
class _Column:
    count: int  # finite values of the column
    probabilities: np.ndarray
    ranks: np.ndarray  # wanted 0-based ranks, sorted, unique
    edges: np.ndarray
    counts: np.ndarray | None = None  # exact, per bin of `edges`, once counted
    found: dict[int, float] = field(default_factory=dict)  # rank -> value


@dataclass(frozen=True)
class RankSearch:
    """The state of the search for each column's wanted order statistics (module docstring)."""

    columns: dict[str, _Column]
    budget: int

    @classmethod
    def start(cls, samples: Mapping[str, np.ndarray], counts: Mapping[str, int],
              probabilities: Mapping[str, Sequence[float] | np.ndarray], budget: int) -> "RankSearch":
        """`samples[name]`: some finite values of the column (a row sample's; its min and max should be among
        them); `counts[name]`: its finite values in all; `probabilities`: the quantiles wanted (numpy's rule)."""
        columns = {}
        for name, sample in samples.items():
            n = int(counts[name])
            p = np.asarray(probabilities[name], dtype=np.float64)
            positions = p * (n - 1)
            below = np.floor(positions).astype(np.int64)
            ranks = np.unique(np.concatenate((below, np.minimum(below + 1, n - 1))))
            edges = np.unique(np.asarray(sample, dtype=np.float64)[np.isfinite(sample)])
            columns[name] = _Column(n, p, ranks, edges)
        return cls(columns, budget)

    @property
    def done(self) -> bool:
        return all(len(column.found) == column.ranks.size for column in self.columns.values())

    @property
    def wants_values(self) -> bool:
        """Whether the next pass collects values (else it counts bins)."""
        pending = self._pending()
        return bool(pending) and all(column.counts is not None and self._held(column) <= self.budget
                                     for name, column in self.columns.items() if name in pending)

    def _pending(self) -> list[str]:
        return [name for name, column in self.columns.items() if len(column.found) < column.ranks.size]

    @staticmethod
    def _bins(column: _Column) -> tuple[np.ndarray, np.ndarray]:
        """(the bin of each wanted rank not yet found, the count of values before each bin)."""
        assert column.counts is not None
        starts = np.concatenate(([0], np.cumsum(column.counts)))
        missing = np.array([r for r in column.ranks.tolist() if r not in column.found], dtype=np.int64)
        return np.searchsorted(starts, missing, side="right") - 1, starts

    def _held(self, column: _Column) -> int:
        bins, _ = self._bins(column)
        return int(column.counts[np.unique(bins)].sum())  # type: ignore[index]

    def counts_fold(self) -> BinCounts:
        return BinCounts({name: self.columns[name].edges for name in self._pending()})

    def values_fold(self) -> BinValues:
        pending = self._pending()
        return BinValues({name: self.columns[name].edges for name in pending},
                         {name: np.unique(self._bins(self.columns[name])[0]) for name in pending})

    def with_counts(self, counted: Mapping[str, Counted]) -> "RankSearch":
        """The state after a `counts_fold` pass: ranks in bins of one value found; bins too full cut finer."""
        columns = dict(self.columns)
        for name, (counts, lows, highs) in counted.items():
            column = replace(columns[name], counts=np.asarray(counts, dtype=np.int64))
            bins, _ = self._bins(column)
            found = dict(column.found)
            for rank, index in zip([r for r in column.ranks.tolist() if r not in column.found], bins.tolist()):
                if lows[index] == highs[index]:  # every value of the bin is this one (ties, or [max, inf))
                    found[rank] = float(lows[index])
            column = replace(column, found=found)
            if self._held(column) > self.budget:
                cuts = []
                for index in np.unique(self._bins(column)[0]).tolist():
                    low, high = float(lows[index]), float(highs[index])
                    share = np.arange(1, SPLITS) / SPLITS
                    inner = low * (1 - share) + high * share  # no overflow, whatever the range
                    cuts.append(np.concatenate(([low, high], inner[(inner > low) & (inner < high)])))
                column = replace(column, edges=np.unique(np.concatenate((column.edges, *cuts))), counts=None)
            columns[name] = column
        return replace(self, columns=columns)

    def with_values(self, values: Mapping[str, np.ndarray]) -> "RankSearch":
        """The state after a `values_fold` pass: every wanted rank found."""
        columns = dict(self.columns)
        for name, collected in values.items():
            column = columns[name]
            bins, starts = self._bins(column)
            kept = np.unique(bins)
            ordered = np.sort(collected)
            # the collected values are the kept bins' values, bin after bin once sorted
            before = dict(zip(kept.tolist(), np.concatenate(([0], np.cumsum(column.counts[kept])[:-1])).tolist()))  # type: ignore[index]
            if ordered.size != int(column.counts[kept].sum()):  # type: ignore[index]
                raise ValueError(f"{name}: {ordered.size} values collected for bins holding "
                                 f"{int(column.counts[kept].sum())}: the table changed between passes")  # type: ignore[index]
            found = dict(column.found)
            for rank, index in zip([r for r in column.ranks.tolist() if r not in column.found], bins.tolist()):
                found[rank] = float(ordered[before[index] + rank - int(starts[index])])
            columns[name] = replace(column, found=found)
        return replace(self, columns=columns)

    def quantiles(self, name: str, probabilities: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
        """`np.quantile(values, probabilities)` of the column, bit for bit (default: the probabilities asked)."""
        column = self.columns[name]
        p = column.probabilities if probabilities is None else np.asarray(probabilities, dtype=np.float64)
        return two_sample.quantiles_of_order_statistics(
            column.count, p, lambda ranks: np.array([column.found[int(r)] for r in ranks], dtype=np.float64))
