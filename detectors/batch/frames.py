"""`detect` on DataFrames held by an engine (pandas, Spark, Dask): `detect_frames(reference, current)`.

The engine (`driftline.engines`) folds each partition of a table into the mergeable summaries of
`driftline.detectors.batch.summary` where the partition lives; this module says what to fold
(`TableFold` for the reference, `WindowFold` for the current data, split into its windows) and merges
what comes back in partition order, then `finish`es as the single-machine run does
(`driftline.detectors.batch.streamed`): same options, same errors, same JSON. Passes over each table:
one that counts each partition's rows (a row's position in the table keys the bounded samples and the
``--chunk-size`` windows), then the streamed run's passes. Nothing here imports pyspark or dask.

What a partition sends back is bounded, not its rows: a table (or window) of more than ``exact_values``
rows is folded under `Plan.for_rows` (numeric columns as fine-bin counts from the first value, never
the values), and its row sample only holds the rows the merged sample keeps (`summary.sample_bound`:
``sample_rows`` rows over all partitions). A numeric column that then holds at most ``exact_values``
finite values (most of it missing) is folded once more keeping them, as the single-machine run
does, and a longer reference column gets its exact deciles the same way (`BinValues`: the values of
the few fine bins they read), so the JSON is the same.

>>> import pandas as pd
>>> reference = pd.DataFrame({"x": [float(i % 10) for i in range(200)]})
>>> current = pd.DataFrame({"x": [float(i % 10) + 5 for i in range(200)]})
>>> detect_frames(reference, current, judging=Judging(multivariate=False))["windows"][0]["drifted_features"]
['x']
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import SCHEMA_VERSION, ColumnRoles, Judging, Windowing, default_workers, \
    period_offset
from driftline.detectors.batch.finish import Finisher, Settings, WindowSummary
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.passes import merge_in_order, partition_offsets
from driftline.detectors.batch.streamed import Budget, ProgressHooks, scan_plan
from driftline.detectors.batch.windowing import (check_chunk, iso_time, needs_origin, parse_timestamps,
                                                 period_labels, window_bounds)
from driftline.detectors.batch.summary import BatchSummary, merge, sample_bound, summarize
from driftline.engines import Engine, Progress, engine_for
from driftline.errors import UserError

__all__ = ["HEAD_ROWS", "BinValues", "TableFold", "WindowFold", "detect_frames"]

# Rows of each table read first to tell the columns' kinds (the streamed run reads its first chunk).
HEAD_ROWS = 10_000


@dataclass(frozen=True)
class TableFold:
    """A whole table (the reference) into one summary under `plan`."""

    plan: Plan
    where: str
    sample_below: int | None = None  # `summary.sample_bound` of the whole table

    @property
    def columns(self) -> tuple[str, ...]:
        return self.plan.sample_columns

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> BatchSummary:
        return summarize(check_chunk(chunk, self.plan, self.where), self.plan, row_offset,
                         sample_below=self.sample_below)

    def merge(self, a: BatchSummary, b: BatchSummary) -> BatchSummary:
        return merge(a, b, self.plan)


@dataclass(frozen=True)
class WindowFold:
    """The current data into one summary per window: its number (no chunking: 0; ``--chunk-size``: row // size)
    or its period's label (``--chunk-period``). `only`: just these windows, each under its own plan (a pass
    that keeps values `plan` binned); `sample_below`: `summary.sample_bound` of each window whose rows are known."""

    plan: Plan
    where: str
    chunk_size: int | None = None
    offset: pd.DateOffset | None = None
    origin: pd.Timestamp = pd.Timestamp(0)
    timestamp: str | None = None
    only: Mapping[Any, Plan] | None = None
    sample_below: Mapping[Any, int] = field(default_factory=dict)

    def _plan(self, key: Any) -> Plan | None:
        return self.plan if self.only is None else self.only.get(key)

    @property
    def columns(self) -> tuple[str, ...]:
        extra = (self.timestamp,) if self.timestamp and self.timestamp not in self.plan.sample_columns else ()
        return (*self.plan.sample_columns, *extra)

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> dict[Any, BatchSummary]:
        chunk = check_chunk(chunk, self.plan, self.where)
        times = parse_timestamps(chunk[self.timestamp], self.timestamp) if self.timestamp else None
        parts: dict[Any, BatchSummary] = {}
        if self.offset is not None:
            assert times is not None
            for label, positions in period_labels(times, self.offset, self.origin):
                plan = self._plan(label)
                if plan is not None:
                    parts[label] = summarize(chunk.iloc[positions], plan, row_offset + positions)
            return parts
        size = self.chunk_size or row_offset + len(chunk) + 1  # no chunking: one window
        begin = 0
        while begin < len(chunk):
            number = (row_offset + begin) // size
            end = min(len(chunk), (number + 1) * size - row_offset)
            piece_times = None if times is None else times.iloc[begin:end]
            plan = self._plan(number)
            if plan is not None:
                parts[number] = summarize(chunk.iloc[begin:end], plan, row_offset + begin, piece_times,
                                          sample_below=self.sample_below.get(number))
            begin = end
        return parts

    def merge(self, a: dict[Any, BatchSummary], b: dict[Any, BatchSummary]) -> dict[Any, BatchSummary]:
        """`a`'s windows with `b`'s (later rows) merged in."""
        out = dict(a)
        for key, part in b.items():
            out[key] = merge(out[key], part, self.plan) if key in out else part
        return out


@dataclass(frozen=True)
class FirstTime:
    """The earliest timestamp of a table (``--chunk-period`` bins some periods from its midnight)."""

    column: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> pd.Timestamp:
        return parse_timestamps(chunk[self.column], self.column).min()

    def merge(self, a: pd.Timestamp, b: pd.Timestamp) -> pd.Timestamp:
        return min(a, b)


@dataclass(frozen=True)
class BinValues:
    """The finite values of some fine bins per column (`Plan.values_in_bins`): the reference's exact deciles."""

    plan: Plan
    bins: Mapping[str, Any]  # column -> the fine bins wanted (numpy array)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.bins)

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> dict[str, Any]:
        return self.plan.values_in_bins(chunk, self.bins)

    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        return {name: np.concatenate((a[name], b[name])) for name in a}


class _TablePass:
    """Passes over the reference, each under `Plan.for_rows`; columns found short keep their values from then on."""

    def __init__(self, engine: Engine, frame: Any, offsets: Sequence[int], rows: int, on_progress: Progress | None):
        self.engine, self.frame, self.offsets, self.rows, self.on_progress = engine, frame, offsets, rows, on_progress
        self.kept: frozenset[str] = frozenset()

    def fold(self, plan: Plan, what: str) -> BatchSummary:
        bounded = plan.for_rows(self.rows).keeping(self.kept)
        below = sample_bound(0, self.rows, plan)
        fold = TableFold(bounded, "reference", below)
        summary = merge_in_order(self.engine.fold(self.frame, fold, self.offsets, what, self.on_progress), fold)
        short = bounded.short_columns(summary)
        if short:  # few finite values in a long column: kept, as the single-machine run keeps them
            self.kept |= short
            fold = TableFold(bounded.keeping(short), "reference", below)
            summary = merge_in_order(self.engine.fold(self.frame, fold, self.offsets, f"{what} (values kept)",
                                                      self.on_progress), fold)
        return summary


def _fold_windows(engine: Engine, frame: Any, offsets: Sequence[int], rows: int, on_progress: Progress | None,
                  fold: WindowFold) -> dict[Any, BatchSummary]:
    """The current data's windows, each under `Plan.for_rows` of its rows (a period's: the table's), then once more
    for the windows with short columns (`Plan.short_columns`), keeping their values."""
    plan = fold.plan
    size = fold.chunk_size or rows
    below: dict[Any, int] = {}
    if fold.offset is None:  # windows of known rows: their samples' bounds
        for number in range(-(-rows // size)):
            bound = sample_bound(number * size, min(rows, (number + 1) * size), plan)
            if bound is not None:
                below[number] = bound
    bounded = replace(fold, plan=plan.for_rows(min(size, rows)), sample_below=below)
    merged: dict[Any, BatchSummary] = merge_in_order(
        engine.fold(frame, bounded, offsets, "current data", on_progress), bounded)
    redo = {key: bounded.plan.keeping(short) for key, summary in merged.items()
            if (short := bounded.plan.short_columns(summary))}
    if redo:
        again = replace(bounded, only=redo)
        merged.update(merge_in_order(engine.fold(frame, again, offsets, "current data (values kept)", on_progress),
                                     again))
    return merged


def detect_frames(reference: Any, current: Any, *, engine: Engine | None = None,
                  columns: ColumnRoles = ColumnRoles(), windowing: Windowing = Windowing(),
                  judging: Judging = Judging(), budget: Budget = Budget(),
                  hooks: ProgressHooks = ProgressHooks()) -> dict[str, Any]:
    """`driftline.detectors.batch.engine.detect`'s result for two pandas, Spark or Dask DataFrames (both of one
    kind), computed where they live. `engine`: default `driftline.engines.engine_for(reference)` (a Dask
    DataFrame needs a running ``distributed`` client). ``hooks.on_progress(what, done, total)`` follows each pass
    over a table's partitions; ``hooks.on_window(done, total, rows)`` each judged window. The other options are
    `detect`'s (and `detect_streamed`'s `budget`)."""
    engine = engine or engine_for(reference)
    judging = judging.resolved()
    chunk_size, timestamp, on_progress = windowing.chunk_size, columns.timestamp, hooks.on_progress
    offset = period_offset(chunk_size, windowing.chunk_period, timestamp)
    reference_head, current_head = engine.head(reference, HEAD_ROWS), engine.head(current, HEAD_ROWS)
    for head, where in ((reference_head, "reference"), (current_head, "current data")):
        if not len(head):
            raise UserError(f"the {where} has no rows")
        head.columns = [str(c) for c in head.columns]
    kinds, prediction, probabilities, scan = scan_plan(reference_head, current_head, columns, budget)
    reference_rows = engine.partition_rows(reference)
    reference_offsets = partition_offsets(reference_rows, "reference")
    table = _TablePass(engine, reference, reference_offsets, sum(reference_rows), on_progress)
    reference_summary = table.fold(scan, "reference")
    plan = scan.with_reference(reference_summary)
    if plan.needs_rescan(reference_summary):  # a column too long to keep: its deciles found exactly, as streamed
        reference_summary = table.fold(plan, "reference (second pass)")
        ranks = plan.decile_ranks(reference_summary)
        if ranks:
            values = BinValues(plan, {name: np.unique(where) for name, (_, where) in ranks.items()})
            plan = plan.with_exact_deciles(reference_summary, ranks, merge_in_order(
                engine.fold(reference, values, reference_offsets, "reference (deciles)", on_progress), values))
            reference_summary = table.fold(plan, "reference (third pass)")
    finisher = Finisher(plan, reference_summary, Settings.resolved(
        columns, judging, prediction, probabilities, default_workers() if budget.workers is None else budget.workers))
    current_rows = engine.partition_rows(current)
    current_offsets = partition_offsets(current_rows, "current data")
    origin = pd.Timestamp(0)  # any midnight, for periods that divide a day
    if offset is not None and needs_origin(offset):
        assert timestamp is not None
        first = FirstTime(timestamp)
        origin = pd.Timestamp(merge_in_order(engine.fold(current, first, current_offsets, "timestamps", on_progress),
                                         first)).tz_localize(None).normalize()
    merged = _fold_windows(engine, current, current_offsets, sum(current_rows), on_progress,
                           WindowFold(plan, "current data", chunk_size, offset, origin, timestamp))
    if offset is not None:
        windows = [WindowSummary(index, merged[key], iso_time(key.tz_localize("UTC")),
                                 iso_time(key.tz_localize("UTC") + offset)) for index, key in enumerate(sorted(merged))]
    else:
        windows = [WindowSummary(number, merged[number], *window_bounds(merged[number])) for number in sorted(merged)]
    results: list[dict[str, Any]] = []
    for window in windows:
        results.append(finisher.window(window))
        if hooks.on_window is not None:
            hooks.on_window(len(results), len(windows), window.summary.rows)
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(reference_summary.rows), "windows": results}
