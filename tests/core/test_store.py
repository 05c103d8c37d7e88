"""The store on SQLite and PostgreSQL: migrations, models, status report."""
from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from driftline.errors import UserError
from driftline.store import db as store_db
from driftline.store.models import (Alert, Base, ConsumerOffset, DeadLetter, ModelAlias, ModelVersion,
                                    Notification, WindowStateRecord)
from driftline.store.queries import status_report


def test_migrations_create_exactly_the_models(db_url):
    with store_db.get_engine(db_url).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"


def test_upgrade_is_idempotent(db_url):
    store_db.upgrade(db_url)
    store_db.upgrade(db_url)
    assert store_db.is_migrated(db_url)


def test_model_version_is_unique_per_model(db_url):
    with store_db.session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1", artifact_sha256="a" * 64, metrics={"auc": 0.9}))
    with pytest.raises(IntegrityError):
        with store_db.session_scope(db_url) as s:
            s.add(ModelVersion(model="m", version="1"))
    with store_db.session_scope(db_url) as s:
        row = s.scalars(select(ModelVersion)).one()
        assert row.metrics == {"auc": 0.9} and row.created_at is not None


def test_window_state_rows_are_unique_per_partition_and_blobs_round_trip(db_url):
    blob = bytes(range(256)) * 100
    with store_db.session_scope(db_url) as s:
        for partition in (0, 1):
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=60_000, window_end_ms=120_000,
                                    partition=partition, events=10, state=blob))
    with pytest.raises(IntegrityError):
        with store_db.session_scope(db_url) as s:
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=60_000, window_end_ms=120_000,
                                    partition=0, events=1, state=b""))
    with store_db.session_scope(db_url) as s:
        states = s.scalars(select(WindowStateRecord)).all()
        assert [r.state for r in states] == [blob, blob]


def test_offsets_and_data_commit_together_or_not_at_all(db_url):
    with pytest.raises(RuntimeError):
        with store_db.session_scope(db_url) as s:
            s.add(ConsumerOffset(group_id="g", topic="t", partition=0, next_offset=42))
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=0, window_end_ms=60_000,
                                    partition=0, events=5, state=b"x"))
            s.flush()
            raise RuntimeError("crash between write and commit")
    with store_db.session_scope(db_url) as s:
        assert s.scalars(select(ConsumerOffset)).all() == []
        assert s.scalars(select(WindowStateRecord)).all() == []


def test_status_report_counts_events_windows_dead_letters_and_firing_alerts(db_url):
    with store_db.session_scope(db_url) as s:
        s.add(ModelVersion(model="credit", version="1"))
        s.add(ModelAlias(model="credit", alias="production", version="1"))
        for start, partition, events in [(0, 0, 10), (0, 1, 5), (60_000, 0, 7)]:
            s.add(WindowStateRecord(model="credit", version="1", window_start_ms=start, window_end_ms=start + 60_000,
                                    partition=partition, events=events, state=b""))
        s.add(WindowStateRecord(model="other", version="2", window_start_ms=0, window_end_ms=60_000,
                                partition=0, events=3, state=b""))
        s.add(DeadLetter(topic="driftline.inference", partition=0, offset=1, reason="bad", raw=b"x", raw_size=1))
        s.add(Alert(fingerprint="f1", model="credit", version="1", detector="data_drift", feature="income",
                    state="firing", summary="income drifted"))
        s.add(Alert(fingerprint="f2", model="credit", version="1", detector="latency", feature="",
                    state="resolved"))
    with store_db.session_scope(db_url) as s:
        report = status_report(s)
    nothing_judged = {"judged_up_to_ms": None, "judged_up_to": None, "late_events": 0}
    assert report["models"] == [
        {"model": "credit", "version": "1", "events": 22, "windows": 2, "registered": True, "production": True,
         **nothing_judged},
        {"model": "other", "version": "2", "events": 3, "windows": 1, "registered": False, "production": False,
         **nothing_judged},
    ]
    # no collector has recorded a watermark: nothing to list, and no low watermark to show
    assert report["watermarks"] == [] and report["stream_watermark_ms"] is None
    assert report["dead_letters"] == 1
    assert [(a["fingerprint"], a["state"], a["feature"]) for a in report["alerts"]] == [("f1", "firing", "income")]


def test_status_shows_how_far_each_version_is_judged_and_the_collectors_watermark(db_url, monkeypatch):
    """judged_up_to_ms / late_events per version, the partitions' watermarks with their states and the low
    watermark, in `status --json` and in the table (a stalled partition named; one an old group left behind is not)."""
    from datetime import datetime, timezone

    from click.testing import CliRunner

    from driftline.commands import status as status_command
    from driftline.config import TOPIC_INFERENCE
    from driftline.store.models import PartitionWatermark, WindowEvaluation

    now = 1_767_268_800_000  # 2026-01-01 12:00:00 UTC
    minute, idle_ms = 60_000, 30_000
    at = lambda ms: datetime.fromtimestamp(ms / 1000, tz=timezone.utc)  # noqa: E731
    with store_db.session_scope(db_url) as s:
        s.add_all([ModelVersion(model="credit", version="1"), ModelVersion(model="credit", version="2")])
        for start, late in ((now - 5 * minute, 2), (now - 4 * minute, 3)):
            s.add(WindowEvaluation(model="credit", version="1", window_start_ms=start, window_end_ms=start + minute,
                                   events=10, late_events=late, status="ok"))
        for group, partition, event_ms, idle_since_ms, updated_ms in (
                ("g", 0, now - 40_000, None, now - 2_000),  # reading
                ("old", 0, now - 900_000, None, now - 800_000),  # a group left behind: g reads partition 0
                ("g", 1, now - 100_000, None, now - 90_000),  # stalled: its reader is gone
                ("g", 2, now - 600_000, now - 60_000, now - 3_000)):  # idle: counts as the wall clock
            s.add(PartitionWatermark(group_id=group, topic=TOPIC_INFERENCE, partition=partition,
                                     event_time_ms=event_ms, idle_since=None if idle_since_ms is None else at(idle_since_ms),
                                     updated_at=at(updated_ms)))
    with store_db.session_scope(db_url) as s:
        report = status_report(s, now_ms=now, idle_ms=idle_ms)
    versions = {r["version"]: (r["judged_up_to_ms"], r["judged_up_to"], r["late_events"]) for r in report["models"]}
    assert versions == {"1": (now - 3 * minute, "2026-01-01T11:57:00.000Z", 5), "2": (None, None, 0)}
    assert [(w["partition"], w["group_id"], w["state"]) for w in report["watermarks"]] == [
        (0, "g", "reading"), (0, "old", "stalled"), (1, "g", "stalled"), (2, "g", "idle")]
    first = report["watermarks"][0]
    assert (first["topic"], first["event_time_ms"], first["lag_seconds"], first["updated_ms"]) == \
        (TOPIC_INFERENCE, now - 40_000, 40.0, now - 2_000)
    assert report["stream_watermark_ms"] == now - 100_000  # the stalled partition holds it back

    monkeypatch.setattr(status_command, "time", type("Clock", (), {"time": staticmethod(lambda: now / 1000)}))
    monkeypatch.setenv("DRIFTLINE_IDLE_PARTITION_SECONDS", "30")
    result = CliRunner().invoke(status_command.status, ["--db", db_url])
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.output.splitlines() if line.startswith("credit ")}
    assert "JUDGED UP TO" in result.output and "11:57:00 UTC" in rows["1"] and rows["1"].split()[4] == "5"
    assert "UTC" not in rows["2"]
    assert "collectors have stored events up to 11:58:20 UTC, 100 s behind (stalled: partition 1)" in result.output
    # a partition with nothing stored yet holds every window back
    with store_db.session_scope(db_url) as s:
        s.add(PartitionWatermark(group_id="g", topic=TOPIC_INFERENCE, partition=3, event_time_ms=None,
                                 updated_at=at(now - 1_000)))
    with store_db.session_scope(db_url) as s:
        report = status_report(s, now_ms=now, idle_ms=idle_ms)
    assert report["stream_watermark_ms"] is None and report["watermarks"][-1]["state"] == "waiting"
    result = CliRunner().invoke(status_command.status, ["--db", db_url, "--json"])
    assert result.exit_code == 0, result.output
    assert '"stream_watermark_ms": null' in result.output and '"state": "waiting"' in result.output


def test_outbox_idempotency_key_is_unique(db_url):
    with store_db.session_scope(db_url) as s:
        s.add(Notification(idempotency_key="k", channel="slack", kind="trigger", payload={"a": 1}))
    with pytest.raises(IntegrityError):
        with store_db.session_scope(db_url) as s:
            s.add(Notification(idempotency_key="k", channel="slack", kind="trigger", payload={}))


def test_sqlite_store_uses_wal(sqlite_url):
    with store_db.get_engine(sqlite_url).connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_an_unsupported_database_url_is_a_clear_error_without_its_password():
    with pytest.raises(UserError) as refused:
        store_db.get_engine("postgresql+nodriver://monitor:s3cret@db.example:5432/driftline")
    assert "no SQLAlchemy dialect for 'postgresql+nodriver'" in str(refused.value)
    assert "s3cret" not in str(refused.value) and "monitor:***@db.example" in str(refused.value)


def test_migration_0007_keys_predictions_and_labels_by_model_and_keeps_their_rows(db_url):
    from alembic import command
    from sqlalchemy import text

    from driftline.store.models import LabelRecord, PredictionRecord

    # a store as release 0006 made it, with rows
    command.downgrade(store_db.alembic_config(db_url), "base")
    store_db.upgrade(db_url, "0006")
    engine = store_db.get_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO predictions (request_id, model, version, ts_ms, window_start_ms, prediction, "
                          "label, labelled_at_ms, segments) VALUES ('order-1', 'fraud', '3', 5, 0, '0.9', '1', 7, "
                          "'{\"region\": \"north\"}'), ('order-2', 'fraud', '3', 6, 0, '[0.2, 0.8]', NULL, NULL, NULL)"))
        conn.execute(text("INSERT INTO labels (request_id, model, label, ts_ms, joined, received_at) VALUES "
                          "('order-1', 'fraud', '1', 5, :joined, :at)"), {"joined": True, "at": "2026-12-01 00:00:00"})
    store_db.upgrade(db_url)
    with store_db.session_scope(db_url) as s:
        kept = {(p.model, p.request_id): (p.version, p.ts_ms, p.prediction, p.label, p.labelled_at_ms, p.segments)
                for p in s.scalars(select(PredictionRecord))}
        labels = [(lab.model, lab.request_id, lab.label, lab.joined) for lab in s.scalars(select(LabelRecord))]
    assert kept == {("fraud", "order-1"): ("3", 5, 0.9, 1, 7, {"region": "north"}),
                    ("fraud", "order-2"): ("3", 6, [0.2, 0.8], None, None, None)}
    assert labels == [("fraud", "order-1", 1, True)]
    # another model may now score and label the same request id
    with store_db.session_scope(db_url) as s:
        s.add(PredictionRecord(request_id="order-1", model="credit", version="1", ts_ms=5, window_start_ms=0,
                               prediction=0.1))
        s.add(LabelRecord(request_id="order-1", model="credit", label=0, ts_ms=5, joined=False))
    with store_db.session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(PredictionRecord)) == 3
        assert s.scalar(select(func.count()).select_from(LabelRecord)) == 2
    # still one row per (model, request id)
    with pytest.raises(IntegrityError):
        with store_db.session_scope(db_url) as s:
            s.add(PredictionRecord(request_id="order-1", model="credit", version="1", ts_ms=6, window_start_ms=0,
                                   prediction=0.2))
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
