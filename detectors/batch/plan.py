"""The plan of a bounded-memory batch run: what `summarize` counts, built from the reference in a first pass.

Two passes over the reference at most:

1. **scan**: ``Plan.scan(kinds, ...)`` has no bins; the reference's chunks are summarized
   under it and merged (`driftline.detectors.batch.summary`). A numeric column whose reference
   holds at most ``exact_values`` finite values keeps them all.
2. ``scan_plan.with_reference(merged_scan)`` is the plan of the run: per numeric column the
   reference's decile edges (``two_sample.decile_edges``, the in-memory PSI bins), its distinct
   values when there are at most ``defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES`` of them,
   and fine bin edges at ``fine_bins`` reference quantiles with the deciles among them. Computed
   from the values themselves when the scan kept them (exact); else from the scan's row sample
   (``sample_rows`` rows; the deciles are then the sample's). ``needs_rescan(merged_scan)`` says
   whether the reference must be summarized again under the new plan (only when some column's
   values were not kept); otherwise `rebase` is the reference's summary.
3. **exact deciles** of a column whose values were not kept (three more passes, engines reduce each):
   summarize the reference under the plan (exact counts on the sample's fine bins),
   ``plan.decile_ranks(that)`` names the few fine bins that hold the order statistics the deciles
   read, ``plan.values_in_bins(chunk, bins)`` collects their values chunk by chunk, and
   ``plan.with_exact_deciles(that, ranks, collected)`` is the final plan, under which the reference
   is summarized once more. PSI is then exact at any size.

Then every chunk of the current data is summarized under the plan, and `finish` compares.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from driftline import defaults
from driftline.detectors.batch.summary import NUMERIC, BatchSummary, NumericSummary
from driftline.detectors.stats import two_sample

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    """What to count per column (see the module docstring). Picklable, small: engines ship it to workers."""

    kinds: dict[str, str]  # monitored column -> "numeric" / "categorical" (features and the prediction)
    sample_columns: tuple[str, ...]  # the columns the row sample keeps (monitored ones and e.g. label, segment)
    exact_values: int = defaults.BATCH_EXACT_VALUES
    sample_rows: int = defaults.BATCH_SAMPLE_ROWS
    fine_bins: int = defaults.BATCH_FINE_BINS
    seed: int = 0
    edges: dict[str, np.ndarray | None] = field(default_factory=dict)  # numeric: fine edges; None in a scan
    deciles: dict[str, np.ndarray] = field(default_factory=dict)  # numeric: the PSI edges, a subset of `edges`
    distinct: dict[str, np.ndarray | None] = field(default_factory=dict)  # numeric: <= 20 reference values, or None
    reference_std: dict[str, float] = field(default_factory=dict)  # numeric: two_sample.reference_std of the reference
    maxima: dict[str, float] = field(default_factory=dict)  # numeric: the reference's largest finite value
    binned: frozenset[str] = frozenset()  # numeric columns whose values are never kept (`for_rows`)

    @classmethod
    def scan(cls, kinds: Mapping[str, str], sample_columns: Sequence[str] = (), *,
             exact_values: int = defaults.BATCH_EXACT_VALUES, sample_rows: int = defaults.BATCH_SAMPLE_ROWS,
             fine_bins: int = defaults.BATCH_FINE_BINS, seed: int = 0) -> "Plan":
        """The first pass's plan: no bins yet. `sample_columns` beyond the monitored ones are kept in samples."""
        if exact_values < 0 or sample_rows < 1 or fine_bins < defaults.PSI_NUMERIC_BINS:
            raise ValueError("exact_values >= 0, sample_rows >= 1 and fine_bins >= PSI_NUMERIC_BINS please")
        columns = tuple(dict.fromkeys([*kinds, *sample_columns]))
        return cls(dict(kinds), columns, exact_values, sample_rows, fine_bins, seed)

    @property
    def is_scan(self) -> bool:
        return not self.deciles and any(kind == NUMERIC for kind in self.kinds.values())

    def with_reference(self, reference: BatchSummary) -> "Plan":
        """The run's plan, from the scan's merged summary of the whole reference."""
        edges: dict[str, np.ndarray | None] = {}
        deciles: dict[str, np.ndarray] = {}
        distinct: dict[str, np.ndarray | None] = {}
        stds: dict[str, float] = {}
        maxima: dict[str, float] = {}
        sample = reference.sample
        for name, kind in self.kinds.items():
            if kind != NUMERIC:
                continue
            column = reference.columns[name]
            assert isinstance(column, NumericSummary)
            if column.exact:
                values = np.sort(column.values)  # type: ignore[arg-type]
                stds[name] = two_sample.reference_std(values)
            else:  # more reference values than a summary keeps: the row sample stands in
                values = np.sort(two_sample.clean_numeric(sample[name].to_numpy(dtype=np.float64, na_value=np.nan)))
                stds[name] = max(column.std, defaults.WASSERSTEIN_MIN_STD)
            deciles[name] = two_sample.decile_edges(values)
            unique = np.unique(values)
            distinct[name] = unique if unique.size <= defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES else None
            fine = (two_sample.quantiles_sorted(values, np.arange(1, self.fine_bins) / self.fine_bins)
                    if values.size else np.empty(0))
            edges[name] = np.unique(np.concatenate((fine, deciles[name])))
            if column.count:
                maxima[name] = column.max
        return replace(self, edges=edges, deciles=deciles, distinct=distinct, reference_std=stds, maxima=maxima)

    def for_rows(self, rows: int) -> "Plan":
        """The plan a partition of a table (or window) of `rows` rows is summarized under: every numeric column
        on the fine bins from its first value when `rows` exceed ``exact_values`` (its values could not all be
        kept: a partition sends counts, not values), else this plan."""
        if rows <= self.exact_values:
            return self
        return replace(self, binned=frozenset(name for name, kind in self.kinds.items() if kind == NUMERIC))

    def short_columns(self, summary: BatchSummary) -> frozenset[str]:
        """The numeric columns of `summary` that a `for_rows` plan binned though they hold at most ``exact_values``
        finite values (many missing): the single-machine run keeps those values, so a second pass must too."""
        return frozenset(name for name, column in summary.columns.items()
                         if isinstance(column, NumericSummary) and not column.exact and name in self.binned
                         and column.count <= self.exact_values)

    def keeping(self, names: frozenset[str]) -> "Plan":
        """This plan with the numeric columns `names` kept as values again (see `short_columns`)."""
        return replace(self, binned=self.binned - names)

    def decile_ranks(self, reference: BatchSummary) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per numeric column whose values were not kept: (the 0-based ranks its decile edges read, the fine bin
        of this plan holding each), from `reference` summarized under this plan (its fine counts are exact)."""
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        probabilities = np.arange(1, defaults.PSI_NUMERIC_BINS) / defaults.PSI_NUMERIC_BINS
        for name, column in reference.columns.items():
            if not isinstance(column, NumericSummary) or column.exact or not column.count:
                continue
            positions = probabilities * (column.count - 1)
            below = np.floor(positions).astype(np.intp)
            ranks = np.unique(np.concatenate((below, np.minimum(below + 1, column.count - 1))))
            starts = np.concatenate(([0], np.cumsum(column.counts)))  # type: ignore[arg-type]
            out[name] = (ranks, np.searchsorted(starts, ranks, side="right") - 1)
        return out

    def values_in_bins(self, chunk: "pd.DataFrame", bins: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The finite values of `chunk` that fall in the given fine bins of each column (a refinement pass)."""
        out = {}
        for name, wanted in bins.items():
            raw = chunk[name].to_numpy(dtype=np.float64, na_value=np.nan)
            finite = raw[np.isfinite(raw)]
            index = np.searchsorted(self.edges[name], finite, side="right")  # type: ignore[arg-type]
            out[name] = finite[np.isin(index, wanted)]
        return out

    def with_exact_deciles(self, reference: BatchSummary, ranks: Mapping[str, tuple[np.ndarray, np.ndarray]],
                           collected: Mapping[str, np.ndarray]) -> "Plan":
        """This plan with each refined column's decile edges exact (`two_sample.decile_edges` of all its values).

        `collected[name]`: every value of the column in the bins `decile_ranks` named (all chunks together).
        The exact deciles join the fine edges, so the reference must then be summarized again under the result.
        """
        edges, deciles = dict(self.edges), dict(self.deciles)
        probabilities = np.arange(1, defaults.PSI_NUMERIC_BINS) / defaults.PSI_NUMERIC_BINS
        for name, (wanted, bins) in ranks.items():
            column = reference.columns[name]
            assert isinstance(column, NumericSummary) and column.counts is not None
            starts = np.concatenate(([0], np.cumsum(column.counts)))
            inside = np.sort(collected[name])
            index = np.searchsorted(self.edges[name], inside, side="right")  # type: ignore[arg-type]
            first = {int(b): int(np.searchsorted(index, b, side="left")) for b in np.unique(bins)}
            lookup = {int(r): inside[first[int(b)] + int(r - starts[b])] for r, b in zip(wanted, bins)}
            exact = np.unique(two_sample.quantiles_of_order_statistics(
                column.count, probabilities, lambda ranks: np.array([lookup[int(r)] for r in ranks])))
            deciles[name] = exact
            edges[name] = np.unique(np.concatenate((self.edges[name], exact)))  # type: ignore[arg-type]
        return replace(self, edges=edges, deciles=deciles)

    def needs_rescan(self, reference: BatchSummary) -> bool:
        """Whether the reference must be summarized again under this (run) plan: some column was not kept whole."""
        return any(isinstance(column, NumericSummary) and not column.exact for column in reference.columns.values())

    def rebase(self, reference: BatchSummary) -> BatchSummary:
        """The scan's summary as the reference's summary under this plan (all values kept: nothing to redo)."""
        if self.needs_rescan(reference):
            raise ValueError("the reference's scan dropped values: summarize the reference again under the plan")
        return reference
