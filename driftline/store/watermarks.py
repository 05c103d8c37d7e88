"""Read-side queries of event-time progress: the partitions' watermarks and how far each version is judged.

The collector writes `partition_watermarks` (driftline.collector.store); the scheduler closes windows on
`stream_watermark`; `driftline status`, the dashboard and /metrics show `partition_marks` and `judged_up_to`.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from driftline.config import TOPIC_INFERENCE
from driftline.store.models import PartitionWatermark, WindowEvaluation
from driftline.watermarks import PartitionMark, low_watermark


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands naive datetimes back: they were stored as UTC
        value = value.replace(tzinfo=timezone.utc)
    return int(value.timestamp() * 1000)


def partition_marks(session: Session, topic: str = TOPIC_INFERENCE) -> list[PartitionMark]:
    """Every stored watermark of `topic`'s partitions, all collector groups, by partition."""
    rows = session.execute(select(PartitionWatermark).where(PartitionWatermark.topic == topic)
                           .order_by(PartitionWatermark.partition, PartitionWatermark.group_id)).scalars()
    return [PartitionMark(r.topic, int(r.partition), None if r.event_time_ms is None else int(r.event_time_ms),
                          _ms(r.idle_since), _ms(r.updated_at) or 0, r.group_id) for r in rows]


def stream_watermark(session: Session, now_ms: int, idle_ms: int, topic: str = TOPIC_INFERENCE) -> int | None:
    """The low watermark over `topic`'s partitions (driftline.watermarks.low_watermark)."""
    return low_watermark(partition_marks(session, topic), now_ms, idle_ms)


def judged_up_to(session: Session) -> dict[tuple[str, str], int]:
    """(model, version) -> the end (epoch ms) of its latest judged window."""
    return {(m, v): int(end) for m, v, end in session.execute(
        select(WindowEvaluation.model, WindowEvaluation.version, func.max(WindowEvaluation.window_end_ms))
        .group_by(WindowEvaluation.model, WindowEvaluation.version))}


def watermark_report(session: Session, now_ms: int, idle_ms: int) -> list[dict[str, Any]]:
    """`status --json`'s "watermarks": one entry per stored partition watermark, with its state."""
    report = []
    for mark in partition_marks(session):
        state = ("idle" if mark.idle(now_ms, idle_ms) else "waiting" if mark.event_time_ms is None
                 else "stalled" if now_ms - mark.updated_ms >= idle_ms else "reading")
        report.append({"topic": mark.topic, "partition": mark.partition, "group_id": mark.group_id,
                       "event_time_ms": mark.event_time_ms, "idle_since_ms": mark.idle_since_ms,
                       "updated_ms": mark.updated_ms, "state": state,
                       "lag_seconds": None if mark.event_time_ms is None
                       else max(now_ms - mark.event_time_ms, 0) / 1000.0})
    return report
