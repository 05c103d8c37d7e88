"""Day partitions of the detector results on PostgreSQL (migration 0010): made ahead, listed, dropped.

`detector_results` is partitioned by range of `window_start_ms`, one partition per UTC day in the schema
`driftline_partitions` (named `detector_results_pYYYYMMDD`) beside a default partition for rows of
days without one (rows from before the migration, a backlog older than the partitions). Retention
drops a whole day at once (`drop_day`) where SQLite, or the default partition, deletes rows.
Every function here is a no-op on SQLite, where nothing is partitioned.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Connection

SCHEMA = "driftline_partitions"
DAY_MS = 86_400_000
PARTITIONED_TABLES = ("detector_results",)


def is_partitioned(conn: Connection, table: str) -> bool:
    if conn.dialect.name != "postgresql":
        return False
    return bool(conn.exec_driver_sql(
        "SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = %s AND n.nspname = current_schema()",
        (table,)).first())


def day_name(table: str, day_ms: int) -> str:
    return f"{table}_p{datetime.fromtimestamp(day_ms / 1000, tz=timezone.utc):%Y%m%d}"


def day_partitions(conn: Connection, table: str) -> dict[int, str]:
    """Start of day (epoch ms) -> partition name, of `table`'s day partitions (the default one not included)."""
    if not is_partitioned(conn, table):
        return {}
    names = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE i.inhparent = %s::regclass AND n.nspname = %s",
        (table, SCHEMA)).scalars()
    out = {}
    for name in names:
        stamp = name.rsplit("_p", 1)[-1]
        if name.startswith(f"{table}_p") and stamp.isdigit() and len(stamp) == 8:
            day = datetime.strptime(stamp, "%Y%m%d").replace(tzinfo=timezone.utc)
            out[int(day.timestamp() * 1000)] = name
    return out


def ensure_days(conn: Connection, table: str, first_day_ms: int, last_day_ms: int) -> list[str]:
    """Create the day partitions of [first_day_ms, last_day_ms] that are missing; returns the names made.

    A day whose rows already sit in the default partition keeps them there (PostgreSQL refuses a new
    partition over rows of the default one): retention deletes those rows one by one instead."""
    if not is_partitioned(conn, table):
        return []
    have = day_partitions(conn, table)
    made = []
    day = first_day_ms // DAY_MS * DAY_MS
    while day <= last_day_ms:
        if day not in have:
            taken = conn.exec_driver_sql(
                f"SELECT 1 FROM {SCHEMA}.{table}_default WHERE window_start_ms >= %s AND window_start_ms < %s "
                "LIMIT 1", (day, day + DAY_MS)).first()
            if not taken:
                name = day_name(table, day)
                conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.{name} PARTITION OF {table} "
                                     f"FOR VALUES FROM ({day}) TO ({day + DAY_MS})")
                made.append(name)
        day += DAY_MS
    return made


def drop_day(conn: Connection, table: str, day_ms: int) -> bool:
    """Drop `table`'s partition of the day starting at `day_ms` with every row in it; False if it has none."""
    name = day_partitions(conn, table).get(day_ms)
    if name is None:
        return False
    conn.exec_driver_sql(f"ALTER TABLE {table} DETACH PARTITION {SCHEMA}.{name}")
    conn.exec_driver_sql(f"DROP TABLE {SCHEMA}.{name}")
    return True
