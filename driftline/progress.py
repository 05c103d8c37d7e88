"""Event-time progress in words: how far the collectors have stored events, which partitions hold them back.

`driftline status` and the dashboard's overview say it the same way; the numbers come from
driftline.store.watermarks (`watermark_report`, `stream_watermark`, `judged_up_to`), the rules from
driftline.watermarks. No I/O here.

>>> marks = [{"topic": "t", "partition": 0, "state": "reading"}, {"topic": "t", "partition": 1, "state": "stalled"}]
>>> collectors_sentence(50_000, marks, now_ms=92_000)
'collectors have stored events up to 00:00:50 UTC, 42 s behind (stalled: partition 1)'
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

__all__ = ["CAUGHT_UP_SECONDS", "clock", "collectors_sentence", "duration", "held_back", "describe_held"]

# Collectors within this of the wall clock are "caught up": a flush or two behind, storing events as they come.
CAUGHT_UP_SECONDS = 60.0
# the partition states of `watermark_report` that hold the windows back, in the order they are named
HOLDING = ("stalled", "waiting")


def clock(ms: int, now_ms: int, seconds: bool = True) -> str:
    """'14:05:07 UTC', with the date in front when `ms` is not on the UTC day of `now_ms`.

    >>> clock(3_600_000, 3_700_000), clock(0, 86_400_000, seconds=False)
    ('01:00:00 UTC', '1970-01-01 00:00 UTC')
    """
    at = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    shown = "%H:%M:%S" if seconds else "%H:%M"
    if at.date() != datetime.fromtimestamp(now_ms / 1000.0, tz=timezone.utc).date():
        shown = "%Y-%m-%d " + shown
    return at.strftime(shown) + " UTC"


def duration(seconds: float) -> str:
    """A lag for people: '42 s', '3 min', '2 h', '5 d'.

    >>> duration(42.4), duration(185), duration(7300)
    ('42 s', '3 min', '2 h')
    """
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0.0):.0f} s"


def held_back(watermarks: Iterable[Mapping[str, Any]]) -> dict[str, list[int]]:
    """'stalled' / 'waiting' -> the partitions in that state in every collector group that has one.

    A partition another group reads (or is idle on) holds nothing back (the furthest group counts), so
    an old group left behind on it is not named.
    """
    states: dict[tuple[str, int], set[str]] = {}
    for mark in watermarks:
        states.setdefault((str(mark["topic"]), int(mark["partition"])), set()).add(str(mark["state"]))
    held: dict[str, list[int]] = {}
    for (_topic, partition), found in sorted(states.items()):
        if found <= set(HOLDING):
            held.setdefault("waiting" if found == {"waiting"} else "stalled", []).append(partition)
    return held


def describe_held(held: Mapping[str, list[int]]) -> str:
    """'stalled: partition 3; waiting: partitions 1, 2' ('' when nothing is held back)."""
    return "; ".join(f"{state}: partition{'s' if len(held[state]) > 1 else ''} {', '.join(map(str, held[state]))}"
                     for state in HOLDING if held.get(state))


def collectors_sentence(watermark_ms: int | None, watermarks: list[Mapping[str, Any]], now_ms: int) -> str:
    """`driftline status`'s line on the collectors' low watermark, naming the partitions that hold it back."""
    if not watermarks:
        return "collectors: none has recorded a watermark yet (windows close on the wall clock)"
    if watermark_ms is None:
        text = "collectors: a partition has stored no event yet, so no window closes"
    else:
        lag = max(now_ms - watermark_ms, 0) / 1000.0
        text = f"collectors have stored events up to {clock(watermark_ms, now_ms)}, {lag:.0f} s behind"
    held = describe_held(held_back(watermarks))
    return text + (f" ({held})" if held else "")
