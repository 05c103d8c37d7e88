"""Retention: old rows and far-future rows are pruned in bounded batches, by the scheduler job and by
`driftline db prune`; open windows and the rows of pending or firing alerts never are."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from driftline.commands.db import db
from driftline.config import load_settings
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import (Alert, DeadLetter, DetectorResult, LabelRecord, Notification, PredictionRecord,
                                    WindowEvaluation, WindowQuarantine, WindowStateRecord)
from driftline.scheduler.jobs import SchedulerJobs
from driftline.scheduler.retention import RetentionPolicy, prune

DAY_MS = 86_400_000
WINDOW_MS = 60_000
NOW_MS = int(datetime.now(timezone.utc).timestamp() * 1000) // WINDOW_MS * WINDOW_MS
NOW = datetime.fromtimestamp(NOW_MS / 1000, tz=timezone.utc)
# the documented ages: 14 / 30 / 90 / 30 days, 1 day ahead; rows deleted, not rolled up (tests/scheduler/test_rollups.py)
POLICY = RetentionPolicy(rollup_hourly_days=0, rollup_daily_days=0, result_rollup_days=0)
NO_ROLLUPS = "[retention]\nrollup_hourly_days = 0\nrollup_daily_days = 0\nresult_rollup_days = 0\n"


def _window_rows(s, model: str, start_ms: int) -> None:
    """One window: its state, evaluation, a detector result and a quarantine row (all keyed by its start)."""
    end = start_ms + WINDOW_MS
    s.add(WindowStateRecord(model=model, version="1", window_start_ms=start_ms, window_end_ms=end, partition=0,
                            events=1, state=b"x"))
    s.add(WindowEvaluation(model=model, version="1", window_start_ms=start_ms, window_end_ms=end, status="ok",
                           summary={}))
    s.add(DetectorResult(model=model, version="1", window_start_ms=start_ms, window_end_ms=end, detector="latency",
                         feature="", metric="p99_ms", value=1.0, breached=False, details={}))
    s.add(WindowQuarantine(model=model, version="1", window_start_ms=start_ms, window_end_ms=end, error_type="E",
                           error="e", attempts=1, next_retry_at=NOW))


# (model name, window start): which windows each test writes and what must remain.
WINDOWS = {
    "open": NOW_MS,                          # still receiving events: kept
    "recent": NOW_MS - 29 * DAY_MS,          # inside every retention: kept
    "month": NOW_MS - 31 * DAY_MS,           # state and quarantine past 30 days; results kept (90)
    "quarter": NOW_MS - 91 * DAY_MS,         # everything past its age
    "firing": NOW_MS - 120 * DAY_MS,         # the window a firing alert last saw: kept
    "future": NOW_MS + 2 * DAY_MS,           # a wrong clock: pruned at once
    "soon": NOW_MS + DAY_MS // 2,            # ahead, inside the bound: kept
}


@pytest.fixture
def filled(db_url):
    with session_scope(db_url) as s:
        for model, start in WINDOWS.items():
            _window_rows(s, model, start)
        for age in (15, 13):
            s.add(DeadLetter(topic="t", reason="bad", raw_size=0, received_at=NOW - timedelta(days=age)))
        s.add(Alert(fingerprint="f-firing", model="firing", version="1", detector="latency", state="firing",
                    last_window_start_ms=WINDOWS["firing"]))
        s.add(Alert(fingerprint="f-resolved", model="quarter", version="1", detector="latency", state="resolved",
                    last_window_start_ms=WINDOWS["quarter"]))
        for key, fingerprint, age, state in (("a", "f-firing", 40, "sent"), ("b", "f-resolved", 40, "sent"),
                                             ("c", "f-resolved", 20, "sent"), ("d", None, 40, "failed"),
                                             ("e", "f-resolved", 40, "pending")):
            s.add(Notification(idempotency_key=key, alert_fingerprint=fingerprint, channel="slack", kind="trigger",
                               payload={}, status=state, created_at=NOW - timedelta(days=age)))
        for rid, ts in (("old", NOW_MS - 8 * DAY_MS), ("now", NOW_MS), ("future", NOW_MS + 400 * DAY_MS)):
            s.add(PredictionRecord(request_id=rid, model="m", version="1", ts_ms=ts, window_start_ms=ts, prediction=1))
            s.add(LabelRecord(request_id=rid, model="m", label=1, ts_ms=ts))
    return db_url


def _remaining(db_url):
    with session_scope(db_url) as s:
        windows = {name: sorted(m for m in s.scalars(select(model.model).distinct()))
                   for name, model in (("states", WindowStateRecord), ("quarantine", WindowQuarantine),
                                       ("evaluations", WindowEvaluation), ("results", DetectorResult))}
        windows["dead_letters"] = s.scalar(select(func.count()).select_from(DeadLetter))
        windows["notifications"] = sorted(s.scalars(select(Notification.idempotency_key)))
        windows["predictions"] = sorted(s.scalars(select(PredictionRecord.request_id)))
        windows["labels"] = sorted(s.scalars(select(LabelRecord.request_id)))
    return windows


EXPECTED = {
    "states": ["firing", "open", "recent", "soon"],
    "quarantine": ["firing", "open", "recent", "soon"],
    "evaluations": ["firing", "month", "open", "recent", "soon"],
    "results": ["firing", "month", "open", "recent", "soon"],
    "dead_letters": 1,
    "notifications": ["a", "c", "e"],  # a: its alert fires; c: recent; e: not delivered yet
    "predictions": ["now", "old"],  # age is the collector's business; the year-2100 one goes
    "labels": ["now", "old"],
}
DELETED = {"dead_letters": 1, "window_states": 3, "window_quarantine": 3, "window_evaluations": 2,
           "detector_results": 2, "notifications": 2, "window_rollups": 0, "result_rollups": 0, "predictions": 1,
           "labels": 1}


def test_prune_keeps_open_windows_and_active_alerts_rows_and_deletes_the_rest(filled):
    assert prune(filled, POLICY, now_ms=NOW_MS, dry_run=True) == DELETED
    assert _remaining(filled)["states"] == sorted(WINDOWS)  # a dry run deletes nothing
    assert prune(filled, POLICY, now_ms=NOW_MS) == DELETED
    assert _remaining(filled) == EXPECTED
    assert set(prune(filled, POLICY, now_ms=NOW_MS).values()) == {0}


def test_the_scheduler_job_deletes_a_bounded_number_per_run(db_url, tmp_path):
    with session_scope(db_url) as s:
        for _ in range(7):
            s.add(DeadLetter(topic="t", reason="bad", raw_size=0, received_at=NOW - timedelta(days=20)))
    config = tmp_path / "retention.toml"
    config.write_text("[retention]\nbatch_rows = 2\nmax_batches_per_run = 2\ndead_letter_days = 10\n")
    jobs = SchedulerJobs(load_settings(config_file=config, db=db_url))
    assert [jobs.apply_retention()["dead_letters"] for _ in range(3)] == [4, 3, 0]


def test_a_tiny_retention_never_prunes_a_window_that_is_still_open(db_url):
    with session_scope(db_url) as s:
        _window_rows(s, "open", NOW_MS - WINDOW_MS - 10_000)  # ended 10 s ago: inside its 30 s lateness
        _window_rows(s, "closed", NOW_MS - 10 * WINDOW_MS)
    tiny = RetentionPolicy.from_mapping({"window_state_days": 1e-6, "result_days": 1e-6, "rollup_hourly_days": 0,
                                         "result_rollup_days": 0}, lateness_seconds=30)
    prune(db_url, tiny, now_ms=NOW_MS)
    assert _remaining(db_url)["states"] == ["open"]


def test_db_prune_prints_what_it_deleted_per_table(filled, tmp_path):
    config = tmp_path / "retention.toml"
    config.write_text(NO_ROLLUPS)
    result = CliRunner().invoke(db, ["prune", "--dry-run", "--config", str(config), "--db", filled])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines())
    assert lines["window_states"].startswith("would delete ")
    assert _remaining(filled)["states"] == sorted(WINDOWS)
    result = CliRunner().invoke(db, ["prune", "--config", str(config), "--db", filled])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines())
    # the CLI prunes against the wall clock, a moment after NOW_MS: the same rows go
    assert {table: int(lines[table].split()[-1]) for table in DELETED} == DELETED
    assert int(lines["total"].split()[-1]) == sum(DELETED.values())


def test_retention_settings_are_checked(tmp_path):
    assert RetentionPolicy.from_mapping({"dead_letter_days": 3, "batch_rows": 10}, 30) == RetentionPolicy(
        dead_letter_days=3.0, batch_rows=10, lateness_seconds=30)
    for bad in ({"dead_letters_days": 3}, {"result_days": -1}, {"batch_rows": 0}, {"future_seconds": "1d"},
                {"result_days": float("inf")}, {"batch_rows": True}, {"rollup_hourly_days": 1},
                {"result_rollup_days": 2}, {"rollup_daily_days": 3}):
        with pytest.raises(UserError, match="retention"):
            RetentionPolicy.from_mapping(bad, 30)
    config = tmp_path / "bad.toml"
    config.write_text("[retention]\nnope = 1\n")
    result = CliRunner().invoke(db, ["prune", "--config", str(config), "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code != 0 and "nope" in str(result.exception or result.output)
