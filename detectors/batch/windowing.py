"""Chunks of the current data into windows, the same way whatever reads them (a file's chunks, an engine's
partitions): `check_chunk` (a chunk holds what the plan monitors), `parse_timestamps`, `period_labels` and
`needs_origin` (``--chunk-period`` grouping, chunk by chunk, as `engine.split_windows` groups the whole
table), `window_bounds` and `iso_time` (a window's ``start`` / ``end``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.summary import NUMERIC, BatchSummary
from driftline.errors import UserError

__all__ = ["check_chunk", "iso_time", "needs_origin", "parse_timestamps", "period_labels", "period_step",
           "window_bounds"]


def parse_timestamps(series: pd.Series, column: str) -> pd.Series:
    """A ``--timestamp`` column as UTC times (numbers: epoch milliseconds); `UserError` for unreadable or missing ones."""
    try:
        if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
            parsed = pd.to_datetime(series, unit="ms", utc=True)  # epoch milliseconds, as in the event contract
        else:
            parsed = pd.to_datetime(series, utc=True, format="mixed")
    except (ValueError, TypeError, OverflowError) as exc:
        raise UserError(f"--timestamp {column}: cannot read its values as dates/times ({exc})") from None
    bad = int(parsed.isna().sum())
    if bad:
        raise UserError(f"--timestamp {column}: {bad} row(s) have no timestamp; fill or drop them first")
    return parsed


def iso_time(value: Any) -> str:
    """A time as ISO 8601 text (a window's ``start`` and ``end``)."""
    return pd.Timestamp(value).isoformat()


def check_chunk(chunk: pd.DataFrame, plan: Plan, where: str) -> pd.DataFrame:
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


def period_step(offset: pd.DateOffset) -> pd.Timedelta | None:
    """A fixed-length period's length (hours, minutes, days); None for calendar periods (weeks, months)."""
    if isinstance(offset, pd.tseries.offsets.Tick):
        return pd.Timedelta(int(offset.nanos), unit="ns")
    if isinstance(offset, pd.tseries.offsets.Day):
        return pd.Timedelta(days=offset.n)
    return None


def period_labels(times: pd.Series, offset: pd.DateOffset, origin: pd.Timestamp) -> list[tuple[pd.Timestamp, np.ndarray]]:
    """(period label, row positions) per period holding rows: `engine.split_windows`'s grouping, chunk by chunk.

    Fixed-length periods count from `origin` (the midnight pandas starts from: the first
    timestamp's day), calendar ones are grouped by pandas itself, anchored to the calendar.
    """
    naive = pd.DatetimeIndex(times.dt.tz_localize(None))
    step = period_step(offset)
    if step is not None:
        labels = origin + ((naive - origin) // step) * step
        codes, uniques = pd.factorize(labels, sort=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        return [(pd.Timestamp(uniques[i]), order[bounds[i]:bounds[i + 1]]) for i in range(len(uniques))]
    positions = pd.Series(np.arange(len(times)), index=naive)
    return [(pd.Timestamp(label), group.to_numpy()) for label, group in
            positions.groupby(pd.Grouper(freq=offset), sort=True) if len(group)]


def needs_origin(offset: pd.DateOffset) -> bool:
    """Whether pandas' bins of `offset` depend on the first timestamp (their origin is that day's midnight).

    Fixed durations that divide a day, and one day, land on the same bins from any midnight;
    calendar periods (weeks, months) are anchored to the calendar. Anything else (7h, 2D) is not.
    """
    if isinstance(offset, pd.tseries.offsets.Tick):
        return (86_400 * 10**9) % int(offset.nanos) != 0
    if isinstance(offset, pd.tseries.offsets.Day):
        return offset.n != 1
    return False


def window_bounds(summary: BatchSummary) -> tuple[str | None, str | None]:
    if summary.first_time is None or summary.last_time is None:
        return None, None
    return iso_time(summary.first_time), iso_time(summary.last_time)
