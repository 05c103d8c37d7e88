"""Bounded-memory `detect`: tables as streams of chunks, through `summarize` / `merge` / `finish`.

`detect_streamed` takes two callables that each open a fresh iterator of DataFrame chunks
(the command reads Parquet row groups or CSV blocks; engines and tests pass anything) and
returns the same dict as `driftline.detectors.batch.engine.detect` on the whole tables
(`driftline.detectors.batch.finish` says what is exact and what carries a bound). Passes:
the reference once (twice when a numeric column holds more than ``exact_values`` values),
the current data once (plus a timestamp-only scan for a ``--chunk-period`` that does not
divide a day). Memory: a chunk, the reference's summary, and the summaries of the windows
still open: one for ``--chunk-size`` (a window is judged as soon as its last row is read),
all of them for ``--chunk-period`` (the held values of all open windows together are kept
under one window's budget by folding the largest into bins). With `embeddings`
(`driftline.detectors.batch.embeddings.StreamedEmbeddings`), one more pass over the reference
gathers its vectors for the fit, and each window's vectors are folded into its summaries as
they are read.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.detectors.batch.embeddings import StreamedEmbeddings
from driftline.detectors.batch.engine import (SCHEMA_VERSION, _iso, _parse_timestamps, default_workers,
                                              monitored_columns, period_offset)
from driftline.detectors.batch.finish import Finisher, Settings, WindowSummary
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.summary import NUMERIC, BatchSummary, NumericSummary, merge, summarize
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline.errors import UserError

__all__ = ["detect_streamed", "summarize_table"]

Chunks = Callable[[], Iterable[pd.DataFrame]]


def _peek(chunks: Iterable[pd.DataFrame], where: str) -> tuple[pd.DataFrame, Iterator[pd.DataFrame]]:
    iterator = iter(chunks)
    for first in iterator:
        if len(first):
            return first, itertools.chain([first], iterator)
    raise UserError(f"the {where} has no rows")


def _checked(chunk: pd.DataFrame, plan: Plan, where: str) -> pd.DataFrame:
    """`UserError` for a chunk that lacks a monitored column or holds text in a numeric one (CSV blocks may)."""
    missing = [name for name in plan.kinds if name not in chunk.columns]
    if missing:
        raise UserError(f"the {where} lacks column(s) {', '.join(missing)} in some of its rows' blocks")
    for name, kind in plan.kinds.items():
        dtype = chunk[name].dtype
        if kind == NUMERIC and not (pd.api.types.is_numeric_dtype(dtype) or chunk[name].isna().all()) or (
                kind == NUMERIC and pd.api.types.is_bool_dtype(dtype)):
            raise UserError(f"column {name} is numeric in the first rows of the {where} but holds "
                            f"{dtype} values further down; pass --categorical {name} or fix the file")
    return chunk


def summarize_table(chunks: Iterable[pd.DataFrame], plan: Plan, where: str,
                    on_chunk: Callable[[int], None] | None = None) -> BatchSummary:
    """The merged summary of a whole table (its chunks in order) under `plan`."""
    total: BatchSummary | None = None
    offset = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        below = None if total is None else total.sample_threshold(plan)
        part = summarize(_checked(chunk, plan, where), plan, offset, sample_below=below)
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


def _step(offset: pd.DateOffset) -> pd.Timedelta | None:
    """A fixed-length period's length (hours, minutes, days); None for calendar periods (weeks, months)."""
    if isinstance(offset, pd.tseries.offsets.Tick):
        return pd.Timedelta(int(offset.nanos), unit="ns")
    if isinstance(offset, pd.tseries.offsets.Day):
        return pd.Timedelta(days=offset.n)
    return None


def _period_labels(times: pd.Series, offset: pd.DateOffset, origin: pd.Timestamp) -> list[tuple[pd.Timestamp, np.ndarray]]:
    """(period label, row positions) per period holding rows: `engine.split_windows`'s grouping, chunk by chunk.

    Fixed-length periods count from `origin` (the midnight pandas starts from: the first
    timestamp's day), calendar ones are grouped by pandas itself, anchored to the calendar.
    """
    naive = pd.DatetimeIndex(times.dt.tz_localize(None))
    step = _step(offset)
    if step is not None:
        labels = origin + ((naive - origin) // step) * step
        codes, uniques = pd.factorize(labels, sort=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        return [(pd.Timestamp(uniques[i]), order[bounds[i]:bounds[i + 1]]) for i in range(len(uniques))]
    positions = pd.Series(np.arange(len(times)), index=naive)
    return [(pd.Timestamp(label), group.to_numpy()) for label, group in
            positions.groupby(pd.Grouper(freq=offset), sort=True) if len(group)]


def _needs_origin(offset: pd.DateOffset) -> bool:
    """Whether pandas' bins of `offset` depend on the first timestamp (their origin is that day's midnight).

    Fixed durations that divide a day, and one day, land on the same bins from any midnight;
    calendar periods (weeks, months) are anchored to the calendar. Anything else (7h, 2D) is not.
    """
    if isinstance(offset, pd.tseries.offsets.Tick):
        return (86_400 * 10**9) % int(offset.nanos) != 0
    if isinstance(offset, pd.tseries.offsets.Day):
        return offset.n != 1
    return False


def detect_streamed(open_reference: Chunks, open_current: Chunks, *, chunk_size: int | None = None,
                    chunk_period: str | None = None, timestamp: str | None = None, categorical: Sequence[str] = (),
                    prediction: str | None = None, ignore: Sequence[str] = (),
                    thresholds: DriftThresholds | None = None,
                    on_window: Callable[[int, int, int], None] | None = None, workers: int | None = None,
                    label: str | None = None, performance_thresholds: WindowThresholds | None = None,
                    segment_by: str | None = None, multivariate: MultivariateThresholds | bool = True,
                    exact_values: int = defaults.BATCH_EXACT_VALUES, sample_rows: int = defaults.BATCH_SAMPLE_ROWS,
                    fine_bins: int = defaults.BATCH_FINE_BINS, total_rows: int | None = None,
                    embeddings: StreamedEmbeddings | None = None) -> dict[str, Any]:
    """`engine.detect`'s result, streaming both tables (module docstring). Same options and errors;
    `on_window(done, total, rows)` gets ``total`` 0 when the number of windows is not known in advance
    (`total_rows`, the current table's rows when the caller knows them, lets ``--chunk-size`` say it).
    `embeddings`: each window gains ``embeddings`` (name -> verdict), their columns are no features."""
    thresholds = thresholds or DriftThresholds()
    offset = period_offset(chunk_size, chunk_period, timestamp)
    reference_head, reference_chunks = _peek(open_reference(), "reference")
    current_head, current_chunks = _peek(open_current(), "current data")
    if embeddings is not None:
        ignore = [*ignore, *embeddings.columns(reference_head, current_head)]
        embeddings.fit(open_reference())
    kinds, prediction, probabilities, scan = scan_plan(
        reference_head, current_head, categorical=categorical, prediction=prediction, ignore=ignore,
        timestamp=timestamp, label=label, segment_by=segment_by, exact_values=exact_values, sample_rows=sample_rows,
        fine_bins=fine_bins)
    reference = summarize_table(reference_chunks, scan, "reference")
    plan = scan.with_reference(reference)
    if plan.needs_rescan(reference):  # a column too long to keep: its deciles are found exactly, in three passes
        reference = summarize_table(open_reference(), plan, "reference")
        ranks = plan.decile_ranks(reference)
        if ranks:
            bins = {name: np.unique(where) for name, (_, where) in ranks.items()}
            parts: dict[str, list[np.ndarray]] = {name: [] for name in ranks}
            for chunk in open_reference():
                for name, values in plan.values_in_bins(chunk, bins).items():
                    parts[name].append(values)
            plan = plan.with_exact_deciles(reference, ranks, {name: np.concatenate(values) if values else
                                                              np.empty(0) for name, values in parts.items()})
            reference = summarize_table(open_reference(), plan, "reference")
    workers = default_workers() if workers is None else workers
    finisher = Finisher(plan, reference, Settings(
        prediction=prediction, probabilities=tuple(probabilities) if probabilities else None, label=label,
        segment_by=segment_by, thresholds=thresholds, performance_thresholds=performance_thresholds,
        multivariate=multivariate, workers=workers))
    expected = 0
    if chunk_size is not None and total_rows:
        expected = -(-total_rows // chunk_size)
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
        if on_window is not None:
            on_window(len(results), expected, window.summary.rows)

    origin = pd.Timestamp(0)  # any midnight, for periods that divide a day
    if offset is not None and _needs_origin(offset):
        # pandas bins such periods from midnight of the first timestamp: find it first
        first = min(_parse_timestamps(chunk[timestamp], timestamp).min() for chunk in open_current() if len(chunk))
        origin = pd.Timestamp(first).tz_localize(None).normalize()
    open_windows: dict[Any, BatchSummary] = {}
    row = 0
    for chunk in current_chunks:
        if not len(chunk):
            continue
        chunk = _checked(chunk, plan, "current data")
        times = _parse_timestamps(chunk[timestamp], timestamp) if timestamp is not None else None
        if offset is not None:
            assert times is not None
            for label_time, positions in _period_labels(times, offset, origin):
                held = open_windows.get(label_time)
                below = None if held is None else held.sample_threshold(plan)
                part = summarize(chunk.iloc[positions], plan, row + positions, sample_below=below)
                fold_vectors(label_time, chunk.iloc[positions])
                open_windows[label_time] = part if held is None else merge(held, part, plan)
            budget = plan.exact_values * max(1, sum(kind == NUMERIC for kind in kinds.values()))
            while len(open_windows) > 1 and sum(_held(s) for s in open_windows.values()) > budget:
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
                part = summarize(chunk.iloc[begin:end], plan, row + begin, piece_times, sample_below=below)
                fold_vectors(number, chunk.iloc[begin:end])
                for done in sorted(open_windows):  # windows before this one are complete
                    summary = open_windows.pop(done)
                    judged(WindowSummary(done, summary, *_bounds(summary)), done)
                open_windows[number] = part if held is None else merge(held, part, plan)
                begin = end
        row += len(chunk)
    if offset is not None:
        for index, label_time in enumerate(sorted(open_windows)):
            summary = open_windows[label_time]
            judged(WindowSummary(index, summary, _iso(label_time.tz_localize("UTC")),
                                 _iso(label_time.tz_localize("UTC") + offset)), label_time)
    else:
        for number in sorted(open_windows):
            judged(WindowSummary(number, open_windows[number], *_bounds(open_windows[number])), number)
    return {"schema_version": SCHEMA_VERSION, "reference_rows": int(reference.rows), "windows": results}


def _bounds(summary: BatchSummary) -> tuple[str | None, str | None]:
    if summary.first_time is None or summary.last_time is None:
        return None, None
    return _iso(summary.first_time), _iso(summary.last_time)


def scan_plan(reference_head: Any, current_head: Any, *, categorical: Any, prediction: Any, ignore: Any,
              timestamp: Any, label: Any, segment_by: Any, exact_values: Any, sample_rows: Any,
              fine_bins: Any) -> tuple[Any, Any, Any, Plan]:
    """(kinds, prediction column, probability columns, the first pass's plan) from the first rows of both tables."""
    kinds, prediction, probabilities = monitored_columns(reference_head, current_head, categorical=categorical,
                                                         prediction=prediction, ignore=ignore,
                                                         timestamp=timestamp, label=label)
    extra = [c for c in (label, *(probabilities or ()), segment_by) if c is not None and c in reference_head.columns]
    if segment_by is not None and segment_by not in current_head.columns:
        raise UserError(f"--segment-by {segment_by}: no such column in the current data "
                        f"(columns: {', '.join(map(str, current_head.columns))})")
    return kinds, prediction, probabilities, Plan.scan(kinds, extra, exact_values=exact_values,
                                                       sample_rows=sample_rows, fine_bins=fine_bins)
