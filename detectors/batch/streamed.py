"""Bounded-memory `detect`: tables as streams of chunks, through `summarize` / `merge` / `finish`.

`detect_streamed` takes two callables that each open a fresh iterator of DataFrame chunks
(the command reads Parquet row groups or CSV blocks; engines and tests pass anything) and
returns the same dict as `driftline.detectors.batch.engine.detect` on the whole tables
(`driftline.detectors.batch.finish` says what is exact and what carries a bound). Passes:
the reference once (twice when a numeric column holds more than ``exact_values`` values),
the current data once (plus a timestamp-only scan for a ``--chunk-period`` that does not
divide a day). Memory: a chunk and the next (`read_ahead`; the first two of the current data
while the reference is read), the reference's summary, and the summaries of the windows
still open: one for ``--chunk-size`` (a window is judged as soon as its last row is read),
all of them for ``--chunk-period`` (the held values of all open windows together are kept
under one window's budget by folding the largest into bins). With `embeddings`
(`driftline.detectors.batch.embeddings.StreamedEmbeddings`), one more pass over the reference
gathers its vectors for the fit, and each window's vectors are folded into its summaries as
they are read.
"""
from __future__ import annotations

import itertools
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.detectors.batch.embeddings import StreamedEmbeddings
from driftline.detectors.batch.engine import (SCHEMA_VERSION, ColumnRoles, Judging, Windowing, default_workers,
                                              monitored_columns, period_offset)
from driftline.detectors.batch.finish import Finisher, Settings, WindowSummary
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.summary import NUMERIC, BatchSummary, NumericSummary, merge, summarize
from driftline.detectors.stats.multivariate import preload_classifier
from driftline.detectors.batch.windowing import (check_chunk, iso_time, needs_origin, parse_timestamps,
                                                 period_labels, window_bounds)
from driftline.errors import UserError

__all__ = ["Budget", "ProgressHooks", "detect_streamed", "read_ahead", "summarize_table"]

Chunks = Callable[[], Iterable[pd.DataFrame]]


@dataclass(frozen=True)
class Budget:
    """What a bounded-memory run may spend: `workers` threads (None: `default_workers()`), numeric columns' values
    held exactly up to `exact_values` (then fine bins, `fine_bins` of them), and `sample_rows` sampled rows."""

    workers: int | None = None
    exact_values: int = defaults.BATCH_EXACT_VALUES
    sample_rows: int = defaults.BATCH_SAMPLE_ROWS
    fine_bins: int = defaults.BATCH_FINE_BINS


@dataclass(frozen=True)
class ProgressHooks:
    """Who hears of a run's progress: `on_window(done, total, rows)` after each judged window (``total`` 0 when
    not known; `total_rows`, the current table's rows when the caller knows them, lets ``--chunk-size`` say it),
    and `on_progress(what, done, total)` after each pass over a table's partitions (`detect_frames`)."""

    on_window: Callable[[int, int, int], None] | None = None
    total_rows: int | None = None
    on_progress: Callable[[str, int, int], None] | None = None


def _peek(chunks: Iterable[pd.DataFrame], where: str) -> tuple[pd.DataFrame, Iterator[pd.DataFrame]]:
    iterator = iter(chunks)
    for first in iterator:
        if len(first):
            return first, itertools.chain([first], iterator)
    raise UserError(f"the {where} has no rows")


def read_ahead(chunks: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """`chunks`, the next one read by a background thread while the caller summarizes this one.

    Reading (Parquet decoding, CSV parsing) releases the GIL, so it runs on the other core; one
    more chunk is held. Errors are raised where the chunk that shows them would have been read.
    """
    iterator = iter(chunks)
    done = object()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftline-read") as reader:
        pending = reader.submit(next, iterator, done)
        while True:
            chunk = pending.result()
            if chunk is done:
                return
            pending = reader.submit(next, iterator, done)
            yield chunk


def summarize_table(chunks: Iterable[pd.DataFrame], plan: Plan, where: str,
                    on_chunk: Callable[[int], None] | None = None, pool: Executor | None = None) -> BatchSummary:
    """The merged summary of a whole table (its chunks in order) under `plan` (`pool`: see `summarize`)."""
    total: BatchSummary | None = None
    offset = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        below = None if total is None else total.sample_threshold(plan)
        part = summarize(check_chunk(chunk, plan, where), plan, offset, sample_below=below, pool=pool)
        offset += len(chunk)
        total = part if total is None else merge(total, part, plan)
        if on_chunk is not None:
            on_chunk(offset)
    if total is None:
        raise UserError(f"the {where} has no rows")
    return total


def _held(summary: BatchSummary) -> int:
    return sum(c.count for c in summary.columns.values() if isinstance(c, NumericSummary) and c.exact)


def _fold(summary: BatchSummary, plan: Plan) -> None:
    for name, column in summary.columns.items():
        if isinstance(column, NumericSummary) and column.exact:
            summary.columns[name] = column.binned(plan, name)


def detect_streamed(open_reference: Chunks, open_current: Chunks, *, columns: ColumnRoles = ColumnRoles(),
                    windowing: Windowing = Windowing(), judging: Judging = Judging(), budget: Budget = Budget(),
                    hooks: ProgressHooks = ProgressHooks(),
                    embeddings: StreamedEmbeddings | None = None) -> dict[str, Any]:
    """`engine.detect`'s result, streaming both tables (module docstring). Same options and errors;
    `hooks` hear of each window (`ProgressHooks`).
    `embeddings`: each window gains ``embeddings`` (name -> verdict), their columns are no features."""
    judging = judging.resolved()
    chunk_size, timestamp = windowing.chunk_size, columns.timestamp
    offset = period_offset(chunk_size, windowing.chunk_period, timestamp)
    if judging.multivariate:
        preload_classifier()
    workers = default_workers() if budget.workers is None else budget.workers
    # columns of a chunk are summarized in parallel; on an error its idle threads end with it (held weakly)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="driftline-summarize") if workers > 1 else None
    reference_head, reference_chunks = _peek(read_ahead(open_reference()), "reference")
    current_head, current_chunks = _peek(read_ahead(open_current()), "current data")
    if embeddings is not None:
        columns = replace(columns, ignore=[*columns.ignore, *embeddings.columns(reference_head, current_head)])
        embeddings.fit(open_reference())
    kinds, prediction, probabilities, scan = scan_plan(reference_head, current_head, columns, budget,
                                                       features_optional=embeddings is not None)
    reference = summarize_table(reference_chunks, scan, "reference", pool=pool)
    plan = scan.with_reference(reference)
    if plan.needs_rescan(reference):  # a column too long to keep: its deciles are found exactly, in three passes
        reference = summarize_table(read_ahead(open_reference()), plan, "reference", pool=pool)
        ranks = plan.decile_ranks(reference)
        if ranks:
            bins = {name: np.unique(where) for name, (_, where) in ranks.items()}
            parts: dict[str, list[np.ndarray]] = {name: [] for name in ranks}
            for chunk in open_reference():
                for name, values in plan.values_in_bins(chunk, bins).items():
                    parts[name].append(values)
            plan = plan.with_exact_deciles(reference, ranks, {name: np.concatenate(values) if values else
                                                              np.empty(0) for name, values in parts.items()})
            reference = summarize_table(read_ahead(open_reference()), plan, "reference", pool=pool)
    finisher = Finisher(plan, reference, Settings.resolved(columns, judging, prediction, probabilities,
                                                                   workers))
    expected = 0
    if chunk_size is not None and hooks.total_rows:
        expected = -(-hooks.total_rows // chunk_size)
    elif chunk_size is None and offset is None:
        expected = 1
    results: list[dict[str, Any]] = []
    vectors: dict[Any, dict[str, Any]] = {}  # open window -> its embedding summaries

    def fold_vectors(key: Any, piece: pd.DataFrame) -> None:
        if embeddings is not None:
            embeddings.fold(vectors.setdefault(key, embeddings.open()), piece)

    def judged(window: WindowSummary, key: Any) -> None:
        results.append(finisher.window(window))
        if embeddings is not None:
            results[-1]["embeddings"] = embeddings.judge(vectors.pop(key))
        if hooks.on_window is not None:
            hooks.on_window(len(results), expected, window.summary.rows)

    origin = pd.Timestamp(0)  # any midnight, for periods that divide a day
    if offset is not None and needs_origin(offset):
        # pandas bins such periods from midnight of the first timestamp: find it first
        first = min(parse_timestamps(chunk[timestamp], timestamp).min() for chunk in open_current() if len(chunk))
        origin = pd.Timestamp(first).tz_localize(None).normalize()
    open_windows: dict[Any, BatchSummary] = {}
    row = 0
    for chunk in current_chunks:
        if not len(chunk):
            continue
        chunk = check_chunk(chunk, plan, "current data")
        times = parse_timestamps(chunk[timestamp], timestamp) if timestamp is not None else None
        if offset is not None:
            assert times is not None
            for label_time, positions in period_labels(times, offset, origin):
                held = open_windows.get(label_time)
                below = None if held is None else held.sample_threshold(plan)
                part = summarize(chunk.iloc[positions], plan, row + positions, sample_below=below, pool=pool)
                fold_vectors(label_time, chunk.iloc[positions])
                open_windows[label_time] = part if held is None else merge(held, part, plan)
            most_held = plan.exact_values * max(1, sum(kind == NUMERIC for kind in kinds.values()))
            while len(open_windows) > 1 and sum(_held(s) for s in open_windows.values()) > most_held:
                _fold(max(open_windows.values(), key=_held), plan)
        else:
            size = chunk_size or len(chunk) + row + 1  # no chunking: one window, never complete before the end
            begin = 0
            while begin < len(chunk):
                number = (row + begin) // size
                end = min(len(chunk), (number + 1) * size - row)
                piece_times = None if times is None else times.iloc[begin:end]
                held = open_windows.pop(number, None)
                below = None if held is None else held.sample_threshold(plan)
                part = summarize(chunk.iloc[begin:end], plan, row + begin, piece_times, sample_below=below,
                                 pool=pool)
                fold_vectors(number, chunk.iloc[begin:end])
                for done in sorted(open_windows):  # windows before this one are complete
                    summary = open_windows.pop(done)
                    judged(WindowSummary(done, summary, *window_bounds(summary)), done)
                open_windows[number] = part if held is None else merge(held, part, plan)
                begin = end
        row += len(chunk)
    if offset is not None:
        for index, label_time in enumerate(sorted(open_windows)):
            summary = open_windows[label_time]
            judged(WindowSummary(index, summary, iso_time(label_time.tz_localize("UTC")),
                                 iso_time(label_time.tz_localize("UTC") + offset)), label_time)
    else:
        for number in sorted(open_windows):
            judged(WindowSummary(number, open_windows[number], *window_bounds(open_windows[number])), number)
    if pool is not None:
        pool.shutdown()
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(reference.rows), "windows": results}


def scan_plan(reference_head: Any, current_head: Any, columns: ColumnRoles, budget: Budget, *,
              features_optional: bool = False) -> tuple[Any, Any, Any, Plan]:
    """(kinds, prediction column, probability columns, the first pass's plan) from the first rows of both tables."""
    kinds, prediction, probabilities = monitored_columns(reference_head, current_head, columns,
                                                         features_optional=features_optional)
    segment_by = columns.segment_by
    extra = [c for c in (columns.label, *(probabilities or ()), segment_by, columns.prediction_class)
             if c is not None and c in reference_head.columns]
    if segment_by is not None and segment_by not in current_head.columns:
        raise UserError(f"--segment-by {segment_by}: no such column in the current data "
                        f"(columns: {', '.join(map(str, current_head.columns))})")
    return kinds, prediction, probabilities, Plan.scan(kinds, extra, exact_values=budget.exact_values,
                                                       sample_rows=budget.sample_rows, fine_bins=budget.fine_bins)

