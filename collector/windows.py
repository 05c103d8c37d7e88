"""Event-time tumbling windows: a poll's valid events become partial window states (no I/O).

A window is ``[start, start + window_ms)`` with ``start = ts_ms - ts_ms mod window_ms``
(epoch milliseconds, so windows line up across collectors and restarts). The
*watermark* of a model version on a Kafka partition is the largest event time seen
so far on that partition; a window is **closed** for the partition once
``end + allowed_lateness <= watermark``. An event of a closed window is *late*: it is
still folded into its own window (states are mergeable, so nothing is lost) and
counted in ``late_events``, which tells the scheduler to evaluate that window again.
Lateness is judged against the events that arrived *before* it, in partition order,
so a batch is classified exactly as the same events one by one. Watermarks are per
partition because partitions are read at different speeds (a backlog, a rebalance):
one partition running ahead must not make another's punctual events late.

Everything here is vectorised per (model, version) group of a poll batch: `EventBatch`
holds the events as columns, numpy assigns windows and lateness, and
`WindowState.add_batch` folds each window's rows in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from driftline.baseline import Baseline
from driftline.segments import SegmentSpec
from driftline.window_state import EventBatch, WindowState
from driftline.windows import WindowKey


def window_starts(ts_ms: np.ndarray, window_ms: int) -> np.ndarray:
    """Start of each event's window (floor to a multiple of `window_ms`, negatives included)."""
    return ts_ms - np.mod(ts_ms, window_ms)


def late_mask(ts_ms: np.ndarray, window_ms: int, lateness_ms: int, watermark_ms: int | None) -> np.ndarray:
    """True where an event's window was closed when it arrived.

    Event *i* is late when ``start_i + window_ms + lateness_ms <= max(watermark, ts_0 .. ts_{i-1})``.
    """
    if ts_ms.size == 0:
        return np.zeros(0, dtype=bool)
    floor = np.iinfo(np.int64).min if watermark_ms is None else watermark_ms
    seen_before = np.empty_like(ts_ms)
    seen_before[0] = floor
    if ts_ms.size > 1:
        np.maximum.accumulate(ts_ms[:-1], out=seen_before[1:])
        np.maximum(seen_before, floor, out=seen_before)
    return window_starts(ts_ms, window_ms) + (window_ms + lateness_ms) <= seen_before


@dataclass
class PartialWindow:
    """What one partition contributed to one window since the last flush."""

    state: WindowState
    events: int = 0
    late_events: int = 0


@dataclass
class FoldResult:
    events: int
    late_events: int
    watermark_ms: int | None


@dataclass
class PartitionWindows:
    """Partial window states of one partition, keyed by their `WindowKey`."""

    window_ms: int
    lateness_ms: int
    windows: dict[WindowKey, PartialWindow] = field(default_factory=dict)
    segments: SegmentSpec = SegmentSpec()  # the [segments] columns each new state keeps sub-states for

    @property
    def events(self) -> int:
        return sum(w.events for w in self.windows.values())

    def fold(self, model: str, version: str, batch: EventBatch, baseline: Baseline | None,
             watermark_ms: int | None) -> FoldResult:
        """Fold one model version's events (columns, in partition order) into their windows.

        Returns the counts and the model version's new watermark.
        """
        if batch.n == 0:
            return FoldResult(0, 0, watermark_ms)
        ts = batch.event_time_ms
        starts = window_starts(ts, self.window_ms)
        late = late_mask(ts, self.window_ms, self.lateness_ms, watermark_ms)
        first = int(starts[0])
        if (starts == first).all():
            self._fold_window(model, version, first, batch, int(late.sum()), baseline)
        else:
            order = np.argsort(starts, kind="stable")  # stable: each window keeps partition order
            sorted_starts = starts[order]
            bounds = np.flatnonzero(np.diff(sorted_starts)) + 1
            for chunk in np.split(order, bounds):
                start = int(starts[chunk[0]])
                self._fold_window(model, version, start, batch.take(chunk), int(late[chunk].sum()), baseline)
        top = int(ts.max())
        return FoldResult(batch.n, int(late.sum()), top if watermark_ms is None else max(watermark_ms, top))

    def _fold_window(self, model: str, version: str, start: int, batch: EventBatch, late: int,
                     baseline: Baseline | None) -> None:
        key = WindowKey.starting(model, version, start, self.window_ms)
        partial = self.windows.get(key)
        if partial is None:
            partial = self.windows[key] = PartialWindow(WindowState.empty(baseline, segments=self.segments))
        partial.state.add_batch(batch)
        partial.events += batch.n
        partial.late_events += late
