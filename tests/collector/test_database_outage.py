"""The database goes away for a few seconds: flushes fail and are retried; nothing is committed
without its data, nothing is lost, nothing is counted twice."""
from __future__ import annotations

import time

import psycopg
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import PredictionRecord
from tests.support.collector_helpers import collector_thread, config, event, events, merged, produce
from tests.support.waiting import wait_until

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _set_connections(database: str, allowed: bool) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}')
        if not allowed:  # and cut every open session, mid-transaction or not
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (database,))


def test_flushes_retry_through_a_database_outage(broker, postgres_url, unique_id):
    model = f"outage-{unique_id}"
    database = make_url(postgres_url).database
    produce(broker, [encode_event(event(model, i, request_id=f"{unique_id}-{i}")) for i in range(300)])
    cfg = config(broker, postgres_url, flush_interval_s=0.1, retry_min_s=0.2, retry_max_s=0.5)
    with collector_thread(cfg) as collector:
        wait_until(lambda: events(postgres_url, model) == 300, message="the first 300 events")
        errors_before = collector.metrics.flushes.labels("error")._value.get()
        try:
            _set_connections(database, False)
            # events keep coming while the store is unreachable
            produce(broker, [encode_event(event(model, i, request_id=f"{unique_id}-{i}"))
                             for i in range(300, 1_000)])
            wait_until(lambda: collector.metrics.flushes.labels("error")._value.get() >= errors_before + 3,
                       message="failed flush attempts while the database is down")
            assert collector.consumed - collector.flushed >= 700  # read, held, not committed
        finally:
            _set_connections(database, True)
        wait_until(lambda: events(postgres_url, model) == 1_000, timeout=60, message="all 1 000 events")
        wait_until(lambda: not collector._pending(), message="the last flush")
        time.sleep(0.5)  # an observation window, not a wait: a late double count would show in it
    assert events(postgres_url, model) == 1_000
    states = merged(postgres_url, model)
    assert sum(s.features["x"].total for s in states.values()) == sum(range(1_000))
    with store_db.session_scope(postgres_url) as session:
        predictions = session.scalar(select(func.count()).select_from(PredictionRecord)
                                     .where(PredictionRecord.model == model))
    assert predictions == 1_000
