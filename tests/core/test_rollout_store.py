"""Rollout plans in the store: one writer, validated against the registry, an append-only history, verdicts."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from driftline.errors import UserError
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.aliases import move_alias
from driftline.store.models import ModelVersion, RolloutStep
from driftline.store.queries import status_report
from driftline.store.rollouts import (BY_POLICY, clear_plan, current_plan, latest_verdict, record_verdict, rollouts,
                                      set_plan, steps, verdicts)

MODEL = "credit"


def _registry(url: str, versions=("1", "2", "3"), production: str | None = "1") -> None:
    with store_db.session_scope(url) as s:
        for version in versions:
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        if production is not None:
            move_alias(s, MODEL, production, "promote", None)


def test_a_plan_is_set_changed_and_cleared_with_every_step_recorded(db_url):
    _registry(db_url)
    with store_db.session_scope(db_url) as s:
        assert set_plan(s, shadow_plan(MODEL, "2", 0.5), reason="first look") is None
    with store_db.session_scope(db_url) as s:
        assert current_plan(s, MODEL) == shadow_plan(MODEL, "2", 0.5)
        previous = set_plan(s, canary_plan(MODEL, "2", 5), by=BY_POLICY)
        assert previous == shadow_plan(MODEL, "2", 0.5).to_dict()
    with store_db.session_scope(db_url) as s:
        assert current_plan(s, MODEL) == canary_plan(MODEL, "2", 5)
        assert clear_plan(s, MODEL, reason="done") == canary_plan(MODEL, "2", 5).to_dict()
    with store_db.session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        assert clear_plan(s, MODEL) is None  # nothing to clear: no step either
        history = steps(s, MODEL)
    assert [(h["by"], h["action"]) for h in history] == [("cli", "set"), ("policy", "set"), ("cli", "clear")]
    assert history[0]["from"] is None and history[0]["to"]["share"] == 0.5 and history[0]["reason"] == "first look"
    assert history[1]["from"]["mode"] == "shadow" and history[1]["to"] == {"model": MODEL, "mode": "canary",
                                                                           "candidate": "2", "weight": 5.0}
    assert history[2]["from"]["mode"] == "canary" and history[2]["to"] is None
    assert all(h["at"].endswith("Z") for h in history)


@pytest.mark.parametrize("plan, message", [
    (canary_plan(MODEL, "9", 5), "has no version '9'"),
    (canary_plan(MODEL, "1", 5), "production version"),
    (shadow_plan(MODEL, "1"), "production version"),
    (ab_plan(MODEL, [("1", 50), ("9", 50)]), "has no version '9'"),
])
def test_plans_the_registry_cannot_serve_are_refused(db_url, plan, message):
    _registry(db_url)
    with pytest.raises(UserError, match=message), store_db.session_scope(db_url) as s:
        set_plan(s, plan)
    with store_db.session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        assert s.scalars(select(RolloutStep)).all() == []


def test_an_ab_test_may_keep_production_as_one_arm_but_needs_another(db_url):
    _registry(db_url)
    with store_db.session_scope(db_url) as s:
        set_plan(s, ab_plan(MODEL, [("1", 50), ("2", 50)]))
    with store_db.session_scope(db_url) as s:
        assert current_plan(s, MODEL).versions == ("1", "2")


def test_a_model_without_production_or_with_a_pruned_candidate_is_refused(db_url):
    _registry(db_url, production=None)
    with pytest.raises(UserError, match="no production version"), store_db.session_scope(db_url) as s:
        set_plan(s, canary_plan(MODEL, "2", 5))
    with store_db.session_scope(db_url) as s:
        move_alias(s, MODEL, "1", "promote", None)
        s.scalars(select(ModelVersion).where(ModelVersion.version == "3")).one().stage = "pruned"
    with pytest.raises(UserError, match="pruned"), store_db.session_scope(db_url) as s:
        set_plan(s, canary_plan(MODEL, "3", 5))
    with pytest.raises(UserError, match="cli, policy"), store_db.session_scope(db_url) as s:
        set_plan(s, canary_plan(MODEL, "2", 5), by="someone")


def test_verdicts_are_written_per_window_and_replaced_on_reanalysis(db_url):
    with store_db.session_scope(db_url) as s:
        record_verdict(s, MODEL, "2", 0, 60_000, "inconclusive", [{"metric": "auc", "why": "too few labels"}])
        record_verdict(s, MODEL, "2", 60_000, 120_000, "pass")
        record_verdict(s, MODEL, "3", 0, 60_000, "fail", ["latency p99 above production's"])
    with store_db.session_scope(db_url) as s:
        record_verdict(s, MODEL, "2", 0, 60_000, "fail", ["error rate"])
    with store_db.session_scope(db_url) as s:
        found = verdicts(s, MODEL, "2")
        assert [(v["window_start_ms"], v["verdict"], v["reasons"]) for v in found] == [
            (0, "fail", ["error rate"]), (60_000, "pass", [])]
        assert latest_verdict(s, MODEL, "2")["verdict"] == "pass"
        assert latest_verdict(s, MODEL, "4") is None
        assert len(verdicts(s, MODEL)) == 3
    with pytest.raises(UserError, match="pass, fail, inconclusive"), store_db.session_scope(db_url) as s:
        record_verdict(s, MODEL, "2", 0, 60_000, "maybe")


def test_a_verdict_keeps_the_comparisons_behind_it_and_refuses_what_json_cannot_hold(db_url):
    details = {"reference": "1", "alpha": 0.025, "winner": "3",
               "comparisons": [{"arm": "3", "metric": "quality_delta", "value": 0.12, "lower": 0.05, "upper": 0.19,
                                "count": 1800, "insufficient_data": False}],
               "examples": [{"arm": "3", "request_id": "r-\u00e9-1", "production": 0.2, "candidate": 0.9,
                             "difference": 0.7}]}
    with store_db.session_scope(db_url) as s:
        record_verdict(s, MODEL, "2,3", 0, 60_000, "pass", ["A/B test: arm 3 is the winner"], details)
        record_verdict(s, MODEL, "2,3", 60_000, 120_000, "inconclusive")
    with store_db.session_scope(db_url) as s:
        first, second = verdicts(s, MODEL, "2,3")
        assert first["details"] == details and second["details"] == {}
    with store_db.session_scope(db_url) as s:  # a re-analysis replaces the details with the verdict
        record_verdict(s, MODEL, "2,3", 0, 60_000, "fail", ["arm 2 failed"], {"reference": "1", "comparisons": []})
    with store_db.session_scope(db_url) as s:
        assert verdicts(s, MODEL, "2,3")[0]["details"] == {"reference": "1", "comparisons": []}
    for bad, message in (({"comparisons": [{"value": float("nan")}]}, "not storable JSON"),
                         ({"examples": [object()]}, "not storable JSON"), (["a list"], "JSON object")):
        with pytest.raises(UserError, match=message), store_db.session_scope(db_url) as s:
            record_verdict(s, MODEL, "2,3", 0, 60_000, "fail", [], bad)
    with store_db.session_scope(db_url) as s:  # nothing was lost to the refused writes
        assert verdicts(s, MODEL, "2,3")[0]["verdict"] == "fail"


def test_status_lists_the_current_rollouts_with_their_steps_and_latest_verdict(db_url):
    _registry(db_url)
    with store_db.session_scope(db_url) as s:
        set_plan(s, shadow_plan(MODEL, "2"))
    with store_db.session_scope(db_url) as s:
        clear_plan(s, MODEL)
    with store_db.session_scope(db_url) as s:
        # an ended rollout stays in the report, as cleared, for ROLLOUT_ENDED_VISIBLE_SECONDS
        assert [(r["candidate"], r["outcome"]) for r in status_report(s)["rollouts"]] == [("2", "cleared")]
        set_plan(s, shadow_plan(MODEL, "3"))
    with store_db.session_scope(db_url) as s:
        set_plan(s, canary_plan(MODEL, "3", 10))
        report = status_report(s)["rollouts"]
    assert [r["outcome"] for r in report] == ["running", "cleared"]  # the running one first
    entry = report[0]
    assert (entry["model"], entry["mode"], entry["candidate"], entry["production"], entry["verdict"]) == (
        MODEL, "canary", "3", "1", None)
    assert [step["to"]["mode"] for step in entry["steps"]] == ["shadow", "canary"]  # since the last clear
    with store_db.session_scope(db_url) as s:
        record_verdict(s, MODEL, "3", 0, 60_000, "pass")
        assert rollouts(s)[0]["verdict"] == "pass"
