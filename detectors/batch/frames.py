"""`detect` on DataFrames held by an engine (pandas, Spark, Dask): `detect_frames(reference, current)`.

The engine (`driftline.engines`) folds each partition of a table into the mergeable summaries of
`driftline.detectors.batch.summary` where the partition lives; this module says what to fold
(`TableFold` for the reference, `WindowFold` for the current data, split into its windows) and merges
what comes back in partition order, then `finish`es as the single-machine run does
(`driftline.detectors.batch.streamed`): same options, same errors, same JSON. Passes over each table:
one that counts each partition's rows (a row's position in the table keys the bounded samples and the
``--chunk-size`` windows), then the streamed run's passes. Nothing here imports pyspark or dask.

>>> import pandas as pd
>>> reference = pd.DataFrame({"x": [float(i % 10) for i in range(200)]})
>>> current = pd.DataFrame({"x": [float(i % 10) + 5 for i in range(200)]})
>>> detect_frames(reference, current, multivariate=False)["windows"][0]["drifted_features"]
['x']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

from driftline import defaults
from driftline.detectors.batch.engine import SCHEMA_VERSION, default_workers, period_offset
from driftline.detectors.batch.finish import Finisher, Settings, WindowSummary
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.passes import merge_in_order, partition_offsets
from driftline.detectors.batch.streamed import scan_plan
from driftline.detectors.batch.windowing import (check_chunk, iso_time, needs_origin, parse_timestamps,
                                                 period_labels, window_bounds)
from driftline.detectors.batch.summary import BatchSummary, merge, summarize
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.engines import Engine, Progress, engine_for
from driftline.errors import UserError

__all__ = ["HEAD_ROWS", "TableFold", "WindowFold", "detect_frames"]

# Rows of each table read first to tell the columns' kinds (the streamed run reads its first chunk).
HEAD_ROWS = 10_000


@dataclass(frozen=True)
class TableFold:
    """A whole table (the reference) into one summary under `plan`."""

    plan: Plan
    where: str

    @property
    def columns(self) -> tuple[str, ...]:
        return self.plan.sample_columns

    def summarize(self, chunk: pd.DataFrame, row_offset: int) -> BatchSummary:
        return summarize(check_chunk(chunk, self.plan, self.where), self.plan, row_offset)

    def merge(self, a: BatchSummary, b: BatchSummary) -> BatchSummary:
        return merge(a, b, self.plan)


@dataclass(frozen=True)
class WindowFold:
    """The current data into one summary per window: its number (no chunking: 0; ``--chunk-size``: row // size)
    or its period's label (``--chunk-period``)."""

    plan: Plan
    where: str
    chunk_size: int | None = None
    offset: pd.DateOffset | None = None
    origin: pd.Timestamp = pd.Timestamp(0)
    timestamp: str | None = None

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
                parts[label] = summarize(chunk.iloc[positions], self.plan, row_offset + positions)
            return parts
        size = self.chunk_size or row_offset + len(chunk) + 1  # no chunking: one window
        begin = 0
        while begin < len(chunk):
            number = (row_offset + begin) // size
            end = min(len(chunk), (number + 1) * size - row_offset)
            piece_times = None if times is None else times.iloc[begin:end]
            parts[number] = summarize(chunk.iloc[begin:end], self.plan, row_offset + begin, piece_times)
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


def detect_frames(reference: Any, current: Any, *, engine: Engine | None = None, chunk_size: int | None = None,
                  chunk_period: str | None = None, timestamp: str | None = None, categorical: Sequence[str] = (),
                  prediction: str | None = None, ignore: Sequence[str] = (), thresholds: DriftThresholds | None = None,
                  on_window: Callable[[int, int, int], None] | None = None, on_progress: Progress | None = None,
                  workers: int | None = None, label: str | None = None,
                  performance_thresholds: WindowThresholds | None = None, segment_by: str | None = None,
                  multivariate: MultivariateThresholds | bool = True, exact_values: int = defaults.BATCH_EXACT_VALUES,
                  sample_rows: int = defaults.BATCH_SAMPLE_ROWS,
                  fine_bins: int = defaults.BATCH_FINE_BINS, prediction_class: str | None = None) -> dict[str, Any]:
    """`driftline.detectors.batch.engine.detect`'s result for two pandas, Spark or Dask DataFrames (both of one
    kind), computed where they live. `engine`: default `driftline.engines.engine_for(reference)` (a Dask
    DataFrame needs a running ``distributed`` client). `on_progress(what, done, total)` follows each pass
    over a table's partitions; `on_window(done, total, rows)` each judged window. The other options are
    `detect`'s (and `detect_streamed`'s bounds)."""
    engine = engine or engine_for(reference)
    thresholds = thresholds or DriftThresholds()
    offset = period_offset(chunk_size, chunk_period, timestamp)
    reference_head, current_head = engine.head(reference, HEAD_ROWS), engine.head(current, HEAD_ROWS)
    for head, where in ((reference_head, "reference"), (current_head, "current data")):
        if not len(head):
            raise UserError(f"the {where} has no rows")
        head.columns = [str(c) for c in head.columns]
    kinds, prediction, probabilities, scan = scan_plan(
        reference_head, current_head, categorical=categorical, prediction=prediction, ignore=ignore,
        timestamp=timestamp, label=label, segment_by=segment_by, exact_values=exact_values, sample_rows=sample_rows,
        fine_bins=fine_bins, prediction_class=prediction_class)
    reference_offsets = partition_offsets(engine.partition_rows(reference), "reference")
    fold = TableFold(scan, "reference")
    reference_summary = merge_in_order(engine.fold(reference, fold, reference_offsets, "reference", on_progress), fold)
    plan = scan.with_reference(reference_summary)
    if plan.needs_rescan(reference_summary):
        fold = TableFold(plan, "reference")
        reference_summary = merge_in_order(engine.fold(reference, fold, reference_offsets, "reference (second pass)",
                                                  on_progress), fold)
    finisher = Finisher(plan, reference_summary, Settings(
        prediction=prediction, probabilities=tuple(probabilities) if probabilities else None, label=label,
        prediction_class=prediction_class, segment_by=segment_by, thresholds=thresholds,
        performance_thresholds=performance_thresholds, multivariate=multivariate,
        workers=default_workers() if workers is None else workers))
    current_rows = engine.partition_rows(current)
    current_offsets = partition_offsets(current_rows, "current data")
    origin = pd.Timestamp(0)  # any midnight, for periods that divide a day
    if offset is not None and needs_origin(offset):
        assert timestamp is not None
        first = FirstTime(timestamp)
        origin = pd.Timestamp(merge_in_order(engine.fold(current, first, current_offsets, "timestamps", on_progress),
                                         first)).tz_localize(None).normalize()
    windows_fold = WindowFold(plan, "current data", chunk_size, offset, origin, timestamp)
    merged: dict[Any, BatchSummary] = merge_in_order(
        engine.fold(current, windows_fold, current_offsets, "current data", on_progress), windows_fold)
    if offset is not None:
        windows = [WindowSummary(index, merged[key], iso_time(key.tz_localize("UTC")),
                                 iso_time(key.tz_localize("UTC") + offset)) for index, key in enumerate(sorted(merged))]
    else:
        windows = [WindowSummary(number, merged[number], *window_bounds(merged[number])) for number in sorted(merged)]
    results: list[dict[str, Any]] = []
    for window in windows:
        results.append(finisher.window(window))
        if on_window is not None:
            on_window(len(results), len(windows), window.summary.rows)
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(reference_summary.rows), "windows": results}
