"""Event-time watermarks: how far the stream has been read and stored, and so which windows are closed.

Each collector records, per partition of the inference topic it owns, the largest event time it has
consumed *and stored* (`PartitionMark.event_time_ms`, written in the flush that stores those events),
and whether its reader has been at the end of the log with nothing new since some time (`idle_since_ms`).
The stream's **low watermark** is the smallest of the partitions' watermarks: every event before it
that will ever be read within the allowed lateness is stored. A window of any model version is closed
once ``window_end + allowed_lateness <= low watermark``, as in Apache Flink and Kafka Streams.

- A partition *idle* for `idle_ms` (its reader at the end of the log, nothing new, and the reader's last
  word fresher than `idle_ms`) stops holding the watermark back: it counts as the wall clock, so a model
  that stops sending, or a partition nobody writes to, still gets its windows closed (Flink's source
  idleness).
- A partition whose reader has gone quiet (a collector killed, cut off from the store) is *stalled*, not
  idle: it holds the windows back at its last stored event time until a collector reads it again, so a
  window is never judged before its events are in.
- A partition registered but with nothing stored yet holds every window back.
- Several collector groups on one partition (an old group left behind): the furthest group counts.
- A store no collector has recorded a watermark in (windows written by other means) is closed by the
  wall clock.

>>> marks = [PartitionMark("t", 0, 10_000, None, 0), PartitionMark("t", 1, 7_000, None, 0)]
>>> low_watermark(marks, now_ms=1_000, idle_ms=30_000)
7000
>>> low_watermark([PartitionMark("t", 0, 10_000, None, 0), PartitionMark("t", 1, 7_000, 0, 40_000)],
...               now_ms=40_000, idle_ms=30_000)
10000
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["PartitionMark", "low_watermark", "window_closed"]


@dataclass(frozen=True)
class PartitionMark:
    """One partition's watermark as one collector group stored it (times in epoch ms)."""

    topic: str
    partition: int
    event_time_ms: int | None  # the largest event time stored (None: nothing stored yet)
    idle_since_ms: int | None  # since when its reader has been at the end of the log (None: records flowing)
    updated_ms: int  # when its reader last confirmed it
    group_id: str = ""

    def idle(self, now_ms: int, idle_ms: int) -> bool:
        """At the end of its log with nothing new for `idle_ms`, said by a reader heard from within `idle_ms`."""
        return (self.idle_since_ms is not None and now_ms - self.idle_since_ms >= idle_ms
                and now_ms - self.updated_ms < idle_ms)

    def effective_ms(self, now_ms: int, idle_ms: int) -> int | None:
        """What this partition lets the low watermark be: its event time, or the wall clock once idle."""
        if self.idle(now_ms, idle_ms):
            return now_ms if self.event_time_ms is None else max(now_ms, self.event_time_ms)
        return self.event_time_ms


def low_watermark(marks: Iterable[PartitionMark], now_ms: int, idle_ms: int) -> int | None:
    """The stream's low watermark (module docstring); None while some partition holds every window back."""
    furthest: dict[tuple[str, int], int | None] = {}
    for mark in marks:
        key = (mark.topic, mark.partition)
        value = mark.effective_ms(now_ms, idle_ms)
        if key not in furthest:
            furthest[key] = value
        elif value is not None:
            known = furthest[key]
            furthest[key] = value if known is None else max(known, value)
    if not furthest:
        return now_ms  # no collector has recorded a watermark: the wall clock closes windows
    values = list(furthest.values())
    if any(v is None for v in values):
        return None
    return min(v for v in values if v is not None)


def window_closed(window_end_ms: int, watermark_ms: int | None, lateness_ms: int) -> bool:
    """Whether a window ending at `window_end_ms` is closed under `watermark_ms`.

    >>> window_closed(60_000, 90_000, 30_000), window_closed(60_000, 89_999, 30_000), window_closed(1, None, 0)
    (True, False, False)
    """
    return watermark_ms is not None and window_end_ms + lateness_ms <= watermark_ms
