"""Rollout scenarios end to end: `driftline up --scenario shadow|canary_regression`, checked through the store
and the local sinks.

Each run trains its candidate (the small MLP, a few seconds) and sets its plan itself; a `[rollouts]`
policy for 4-second windows (judged from the third window, 40 events and 100 labels a side, p99 judged
only beyond 50 ms) lets the scheduler act within the run. Each test waits on the outcome in the store
(the verdicts, the rollback), then stops `up` with Ctrl-C. The A/B and A/A cases run on the same
machinery without the stack (tests/worker/test_ab_scenarios.py).
"""
from __future__ import annotations

import pytest
from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import Alert, ModelAlias
from driftline.store.rollouts import current_plan, steps, verdicts
from driftline.vocabulary import FLIP_RATE, SCORE_WASSERSTEIN

from .conftest import assert_clean_exit

MODEL = "credit-default"
# 40 events a side make a window's p99 its second-slowest request, which a busy two-core machine moves by
# tens of ms between equal versions; the canary's fault adds 250 ms, far beyond the 50 ms allowed here.
ROLLOUTS = "[rollouts]\nwindows = 3\nmin_events = 40\nmin_labels = 100\np99_tolerance_ms = 50\n"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def fired(run) -> list[tuple[str, str]]:
    """(detector, version) of the alerts that fired (a pending alert that never fired is no alert)."""
    with session_scope(run.db_url) as s:
        return [(a.detector, a.version) for a in s.scalars(select(Alert).where(
            Alert.state.in_(("firing", "resolved")), Alert.fired_at.is_not(None)))]


def rollout_state(run):
    with session_scope(run.db_url) as s:
        production = s.get(ModelAlias, (MODEL, "production")).version
        return current_plan(s, MODEL), steps(s, MODEL), verdicts(s, MODEL), production


def flip_rates(judged) -> list[float]:  # noqa: ANN001
    """The flip rates of the verdicts' comparisons that had enough data."""
    return [c["value"] for v in judged for c in v["details"].get("comparisons", [])
            if not c["insufficient_data"] and c["metric"] == FLIP_RATE]


def test_shadow_reports_disagreement_and_nothing_fires(home, sink, up):
    running = up(home, "shadow", sink=sink, config=ROLLOUTS)

    def judged_three() -> bool:
        judged = rollout_state(running)[2]
        return len(judged) >= 3 and len(flip_rates(judged)) >= 3

    running.wait_for(judged_three, "three windows judged with a flip rate")
    run = running.stop()
    assert_clean_exit(run)
    plan, history, judged, production = rollout_state(run)
    assert plan is not None and plan.mode == "shadow" and plan.candidate == "2" and production == "1"
    assert [(s["by"], s["action"]) for s in history] == [("cli", "set")]  # no rollback, no step up, no promote
    assert len(judged) >= 3 and {v["candidate"] for v in judged} == {"2"}
    assert not [v for v in judged if v["verdict"] == "fail"], judged
    assert fired(run) == [] and sink.requests == []
    # Disagreement, as the rollout analysis stored it: the shadow's answers paired with production's by request
    # id in each window's coordinated samples (flip rate at the threshold, score distances, largest differences).
    compared = [(v["details"], c) for v in judged for c in v["details"].get("comparisons", [])
                if not c["insufficient_data"]]
    flips = [c["value"] for _, c in compared if c["metric"] == FLIP_RATE]
    distances = [c["value"] for _, c in compared if c["metric"] == SCORE_WASSERSTEIN]
    assert len(flips) >= 3 and all(0 <= f < 0.1 for f in flips), flips  # another seed: a few decisions change
    assert any(f > 0 for f in flips) and all(d > 0 for d in distances), (flips, distances)
    examples = [e for v in judged for e in v["details"].get("examples", [])]
    assert examples and all(e["request_id"] and e["arm"] == "2" for e in examples), examples[:3]
    assert max(abs(e["difference"]) for e in examples) > 0.01


def test_canary_regression_is_rolled_back_and_pages(home, sink, up):
    running = up(home, "canary_regression", sink=sink, config=ROLLOUTS)

    def rolled_back_and_paged() -> bool:
        history = rollout_state(running)[1]
        slack = [b["text"] for b in sink.bodies("/slack")]
        pages = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
        return (any(s["by"] == "policy" for s in history)
                and any("rolled back automatically" in text for text in slack)
                and any("rolled back automatically" in b["payload"]["summary"] for b in pages))

    running.wait_for(rolled_back_and_paged, "the rollback, its Slack message and its page")
    run = running.stop()
    assert_clean_exit(run)
    plan, history, judged, production = rollout_state(run)
    assert plan is None and production == "1"  # rolled back: production only, the alias never moved
    canary = history[0]["to"]
    assert (history[0]["by"], canary["mode"], canary["candidate"], canary["weight"]) == ("cli", "canary", "2", 25)
    assert [(s["by"], s["action"]) for s in history[1:]] == [("policy", "clear")]
    assert history[1]["reason"].startswith("the candidate failed")
    # Rolled back at the first failing verdict (however many windows a slow machine needed to judge it):
    # the verdicts before it were inconclusive, and the rollout ended with it, so none was judged after.
    assert judged[-1]["verdict"] == "fail" and all(v["verdict"] == "inconclusive" for v in judged[:-1])
    failed = " ".join(judged[-1]["reasons"])
    assert "quality_delta: fail" in failed or "p99_delta_ms: fail" in failed, failed
    assert ("rollout", "2") in fired(run)
    slack = [b["text"] for b in sink.bodies("/slack")]
    assert any("rolled back automatically" in text and "version 2" in text for text in slack), slack
    pages = [b for b in sink.bodies("/pagerduty") if b["event_action"] == "trigger"]
    assert any("rolled back automatically" in b["payload"]["summary"] for b in pages), pages
