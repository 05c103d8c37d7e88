"""Rollups, by the retention job: old window states merged by hour then by day, old detector results by hour.

* **Window states** past the re-evaluation horizon (`[retention] rollup_hourly_days`, never less than the
  scheduler's horizon) are merged into one `WindowRollup` per model version and hour, and their rows
  deleted; hourly rollups past `rollup_daily_days` into one per day. Window states merge exactly
  (associative, commutative), so an hourly rollup is the state of every event of its hour, and a daily
  one the merge of its hours: nothing a chart of that range reads is lost, only the 5-minute grain.
* **Detector results** past `result_rollup_days` are folded, a whole model-day at a time, oldest day
  first, into one `ResultRollup` per hour and metric: min, max, sum and count of the values, the
  largest threshold and the windows breached and clean on each side of it (what the dashboard's time
  buckets show). Per version, the rolled days form one span from its first result on: readers take
  rollups before its end and rows from it on (driftline.store.rolled). The rows themselves go at once (SQLite,
  or rows in PostgreSQL's default partition) or with their day's partition, dropped once every version
  in it is rolled (driftline.store.partitions). A window a pending or firing alert last saw keeps its rows.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, case, delete, exists, func, insert, literal, select, update

from driftline.store import partitions
from driftline.store.rolled import rolled_up_to, unrolled
from driftline.store.models import Alert, DetectorResult, ResultRollup, WindowRollup, WindowStateRecord, utcnow
from driftline.window_state import WindowState

HOUR_MS = 3_600_000
DAY_MS = partitions.DAY_MS
HOUR, DAY = "hour", "day"
STATES = WindowStateRecord.__table__
ROLLUPS = WindowRollup.__table__
RESULTS = DetectorResult.__table__
RESULT_ROLLUPS = ResultRollup.__table__
_ACTIVE = ("pending", "firing")


# --- window states ----------------------------------------------------------------------------

def roll_states(conn: Connection, source: Any, grain: str, cutoff_ms: int, limit: int) -> int:
    """Merge the window states (`source` STATES) or hourly rollups (ROLLUPS) that end by `cutoff_ms` into
    rollups of `grain`, at most `limit` rollups; returns the rows merged."""
    size = HOUR_MS if grain == HOUR else DAY_MS
    start, end = ((source.c.window_start_ms, source.c.window_end_ms) if source is STATES
                  else (source.c.start_ms, source.c.end_ms))
    bucket = (start - start % size).label("bucket")
    where = [end <= cutoff_ms] if source is STATES else [end <= cutoff_ms, source.c.grain == HOUR]
    groups = conn.execute(select(source.c.model, source.c.version, bucket).where(*where).distinct()
                          .order_by(bucket).limit(limit)).all()
    merged = 0
    for model, version, bucket_ms in groups:
        bucket_ms = int(bucket_ms)
        key = [source.c.model == model, source.c.version == version, start >= bucket_ms, start < bucket_ms + size,
               *where]
        rows, states = [], []
        for row in conn.execute(select(source).where(*key).order_by(start)).all():
            state = _decoded(row.state)
            if state is not None:  # a row that is no window state is left to the retention of its age
                rows.append(row)
                states.append(state)
        if not rows:
            continue
        windows = len({int(r.window_start_ms) for r in rows}) if source is STATES else sum(r.windows for r in rows)
        _upsert_rollup(conn, model, version, grain, bucket_ms, bucket_ms + size, rows, states, windows)
        conn.execute(delete(source).where(source.c.id.in_([r.id for r in rows])))
        merged += len(rows)
    return merged


def _decoded(blob: bytes) -> WindowState | None:
    try:
        return WindowState.from_bytes(blob)
    except ValueError:
        return None


def _upsert_rollup(conn: Connection, model: str, version: str, grain: str, start_ms: int, end_ms: int,
                   rows: list[Any], states: list[WindowState], windows: int) -> None:
    """Merge `rows` into the rollup of (model, version, grain, start): made if missing (a late row adds to it)."""
    key = and_(ROLLUPS.c.model == model, ROLLUPS.c.version == version, ROLLUPS.c.grain == grain,
               ROLLUPS.c.start_ms == start_ms)
    existing = conn.execute(select(ROLLUPS).where(key)).first()
    values = {"events": sum(r.events for r in rows), "late_events": sum(r.late_events for r in rows),
              "windows": windows}
    if existing is not None:
        states = [WindowState.from_bytes(existing.state), *states]
        values = {k: v + getattr(existing, k) for k, v in values.items()}
    blob = WindowState.merge_all(states).to_bytes()
    if existing is None:
        conn.execute(insert(ROLLUPS).values(model=model, version=version, grain=grain, start_ms=start_ms,
                                            end_ms=end_ms, state=blob, updated_at=utcnow(), **values))
    else:
        conn.execute(update(ROLLUPS).where(ROLLUPS.c.id == existing.id).values(state=blob, updated_at=utcnow(),
                                                                               **values))


# --- detector results -------------------------------------------------------------------------

def roll_results(conn: Connection, cutoff_ms: int, limit: int) -> int:
    """Fold the results of whole model-days ending by `cutoff_ms` into hourly rollups, oldest first, at most
    `limit` model-days; returns the result rows folded."""
    cutoff_day = cutoff_ms // DAY_MS * DAY_MS
    first = unrolled(select(RESULTS.c.model, RESULTS.c.version, func.min(RESULTS.c.window_start_ms))
                     .where(RESULTS.c.window_start_ms < cutoff_day)
                     .group_by(RESULTS.c.model, RESULTS.c.version))
    days = partitions.day_partitions(conn, "detector_results")
    folded = 0
    for model, version, first_ms in conn.execute(first.limit(limit)).all():
        day = int(first_ms) // DAY_MS * DAY_MS
        folded += _roll_day(conn, model, version, day, delete_rows=day not in days)
    return folded


def _roll_day(conn: Connection, model: str, version: str, day_ms: int, delete_rows: bool) -> int:
    r = RESULTS
    in_day = and_(r.c.model == model, r.c.version == version, r.c.window_start_ms >= day_ms,
                  r.c.window_start_ms < day_ms + DAY_MS)
    one = lambda condition: func.sum(case((condition, 1), else_=0))  # noqa: E731 - a conditional count
    both = and_(r.c.value.is_not(None), r.c.threshold.is_not(None))
    hour = (r.c.window_start_ms - r.c.window_start_ms % HOUR_MS).label("hour")
    groups = conn.execute(
        select(hour, r.c.detector, r.c.feature, r.c.segment, r.c.metric, func.count(func.distinct(r.c.window_start_ms)),
               func.min(r.c.value), func.max(r.c.value), func.sum(r.c.value), func.count(r.c.value),
               func.max(r.c.threshold), one(r.c.breached), one(and_(both, r.c.breached, r.c.value > r.c.threshold)),
               one(and_(both, r.c.breached, r.c.value < r.c.threshold)),
               one(and_(both, ~r.c.breached, r.c.value > r.c.threshold)),
               one(and_(both, ~r.c.breached, r.c.value < r.c.threshold)), func.count())
        .where(in_day).group_by(hour, r.c.detector, r.c.feature, r.c.segment, r.c.metric)).all()
    rows = [dict(model=model, version=version, start_ms=int(g[0]), end_ms=int(g[0]) + HOUR_MS, detector=g[1],
                 feature=g[2], segment=g[3], metric=g[4], windows=int(g[5]), value_min=g[6], value_max=g[7],
                 value_sum=g[8], values=int(g[9]), threshold=g[10], breached=int(g[11] or 0),
                 breached_above=int(g[12] or 0), breached_below=int(g[13] or 0), clean_above=int(g[14] or 0),
                 clean_below=int(g[15] or 0)) for g in groups]
    if rows:
        conn.execute(insert(RESULT_ROLLUPS), rows)
    if delete_rows:
        conn.execute(delete(r).where(in_day, ~seen_by_active_alert(r)))
    return sum(int(g[16]) for g in groups)


def seen_by_active_alert(table: Any) -> Any:
    return exists().where(Alert.state.in_(_ACTIVE), Alert.model == table.c.model, Alert.version == table.c.version,
                          Alert.last_window_start_ms == table.c.window_start_ms)


def drop_rolled_days(conn: Connection, before_ms: int, expired_before_ms: int | None) -> int:
    """Drop the day partitions of detector results ending by `before_ms` whose rows are all rolled up, or ending
    by `expired_before_ms` (past the results' retention), and that hold no window an active alert last saw;
    returns the days dropped."""
    dropped = 0
    r = RESULTS
    for day, _name in sorted(partitions.day_partitions(conn, "detector_results").items()):
        end = day + DAY_MS
        if end > max(before_ms, expired_before_ms or before_ms):
            break
        in_day = and_(r.c.window_start_ms >= day, r.c.window_start_ms < end)
        if expired_before_ms is not None and end <= expired_before_ms:
            keeps = select(literal(1)).select_from(r).where(in_day, seen_by_active_alert(r))
        else:
            upto = rolled_up_to()
            keeps = (select(literal(1)).select_from(r)
                     .outerjoin(upto, and_(upto.c.model == r.c.model, upto.c.version == r.c.version))
                     .where(in_day, (r.c.window_start_ms >= func.coalesce(upto.c.upto, literal(-(2 ** 62))))
                            | seen_by_active_alert(r)))
        if conn.execute(keeps.limit(1)).first() is None and partitions.drop_day(conn, "detector_results", day):
            dropped += 1
    return dropped
