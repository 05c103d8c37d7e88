"""The collector's SQL: offsets with a fence, window rows read-merge-write, predictions, labels.

Every function takes an open `Connection` inside the caller's transaction (see
`driftline.collector.flush`), except the few look-ups at the bottom that open their own.
Only SQLite and PostgreSQL are supported (``INSERT ... ON CONFLICT DO NOTHING``).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Collection, Iterable, Iterator, Mapping, Sequence

import orjson
from sqlalchemy import Connection, Engine, and_, case, delete, insert, select, update

from driftline.collector.labels import PredictionValues, RequestKey, StoredAhead, fold_pairs
from driftline.collector.windows import PartialWindow
from driftline.baseline import Baseline
from driftline.segments import SegmentSpec
from driftline.store.models import (BaselineRecord, ConsumerOffset, DeadLetter, LabelRecord, PartitionWatermark,
                                    PredictionRecord, WindowStateRecord, utcnow)
from driftline.window_state import WindowState
from driftline.windows import WindowKey

OFFSETS = ConsumerOffset.__table__
WATERMARKS = PartitionWatermark.__table__
WINDOWS = WindowStateRecord.__table__
DEAD_LETTERS = DeadLetter.__table__
PREDICTIONS = PredictionRecord.__table__
LABELS = LabelRecord.__table__
BASELINES = BaselineRecord.__table__

# Ids per IN (...) list: far below SQLite's 32 766 bound variables, large enough that
# a flush of 100 000 predictions is a few hundred index look-ups per statement.
_IN_CHUNK = 2_000


def _chunks(items: Sequence[Any], size: int = _IN_CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _insert_ignoring_duplicates(conn: Connection, table: Any):  # noqa: ANN202 - dialect-specific Insert
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        raise NotImplementedError(f"the collector supports SQLite and PostgreSQL, not {conn.dialect.name}")
    return dialect_insert(table).on_conflict_do_nothing()


# --- offsets --------------------------------------------------------------------------

@dataclass(frozen=True)
class StoredOffset:
    next_offset: int
    topic_id: str | None


def load_offsets(engine: Engine, group_id: str, topic: str, partitions: Iterable[int]) -> dict[int, StoredOffset]:
    partitions = list(partitions)
    with engine.connect() as conn:
        rows = conn.execute(select(OFFSETS.c.partition, OFFSETS.c.next_offset, OFFSETS.c.topic_id).where(
            OFFSETS.c.group_id == group_id, OFFSETS.c.topic == topic, OFFSETS.c.partition.in_(partitions)))
        return {int(p): StoredOffset(int(o), t) for p, o, t in rows}


def advance_offset(conn: Connection, group_id: str, topic: str, partition: int, expected: StoredOffset | None,
                   next_offset: int, topic_id: str | None) -> bool:
    """Move the stored offset from `expected` to `next_offset`: False if the row is not at `expected`.

    This is the fence that makes a partition's rows single-writer: a collector that lost
    the partition (a rebalance it has not noticed yet) finds the offset moved by the new
    owner and its transaction is rolled back. The first statement of a flush is this
    write, so on PostgreSQL the offset row stays locked until commit and on SQLite the
    whole flush holds the write lock.
    """
    now = utcnow()
    if expected is None:
        result = conn.execute(_insert_ignoring_duplicates(conn, OFFSETS).values(
            group_id=group_id, topic=topic, partition=partition, next_offset=next_offset, topic_id=topic_id,
            updated_at=now).returning(OFFSETS.c.partition))
    else:
        result = conn.execute(update(OFFSETS).where(
            OFFSETS.c.group_id == group_id, OFFSETS.c.topic == topic, OFFSETS.c.partition == partition,
            OFFSETS.c.next_offset == expected.next_offset,
            OFFSETS.c.topic_id.is_not_distinct_from(expected.topic_id),
        ).values(next_offset=next_offset, topic_id=topic_id, updated_at=now).returning(OFFSETS.c.partition))
    # RETURNING rather than rowcount: psycopg reports -1 for INSERT ... ON CONFLICT through SQLAlchemy.
    return len(result.all()) == 1


# --- watermarks (driftline.watermarks) -----------------------------------------------------

def _at(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def write_watermark(conn: Connection, group_id: str, topic: str, partition: int, event_time_ms: int | None,
                    idle_since_ms: int | None) -> None:
    """Move the partition's watermark up to `event_time_ms` (never down) and record its reader's idleness.

    Called inside the flush, after the offset fence: only the partition's owner gets here."""
    key = and_(WATERMARKS.c.group_id == group_id, WATERMARKS.c.topic == topic, WATERMARKS.c.partition == partition)
    now = utcnow()
    values: dict[str, Any] = {"idle_since": _at(idle_since_ms), "updated_at": now}
    if event_time_ms is not None:
        values["event_time_ms"] = case((WATERMARKS.c.event_time_ms.is_(None), event_time_ms),
                                       (WATERMARKS.c.event_time_ms < event_time_ms, event_time_ms),
                                       else_=WATERMARKS.c.event_time_ms)
    if conn.execute(update(WATERMARKS).where(key).values(**values).returning(WATERMARKS.c.partition)).first():
        return
    conn.execute(insert(WATERMARKS).values(group_id=group_id, topic=topic, partition=partition,
                                           event_time_ms=event_time_ms, idle_since=_at(idle_since_ms), updated_at=now))


def register_partitions(engine: Engine, group_id: str, topic: str, partitions: Collection[int]) -> None:
    """Make every partition of `topic` known to the low watermark before any of them is stored, so a partition
    no collector has read yet holds the windows back; forget partitions the topic no longer has."""
    if not partitions:
        return
    with engine.begin() as conn:
        conn.execute(_insert_ignoring_duplicates(conn, WATERMARKS), [
            {"group_id": group_id, "topic": topic, "partition": p, "event_time_ms": None, "idle_since": None,
             "updated_at": utcnow()} for p in sorted(partitions)])
        conn.execute(delete(WATERMARKS).where(WATERMARKS.c.group_id == group_id, WATERMARKS.c.topic == topic,
                                              WATERMARKS.c.partition.not_in(sorted(partitions))))


def confirm_watermarks(engine: Engine, group_id: str, topic: str,
                       readers: Sequence[tuple[int, StoredOffset, int | None]]) -> None:
    """Between flushes: the owner of each (partition, stored offset, idle since ms) confirms its watermark row.

    Fenced like a flush: a row is touched only while the stored offset is still where this collector put it."""
    if not readers:
        return
    now = utcnow()
    with engine.begin() as conn:
        for partition, expected, idle_since_ms in readers:
            owned = select(OFFSETS.c.partition).where(
                OFFSETS.c.group_id == group_id, OFFSETS.c.topic == topic, OFFSETS.c.partition == partition,
                OFFSETS.c.next_offset == expected.next_offset).exists()
            conn.execute(update(WATERMARKS).where(
                WATERMARKS.c.group_id == group_id, WATERMARKS.c.topic == topic, WATERMARKS.c.partition == partition,
                owned).values(idle_since=_at(idle_since_ms), updated_at=now))


# --- window states ----------------------------------------------------------------------

def merge_window_row(conn: Connection, window: WindowKey, partition: int, partial: PartialWindow | None,
                     baseline: Baseline | None, label_pairs: tuple[list[Any], list[Any], list[Any]] | None = None,
                     segments: SegmentSpec = SegmentSpec()) -> int:
    """Read the row, merge `partial`'s state (and label pairs) into it, write it back; returns rejected label pairs.

    A row made for labels alone (`partial` None) keeps sub-states for the `segments` columns, for the pairs'
    segments.
    """
    events, late_events = (partial.events, partial.late_events) if partial is not None else (0, 0)
    key = and_(WINDOWS.c.model == window.model, WINDOWS.c.version == window.version,
               WINDOWS.c.window_start_ms == window.window_start_ms, WINDOWS.c.partition == partition)
    query = select(WINDOWS.c.id, WINDOWS.c.state).where(key)
    if conn.dialect.name == "postgresql":  # the scheduler's compaction may be merging this row away meanwhile
        query = query.with_for_update()
    row = conn.execute(query).first()
    merged = partial.state if partial is not None else WindowState.empty(baseline, segments=segments)
    if row is not None:
        merged = WindowState.from_bytes(row.state, baseline).merge(merged)
    rejected = fold_pairs(merged, *label_pairs) if label_pairs else 0
    blob = merged.to_bytes()
    now = utcnow()
    if row is None:
        conn.execute(insert(WINDOWS).values(
            model=window.model, version=window.version, window_start_ms=window.window_start_ms,
            window_end_ms=window.window_end_ms, partition=partition, events=events, late_events=late_events, state=blob, updated_at=now))
    else:
        conn.execute(update(WINDOWS).where(WINDOWS.c.id == row.id).values(
            events=WINDOWS.c.events + events, late_events=WINDOWS.c.late_events + late_events, state=blob,
            updated_at=now))
    return rejected


# --- dead letters -----------------------------------------------------------------------

def insert_dead_letters(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        now = utcnow()
        conn.execute(insert(DEAD_LETTERS), [{**r, "received_at": now} for r in rows])


# --- predictions and labels -------------------------------------------------------------
# A flush can carry 100 000 predictions: these statements go straight to the driver (one
# statement with arrays on PostgreSQL, C-level executemany on SQLite) instead of through
# SQLAlchemy's per-row parameter processing, which cost more than the database itself.
# JSON columns are written as JSON text (what SQLAlchemy's JSON type reads back).

def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _loads(value: Any) -> Any:
    if value is None or not isinstance(value, (str, bytes)):
        return value
    return orjson.loads(value)


def _select_by_keys(conn: Connection, sql: str, keys: Collection[RequestKey], lock: bool) -> list[tuple[Any, ...]]:
    """Run ``sql`` (``SELECT model, request_id, ... WHERE ... AND``) for the rows keyed by `keys`."""
    if not keys:
        return []
    if conn.dialect.name == "postgresql":
        models, ids = zip(*keys)
        # request_id = ANY(...) takes the primary key's index; the pairs then pick each row's model
        return list(conn.exec_driver_sql(
            sql + " request_id = ANY(%s) AND (model, request_id) IN (SELECT * FROM unnest(%s::varchar[], "
            "%s::varchar[]))" + (" FOR UPDATE" if lock else ""), (sorted(set(ids)), list(models), list(ids))))
    wanted = set(keys)
    rows: list[tuple[Any, ...]] = []
    for chunk in _chunks(sorted({rid for _, rid in wanted})):
        rows.extend(row for row in conn.exec_driver_sql(f"{sql} request_id IN ({','.join('?' * len(chunk))})",
                                                        tuple(chunk)) if (row[0], row[1]) in wanted)
    return rows


def _key(values: PredictionValues) -> RequestKey:
    return values[1], values[0]


def insert_predictions(conn: Connection, rows: Sequence[PredictionValues],
                       labels: Mapping[RequestKey, Any] | None = None,
                       labelled_at_ms: int | None = None) -> list[PredictionValues]:
    """Insert prediction rows, those in `labels` ((model, request id) -> label) labelled at `labelled_at_ms`.

    The first row per (model, request id) stays: the same event stored again is a no-op, and a
    row of a different prediction under a key already taken is refused and returned (`taken_predictions`).
    """
    if not rows:
        return []
    columns = "request_id, model, version, ts_ms, window_start_ms, prediction, segments, label, labelled_at_ms"
    if conn.dialect.name == "postgresql":
        labels = labels or {}
        ids, models, versions, ts, starts, predictions, segments = zip(*rows)
        keys = list(zip(models, ids))
        result = conn.exec_driver_sql(
            f"INSERT INTO predictions ({columns}) SELECT * FROM unnest(%s::varchar[], %s::varchar[], "
            "%s::varchar[], %s::bigint[], %s::bigint[], %s::text[]::json[], %s::text[]::json[], %s::text[]::json[], "
            "%s::bigint[]) ON CONFLICT DO NOTHING",
            (list(ids), list(models), list(versions), list(ts), list(starts), list(predictions), list(segments),
             [_json(labels[k]) if k in labels else None for k in keys],
             [labelled_at_ms if k in labels else None for k in keys]))
    elif labels:
        result = conn.exec_driver_sql(
            f"INSERT INTO predictions ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(*r, _json(labels[_key(r)]), labelled_at_ms) if _key(r) in labels else (*r, None, None) for r in rows])
    else:  # the hot path (every event of a decoder's batch): the rows as they are
        result = conn.exec_driver_sql(f"INSERT INTO predictions ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL) "
                                      "ON CONFLICT DO NOTHING", rows)
    if result.rowcount == len(rows):  # the usual case: every key was new
        return []
    return taken_predictions(conn, rows)


def taken_predictions(conn: Connection, rows: Sequence[PredictionValues]) -> list[PredictionValues]:
    """The rows whose (model, request id) is stored with another prediction (version, event time or value):
    a second event re-using a request id, refused so it cannot take the first one's label."""
    cast = "::text" if conn.dialect.name == "postgresql" else ""
    stored = {(r[0], r[1]): (r[2], int(r[3]), _loads(r[4])) for r in _select_by_keys(
        conn, f"SELECT model, request_id, version, ts_ms, prediction{cast} FROM predictions WHERE",
        {_key(r) for r in rows}, lock=False)}
    taken = []
    for r in rows:
        first = stored.get(_key(r))
        if first is not None and first != (r[2], r[3], orjson.loads(r[5])):
            taken.append(r)
    return taken


def store_predictions_ahead(engine: Engine, rows: Sequence[PredictionValues]) -> StoredAhead:
    """Insert predictions ahead of the flush, in their own transaction (idempotent, see
    `driftline.collector.folding`); returns the keys among them whose label is waiting, and the rows refused."""
    with engine.begin() as conn:
        taken = insert_predictions(conn, rows)
        # Not locked: the flush looks these up again, locked, and joins them.
        refused = {_key(r) for r in taken}
        waiting = unjoined_labels(conn, {_key(r) for r in rows} - refused, lock=False).keys()
        return StoredAhead(set(waiting), taken)


def unjoined_labels(conn: Connection, keys: Collection[RequestKey], lock: bool = True) -> dict[RequestKey, Any]:
    """(model, request id) -> label of stored labels still waiting for their prediction (rows locked).

    Called for every prediction the collector stores, while labels that wait (those that came
    before their prediction) are few: when there are no more of them than `keys`, they
    are listed first through the partial index `ix_labels_waiting` and only the keys among them
    are looked up, instead of one index probe per prediction.
    """
    if not keys:
        return {}
    false = _false(conn)
    waiting = [(model, rid) for rid, model in conn.exec_driver_sql(
        f"SELECT request_id, model FROM labels WHERE joined = {false} LIMIT {len(keys) + 1}")]
    wanted = sorted(set(waiting).intersection(keys)) if len(waiting) <= len(keys) else sorted(keys)
    if not wanted:
        return {}
    cast = "::text" if conn.dialect.name == "postgresql" else ""
    rows = _select_by_keys(conn, f"SELECT model, request_id, label{cast} FROM labels WHERE joined = {false} AND",
                           wanted, lock=lock)
    return {(model, rid): _loads(label) for model, rid, label in rows}


@dataclass(frozen=True)
class StoredPrediction:
    model: str
    version: str
    window_start_ms: int
    prediction: Any
    segments: dict[str, str] | None = None


def unlabelled_predictions(conn: Connection, keys: Collection[RequestKey]) -> dict[RequestKey, StoredPrediction]:
    """(model, request id) -> the stored prediction not labelled yet (rows locked)."""
    cast = "::text" if conn.dialect.name == "postgresql" else ""
    rows = _select_by_keys(conn, f"SELECT model, request_id, version, window_start_ms, prediction{cast}, "
                                 f"segments{cast} FROM predictions WHERE labelled_at_ms IS NULL AND", keys, lock=True)
    return {(r[0], r[1]): StoredPrediction(r[0], r[2], int(r[3]), _loads(r[4]), _loads(r[5])) for r in rows}


def unjoined_pairs(conn: Connection, limit: int) -> list[Any]:
    """Stored label/prediction pairs that nobody joined (committed at the same moment by two collectors)."""
    return list(conn.execute(
        select(LABELS.c.request_id, LABELS.c.label, PREDICTIONS.c.model, PREDICTIONS.c.version,
               PREDICTIONS.c.window_start_ms, PREDICTIONS.c.prediction, PREDICTIONS.c.segments)
        .join(PREDICTIONS, and_(PREDICTIONS.c.request_id == LABELS.c.request_id,
                                PREDICTIONS.c.model == LABELS.c.model))
        .where(LABELS.c.joined.is_(False), PREDICTIONS.c.labelled_at_ms.is_(None))
        .limit(limit).with_for_update()))


def mark_predictions_labelled(conn: Connection, labels: Mapping[RequestKey, Any], now_ms: int) -> None:
    if not labels:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "UPDATE predictions AS p SET label = v.label, labelled_at_ms = %s FROM unnest(%s::varchar[], "
            "%s::varchar[], %s::text[]::json[]) AS v(model, request_id, label) "
            "WHERE p.request_id = v.request_id AND p.model = v.model",
            (now_ms, [m for m, _ in labels], [rid for _, rid in labels], [_json(v) for v in labels.values()]))
    else:
        conn.exec_driver_sql("UPDATE predictions SET label = ?, labelled_at_ms = ? WHERE request_id = ? AND model = ?",
                             [(_json(label), now_ms, rid, model) for (model, rid), label in labels.items()])


def mark_labels_joined(conn: Connection, keys: Sequence[RequestKey]) -> None:
    if not keys:
        return
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("UPDATE labels AS l SET joined = true FROM unnest(%s::varchar[], %s::varchar[]) "
                             "AS k(model, request_id) WHERE l.request_id = k.request_id AND l.model = k.model",
                             ([m for m, _ in keys], [rid for _, rid in keys]))
    else:
        conn.exec_driver_sql("UPDATE labels SET joined = 1 WHERE request_id = ? AND model = ?",
                             [(rid, model) for model, rid in keys])


LabelValues = tuple[str, str, Any, int, bool]  # request_id, model, label, ts_ms, joined


def insert_labels(conn: Connection, rows: Sequence[LabelValues]) -> list[LabelValues]:
    """Insert (request_id, model, label, ts_ms, joined) rows; the first label per (model, request id) stays.

    The same label again is a no-op; a different label under a key already labelled is refused and returned.
    """
    if not rows:
        return []
    now = utcnow()
    columns = "request_id, model, label, ts_ms, joined, received_at"
    if conn.dialect.name == "postgresql":
        ids, models, labels, ts, joined = zip(*rows)
        result = conn.exec_driver_sql(
            f"INSERT INTO labels ({columns}) SELECT r.*, %s FROM unnest(%s::varchar[], %s::varchar[], "
            "%s::text[]::json[], %s::bigint[], %s::boolean[]) AS r ON CONFLICT DO NOTHING",
            (now, list(ids), list(models), [_json(v) for v in labels], list(ts), list(joined)))
    else:
        stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")  # SQLAlchemy's SQLite DateTime format
        result = conn.exec_driver_sql(
            f"INSERT INTO labels ({columns}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(r[0], r[1], _json(r[2]), r[3], int(r[4]), stamp) for r in rows])
    if result.rowcount == len(rows):
        return []
    cast = "::text" if conn.dialect.name == "postgresql" else ""
    stored = {(r[0], r[1]): _loads(r[2]) for r in _select_by_keys(
        conn, f"SELECT model, request_id, label{cast} FROM labels WHERE", {(r[1], r[0]) for r in rows}, lock=False)}
    return [r for r in rows if (r[1], r[0]) in stored and stored[(r[1], r[0])] != r[2]]


def _false(conn: Connection) -> str:
    return "false" if conn.dialect.name == "postgresql" else "0"


def prune(engine: Engine, cutoff_ms: int) -> tuple[int, int]:
    """Delete predictions and labels with an event time before `cutoff_ms`; returns the counts."""
    with engine.begin() as conn:
        predictions = conn.execute(delete(PREDICTIONS).where(PREDICTIONS.c.ts_ms < cutoff_ms)).rowcount
        labels = conn.execute(delete(LABELS).where(LABELS.c.ts_ms < cutoff_ms)).rowcount
    return int(predictions or 0), int(labels or 0)


# --- look-ups outside the flush -----------------------------------------------------------

def load_baseline(engine: Engine, model: str, version: str) -> Baseline | None:
    with engine.connect() as conn:
        summary = conn.execute(select(BASELINES.c.summary).where(
            BASELINES.c.model == model, BASELINES.c.version == version)).scalar()
    return Baseline.from_dict(summary) if summary else None


def stored_watermark(engine: Engine, model: str, version: str, partition: int) -> int | None:
    """The largest event time stored for a model version on one partition (its latest window's state)."""
    with engine.connect() as conn:
        blob = conn.execute(select(WINDOWS.c.state).where(
            WINDOWS.c.model == model, WINDOWS.c.version == version, WINDOWS.c.partition == partition)
            .order_by(WINDOWS.c.window_start_ms.desc()).limit(1)).scalar()
    return WindowState.from_bytes(blob).max_event_ms if blob is not None else None
