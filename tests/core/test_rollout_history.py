"""Rollouts after the fact: ended rollouts stay visible with outcome and verdict; `rollout history` lists them all."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from driftline.rollouts import canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.aliases import move_alias
from driftline.store.models import ModelVersion
from driftline.store.queries import status_report
from driftline.store.rollout_history import ended_rollouts, rollout_history, status_rollouts
from driftline.store.rollouts import BY_POLICY, FAIL, PASS, clear_plan, record_verdict, set_plan
from tests.core.test_rollout_cli import driftline

MODEL = "credit"


def _registry(url: str) -> None:
    with store_db.session_scope(url) as s:
        for version in ("1", "2", "3", "4"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "1", "promote", None)


def _rolled_back(url: str, candidate: str = "2") -> None:
    """A canary the policy rolled back after a failed verdict, as scheduler/rollouts.py does."""
    with store_db.session_scope(url) as s:
        set_plan(s, canary_plan(MODEL, candidate, 5))
    with store_db.session_scope(url) as s:
        record_verdict(s, MODEL, candidate, 0, 60_000, FAIL, ["error rate +3.0 pp over production"])
        clear_plan(s, MODEL, by=BY_POLICY, reason="rollback: canary failed (window 0: fail)")


def _promoted(url: str, candidate: str = "3") -> None:
    with store_db.session_scope(url) as s:
        set_plan(s, shadow_plan(MODEL, candidate, 1.0))
    with store_db.session_scope(url) as s:
        record_verdict(s, MODEL, candidate, 60_000, 120_000, PASS, [])
        clear_plan(s, MODEL, by=BY_POLICY, reason="promote: shadow passed")
        move_alias(s, MODEL, candidate, "promote", "rollout policy: shadow passed")


def test_an_automatic_rollback_stays_visible_with_its_verdict_reasons_and_step(db_url):
    _registry(db_url)
    _rolled_back(db_url)
    with store_db.session_scope(db_url) as s:
        report = status_report(s)
    assert len(report["rollouts"]) == 1
    ended = report["rollouts"][0]
    assert (ended["model"], ended["mode"], ended["candidate"], ended["outcome"]) == (MODEL, "canary", "2",
                                                                                     "rolled_back")
    assert ended["verdict"] == FAIL and ended["reasons"] == ["error rate +3.0 pp over production"]
    assert ended["ended_by"] == "policy" and ended["end_reason"].startswith("rollback")
    assert [(step["by"], step["action"]) for step in ended["steps"]] == [("cli", "set"), ("policy", "clear")]
    assert ended["ended_at"] is not None and "_ended" not in ended


def test_history_lists_every_rollout_with_its_outcome_and_running_ones_last(db_url):
    _registry(db_url)
    _rolled_back(db_url)
    _promoted(db_url)
    with store_db.session_scope(db_url) as s:
        set_plan(s, canary_plan(MODEL, "4", 5))
    with store_db.session_scope(db_url) as s:
        clear_plan(s, MODEL, reason="changed my mind")
        set_plan(s, canary_plan(MODEL, "4", 10))
    with store_db.session_scope(db_url) as s:
        history = rollout_history(s, MODEL)
        shown = status_rollouts(s)
    assert [(r["candidate"], r["outcome"]) for r in history] == [
        ("2", "rolled_back"), ("3", "promoted"), ("4", "cleared"), ("4", "running")]
    assert history[-1]["ended_at"] is None and history[-1]["plan"]["weight"] == 10
    # the status views: the running rollout first, then the ended ones, most recent first
    assert [(r["candidate"], r["outcome"]) for r in shown] == [
        ("4", "running"), ("4", "cleared"), ("3", "promoted"), ("2", "rolled_back")]


def test_ended_rollouts_leave_the_status_views_after_the_documented_period(db_url):
    _registry(db_url)
    _rolled_back(db_url)
    now = datetime.now(timezone.utc)
    with store_db.session_scope(db_url) as s:
        assert len(ended_rollouts(s, now + timedelta(days=6))) == 1
        assert ended_rollouts(s, now + timedelta(days=8)) == []
        assert len(rollout_history(s, MODEL)) == 1  # history keeps it


def test_cli_rollout_status_and_history_after_a_rollback(sqlite_url):
    _registry(sqlite_url)
    _rolled_back(sqlite_url)
    code, out, _ = driftline(sqlite_url, "rollout", "status")
    assert code == 0
    assert "no rollouts: production answers every request" in out  # nothing is running ...
    assert "canary of version 2 ended" in out and "rolled back by policy (verdict fail)" in out  # ... but it shows
    assert "error rate +3.0 pp over production" in out
    code, out, _ = driftline(sqlite_url, "rollout", "status", "--json")
    assert code == 0 and json.loads(out)[0]["outcome"] == "rolled_back"
    code, out, _ = driftline(sqlite_url, "rollout", "history", "--model", MODEL, "--json")
    assert code == 0 and [r["outcome"] for r in json.loads(out)] == ["rolled_back"]
    code, out, _ = driftline(sqlite_url, "rollout", "history", "--model", "other")
    assert code == 0 and "other: no rollouts yet" in out
    code, out, _ = driftline(sqlite_url, "status")
    assert code == 0 and "rollouts: 1" in out and "rolled back" in out
