"""Compaction: a judged window's partial states merged into one row, by the retention job.

The collectors write one window-state row per (window, partition), and one per label partition for
labels joined later; the scheduler merges them each time it judges the window. Once a window is judged
and none of its rows changed since (it is not due), its rows are replaced by one row holding their
merge (`MERGED_PARTITION`; window states merge exactly, so it is the state the detectors judged), with
the rows' events and late events summed and their newest `updated_at` (so the window is not due again).
Rows a collector writes later (late events, labels) go beside it under their own partition, make the
window due, are judged with it, and are merged into it at the next run. The rows are read locked
(PostgreSQL: FOR UPDATE; the collector locks the row it merges into as well, so a row is merged either
here or there, never both; SQLite: one writer at a time).
"""
from __future__ import annotations

from sqlalchemy import Connection, and_, delete, func, insert, select

from driftline.store.models import MERGED_PARTITION, WindowEvaluation, WindowStateRecord
from driftline.window_state import WindowState

STATES = WindowStateRecord.__table__
EVALUATIONS = WindowEvaluation.__table__


def compactable_windows(conn: Connection, since_ms: int, limit: int) -> list[tuple[str, str, int]]:
    """(model, version, window start) of judged windows from `since_ms` on with more than one row, none newer
    than the window's evaluation; oldest first."""
    rows = (select(STATES.c.model, STATES.c.version, STATES.c.window_start_ms,
                   func.max(STATES.c.updated_at).label("updated_at"))
            .where(STATES.c.window_start_ms >= since_ms)
            .group_by(STATES.c.model, STATES.c.version, STATES.c.window_start_ms)
            .having(func.count() > 1).subquery())
    found = conn.execute(
        select(rows.c.model, rows.c.version, rows.c.window_start_ms)
        .join(EVALUATIONS, and_(EVALUATIONS.c.model == rows.c.model, EVALUATIONS.c.version == rows.c.version,
                                EVALUATIONS.c.window_start_ms == rows.c.window_start_ms))
        .where(EVALUATIONS.c.evaluated_at >= rows.c.updated_at)
        .order_by(rows.c.window_start_ms).limit(limit))
    return [(m, v, int(s)) for m, v, s in found]


def merge_window(conn: Connection, model: str, version: str, window_start_ms: int) -> int:
    """Replace a window's rows by their merge (module docstring); returns the rows merged (0: left as they were,
    because one changed after the window was judged or it has one row only)."""
    key = and_(STATES.c.model == model, STATES.c.version == version, STATES.c.window_start_ms == window_start_ms)
    query = select(STATES).where(key).order_by(STATES.c.partition)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    rows = conn.execute(query).all()
    judged_at = conn.execute(select(EVALUATIONS.c.evaluated_at).where(
        EVALUATIONS.c.model == model, EVALUATIONS.c.version == version,
        EVALUATIONS.c.window_start_ms == window_start_ms)).scalar()
    if len(rows) < 2 or judged_at is None or any(r.updated_at > judged_at for r in rows):
        return 0  # a collector wrote since: the window is judged again first
    try:
        merged = WindowState.merge_all([WindowState.from_bytes(r.state) for r in rows])
    except ValueError:  # a row that is no window state (quarantined when judged): left as it is
        return 0
    conn.execute(delete(STATES).where(key))
    conn.execute(insert(STATES).values(
        model=model, version=version, window_start_ms=window_start_ms,
        window_end_ms=max(r.window_end_ms for r in rows), partition=MERGED_PARTITION,
        events=sum(r.events for r in rows), late_events=sum(r.late_events for r in rows),
        state=merged.to_bytes(), updated_at=max(r.updated_at for r in rows)))
    return len(rows)
