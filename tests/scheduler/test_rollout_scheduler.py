"""The scheduler's rollout analysis: a verdict per closed window of an active plan, stored once, and the
policy's step (roll back, step up, promote, hold) written to the plan's history."""
from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select, text

from driftline.baseline import compute_baseline
from driftline.config import load_settings
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.aliases import move_alias
from driftline.store.db import session_scope
from driftline.store.models import Alert, BaselineRecord, ModelAlias, ModelVersion, RolloutVerdictRecord, WindowStateRecord
from driftline.store.queries import status_report
from driftline.store.rollouts import BY_POLICY, current_plan, set_plan, steps, verdicts
from driftline.window_state import EventBatch, WindowState
from driftline.scheduler.jobs import SchedulerJobs
from driftline.scheduler.rollouts import versions_compared
from tests.support.waiting import wait_until

MODEL = "m"
WINDOW_MS = 10_000
LATENESS_MS = 2_000
EVENTS = 1_000


def _start() -> int:
    """A window boundary after now: the plan set now covers every window the test writes."""
    return (int(time.time() * 1000) // WINDOW_MS + 1) * WINDOW_MS


def _jobs(db_url, tmp_path, **rollouts) -> SchedulerJobs:
    values = {"windows": 3, "critical": ["error_rate_delta", "p99_delta_ms"], **rollouts}
    lines = [f"{k} = {_toml(v)}" for k, v in values.items()]
    toml = tmp_path / "driftline.toml"
    toml.write_text("[rollouts]\n" + "\n".join(lines) + "\n")
    return SchedulerJobs(load_settings(toml, db=db_url, window_seconds=10, allowed_lateness_seconds=2))


def _toml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value).replace("'", '"')


def _registry(db_url, plan) -> None:
    with session_scope(db_url) as s:
        for version in ("1", "2"):
            s.add(ModelVersion(model=MODEL, version=version))
        s.flush()
        move_alias(s, MODEL, "1", "promote", None)
        set_plan(s, plan)


def _write(db_url, rng, version, start, error_rate, n=EVENTS, baseline=None, power=1.0) -> None:
    """`n` events of `version` in the window at `start`, a share `error_rate` failed; predictions uniform ** power."""
    errors = rng.uniform(size=n) < error_rate
    evs = [{"event_id": f"{version}-{start}-{i}", "ts_ms": start + i * WINDOW_MS // n, "model": MODEL,
            "version": version, "features": {"x": float(rng.normal())}, "latency_ms": {"total": float(rng.uniform(5, 20))},
            **({"status": "error", "error": "boom"} if failed else {"prediction": float(rng.uniform() ** power)})}
           for i, failed in enumerate(errors)]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(evs))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=0, events=n, state=state.to_bytes()))


def _window(db_url, rng, start, production_errors, candidate_errors, candidate="2") -> None:
    _write(db_url, rng, "1", start, production_errors)
    _write(db_url, rng, candidate, start, candidate_errors)


def _closed(start: int) -> int:
    return start + WINDOW_MS + LATENESS_MS


def _policy_steps(db_url):
    with session_scope(db_url) as s:
        return [step for step in steps(s, MODEL) if step["by"] == BY_POLICY]


def test_a_canary_with_a_much_higher_error_rate_is_rolled_back_after_the_policys_windows(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    jobs, rng, t0 = _jobs(db_url, tmp_path), np.random.default_rng(1), _start()
    seen = []
    for w in range(3):
        start = t0 + w * WINDOW_MS
        _window(db_url, rng, start, 0.01, 0.2)
        assert jobs.analyse_rollouts(now_ms=_closed(start) - 1) == []  # not closed yet
        seen += [(o.verdict.verdict, o.transition.action) for o in jobs.analyse_rollouts(now_ms=_closed(start))]
    assert seen == [("inconclusive", "hold"), ("inconclusive", "hold"), ("fail", "rollback")]
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        assert [v["verdict"] for v in verdicts(s, MODEL, "2")] == ["inconclusive", "inconclusive", "fail"]
        assert s.get(ModelAlias, (MODEL, "production")).version == "1"
        # the rollback stays visible after the fact: outcome, final verdict and its reasons, the policy's step
        [ended] = status_report(s)["rollouts"]
        assert (ended["candidate"], ended["outcome"], ended["verdict"]) == ("2", "rolled_back", "fail")
        assert ended["reasons"] and ended["steps"][-1]["by"] == "policy"
    [step] = _policy_steps(db_url)
    assert step["action"] == "clear" and step["from"]["candidate"] == "2" and step["to"] is None
    assert "failed" in step["reason"] and "error_rate_delta: fail" in step["reason"]
    # each verdict keeps the window's comparisons behind it: the error-rate delta inside its interval
    with session_scope(db_url) as s:
        stored = [v["details"] for v in verdicts(s, MODEL, "2")]
    deltas = [next(c for c in d["comparisons"] if c["metric"] == "error_rate_delta") for d in stored]
    assert all(c["arm"] == "2" and c["lower"] < c["value"] < c["upper"] and c["count"] == EVENTS for c in deltas)
    assert all(0.1 < c["value"] < 0.3 for c in deltas) and all(d["examples"] == [] for d in stored)


def test_a_second_run_over_the_same_windows_stores_nothing_new(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    jobs, rng, t0 = _jobs(db_url, tmp_path), np.random.default_rng(2), _start()
    for w in range(2):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.01, 0.01)
    now = _closed(t0 + WINDOW_MS)
    assert len(jobs.analyse_rollouts(now_ms=now)) == 2
    # a restarted scheduler (a fresh process, no cache) and a second scheduler find the windows judged
    assert _jobs(db_url, tmp_path).analyse_rollouts(now_ms=now) == []
    assert jobs.analyse_rollouts(now_ms=now) == []
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(RolloutVerdictRecord)) == 2
        assert status_report(s)["rollouts"][0]["verdict"] == "inconclusive"
    assert _policy_steps(db_url) == []


def test_too_few_events_is_inconclusive_and_the_plan_holds(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_promote=True), np.random.default_rng(3), _start()
    for w in range(4):
        _write(db_url, rng, "1", t0 + w * WINDOW_MS, 0.01)
        _write(db_url, rng, "2", t0 + w * WINDOW_MS, 0.5, n=50)  # far worse, but 50 events < min_events
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 3 * WINDOW_MS))
    assert [(o.verdict.verdict, o.transition.action) for o in outcomes] == [("inconclusive", "hold")] * 4
    assert any("windows with enough events" in r for r in outcomes[-1].verdict.reasons)
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) == canary_plan(MODEL, "2", 5)
    assert _policy_steps(db_url) == []


def test_a_canary_equal_to_production_is_stepped_up_then_judged_afresh_at_its_new_weight(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_promote=True), np.random.default_rng(4), _start()
    for w in range(3):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.0, 0.0)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    assert [(o.verdict.verdict, o.transition.action, o.transition.weight) for o in outcomes][-1] == ("pass", "step_up", 25)
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) == canary_plan(MODEL, "2", 25)
    [step] = _policy_steps(db_url)
    assert step["action"] == "set" and (step["from"]["weight"], step["to"]["weight"]) == (5, 25)
    assert "canary passed at 5 %" in step["reason"]
    # the next window starts the new stage: one window at 25 % is not enough to step again
    _window(db_url, rng, t0 + 3 * WINDOW_MS, 0.0, 0.0)
    [outcome] = jobs.analyse_rollouts(now_ms=_closed(t0 + 3 * WINDOW_MS))
    assert (outcome.verdict.verdict, outcome.transition.action) == ("inconclusive", "hold")


def test_a_canary_at_its_last_weight_is_promoted_only_when_auto_promote_is_on(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 50))
    rng, t0 = np.random.default_rng(5), _start()
    for w in range(3):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.0, 0.0)
    now = _closed(t0 + 2 * WINDOW_MS)
    held = _jobs(db_url, tmp_path).analyse_rollouts(now_ms=now)  # auto_promote off by default
    assert (held[-1].verdict.verdict, held[-1].transition.action) == ("pass", "hold")
    assert "auto_promote is off" in held[-1].transition.reason
    with session_scope(db_url) as s:  # a person restarts the stage (the CLI's step)
        set_plan(s, canary_plan(MODEL, "2", 50))
    for w in range(3, 6):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.0, 0.0)
    promoted = _jobs(db_url, tmp_path, auto_promote=True).analyse_rollouts(now_ms=_closed(t0 + 5 * WINDOW_MS))
    assert (promoted[-1].verdict.verdict, promoted[-1].transition.action) == ("pass", "promote")
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        assert s.get(ModelAlias, (MODEL, "production")).version == "2"
        assert s.scalar(select(ModelVersion.stage).where(ModelVersion.version == "1")) == "archived"
        assert [(r["outcome"], r["verdict"]) for r in status_report(s)["rollouts"]] == [("promoted", "pass")]
    [step] = _policy_steps(db_url)
    assert step["action"] == "clear" and "canary passed at the last weight" in step["reason"]


def test_a_shadow_that_passes_becomes_a_canary_at_the_first_weight(db_url, tmp_path):
    _registry(db_url, shadow_plan(MODEL, "2"))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_promote=True), np.random.default_rng(6), _start()
    for w in range(3):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.0, 0.0)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    assert (outcomes[-1].verdict.verdict, outcomes[-1].transition.action) == ("pass", "step_up")
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) == canary_plan(MODEL, "2", 1)


def test_auto_rollback_off_holds_a_failing_canary(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_rollback=False), np.random.default_rng(7), _start()
    for w in range(3):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.01, 0.2)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    assert (outcomes[-1].verdict.verdict, outcomes[-1].transition.action) == ("fail", "hold")
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) == canary_plan(MODEL, "2", 5)


def test_a_bad_rollouts_section_fails_at_start_up(db_url, tmp_path):
    from driftline.errors import UserError

    with pytest.raises(UserError, match="no_such_setting"):
        _jobs(db_url, tmp_path, no_such_setting=1)


def test_the_candidates_prediction_drift_from_the_window_evaluation_fails_the_rollout(db_url, tmp_path):
    _registry(db_url, canary_plan(MODEL, "2", 5))
    rng, t0 = np.random.default_rng(8), _start()
    baseline = compute_baseline(pd.DataFrame({"x": rng.normal(size=5000)}), predictions=rng.uniform(size=5000))
    with session_scope(db_url) as s:
        for version in ("1", "2"):
            s.add(BaselineRecord(model=MODEL, version=version, rows=5000, summary=baseline.to_dict()))
    jobs = _jobs(db_url, tmp_path, critical=["candidate_drift"])
    for w in range(3):
        start = t0 + w * WINDOW_MS
        _write(db_url, rng, "1", start, 0.0, baseline=baseline)
        _write(db_url, rng, "2", start, 0.0, baseline=baseline, power=0.3)  # its scores pile up near 1
    # one pass: the window evaluation stores each version's prediction drift, then the rollouts are judged
    assert jobs.evaluate_and_analyse(now_ms=_closed(t0 + 2 * WINDOW_MS)) == 6
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        [*_, last] = verdicts(s, MODEL, "2")
    assert last["verdict"] == "fail"
    assert any(r.startswith("candidate_drift: fail: drifted in 3 of the last 3") for r in last["reasons"])


def _lock_waiters(db_url: str) -> int:
    """Sessions of this database waiting on a lock, from a connection of their own (a fresh snapshot each call)."""
    with store_db.get_engine(db_url).connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM pg_stat_activity "
                                "WHERE datname = current_database() AND wait_event_type = 'Lock'"))


def test_a_second_scheduler_waits_for_the_first_and_judges_nothing_again(postgres_url, tmp_path):
    """Row locks: PostgreSQL only (SQLite has one writer at a time)."""
    db_url = postgres_url
    _registry(db_url, canary_plan(MODEL, "2", 5))
    first, second, rng, t0 = _jobs(db_url, tmp_path), _jobs(db_url, tmp_path), np.random.default_rng(9), _start()
    for w in range(2):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.01, 0.01)
    now, found = _closed(t0 + WINDOW_MS), {}
    with session_scope(db_url) as s:
        assert len(first.rollouts.analyse(s, MODEL, now, LATENESS_MS)) == 2  # holds the plan's row lock
        other = threading.Thread(target=lambda: found.setdefault("second", second.analyse_rollouts(now_ms=now)))
        other.start()
        # the second scheduler is seen waiting on a lock (PostgreSQL says so), and has judged nothing meanwhile
        wait_until(lambda: _lock_waiters(db_url) >= 1, timeout=60, message="the second scheduler to wait on the lock")
        assert "second" not in found and other.is_alive()
    other.join(timeout=30)
    assert found["second"] == []
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(RolloutVerdictRecord)) == 2


def test_an_ab_test_is_judged_arm_against_production_and_holds_without_a_winner(db_url, tmp_path):
    _registry(db_url, ab_plan(MODEL, [("1", 50), ("2", 50)]))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_promote=True), np.random.default_rng(10), _start()
    for w in range(3):
        _window(db_url, rng, t0 + w * WINDOW_MS, 0.0, 0.0)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    assert [(o.candidate, o.verdict.verdict, o.transition.action) for o in outcomes][-1] == ("1,2", "inconclusive", "hold")
    assert any(r.startswith("A/B test: ") for r in outcomes[-1].verdict.reasons)  # no labels: no winner yet
    with session_scope(db_url) as s:
        [rollout] = status_report(s)["rollouts"]
    assert (rollout["mode"], rollout["verdict"]) == ("ab", "inconclusive")


@pytest.mark.parametrize("plan, production, expected", [
    (canary_plan(MODEL, "2", 5), "1", ("1", ("2",))),
    (shadow_plan(MODEL, "2"), "1", ("1", ("2",))),
    (ab_plan(MODEL, [("2", 50), ("1", 50)]), "1", ("1", ("2",))),
    (ab_plan(MODEL, [("2", 50), ("3", 50)]), "1", ("2", ("3",))),  # production serves no traffic: the first arm
    (ab_plan(MODEL, [("3", 40), ("1", 30), ("2", 30)]), "1", ("1", ("3", "2"))),
    (canary_plan(MODEL, "2", 5), None, None),
])
def test_which_versions_a_plan_compares(plan, production, expected):
    assert versions_compared(plan, production) == expected


# --- shadow pairs, more than two arms, the comparisons stored behind each verdict -----------------

def _answers(db_url, version, start, request_ids, predictions, labels=None) -> None:
    """One window state of `version` answering `request_ids` with `predictions` (and their labels joined)."""
    n = len(request_ids)
    evs = [{"event_id": f"{version}-{request_id}", "request_id": request_id, "ts_ms": start + i * WINDOW_MS // n,
            "model": MODEL, "version": version, "features": {"x": 0.0}, "latency_ms": {"total": 10.0 + i % 7},
            "prediction": float(p)} for i, (request_id, p) in enumerate(zip(request_ids, predictions))]
    state = WindowState.empty(None).add_batch(EventBatch.from_events(evs))
    if labels is not None:
        state.add_labels(np.asarray(predictions, dtype=float), np.asarray(labels))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                partition=0, events=n, state=state.to_bytes()))


def test_a_shadow_is_judged_on_the_flip_rate_of_the_requests_both_windows_sampled(db_url, tmp_path):
    _registry(db_url, shadow_plan(MODEL, "2"))
    jobs, rng, t0 = _jobs(db_url, tmp_path, min_pairs=100), np.random.default_rng(11), _start()
    flipped = {}
    for w in range(3):
        start = t0 + w * WINDOW_MS
        ids = [f"req-{start}-{i}" for i in range(EVENTS)]
        production = rng.uniform(size=EVENTS)
        candidate = np.where(rng.uniform(size=EVENTS) < 0.4, 1 - production, production)  # flips ~ a fifth
        flipped.update(zip(ids, zip(production, candidate)))
        _answers(db_url, "1", start, ids, production)
        _answers(db_url, "2", start, ids, candidate)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    last = outcomes[-1].verdict
    assert last.metrics["flip_rate"].windows == 3 and last.metrics["flip_rate"].value > 0.1
    with session_scope(db_url) as s:
        stored = verdicts(s, MODEL, "2")
        blobs = [s.scalar(select(WindowStateRecord.state).where(WindowStateRecord.version == v,
                                                               WindowStateRecord.window_start_ms == t0 + 2 * WINDOW_MS))
                 for v in ("1", "2")]
    details = stored[-1]["details"]
    assert details["reference"] == "1" and details["alpha"] == 0.05
    [flip] = [c for c in details["comparisons"] if c["metric"] == "flip_rate"]
    # the service's flip rate is the batch computation on the requests both windows sampled
    samples = [WindowState.from_bytes(blob).sample for blob in blobs]
    paired = [r["request_id"] for r in samples[0]]
    assert len(paired) == 200 and set(paired) == {r["request_id"] for r in samples[1]}
    flips = sum((flipped[r][0] >= 0.5) != (flipped[r][1] >= 0.5) for r in paired)
    assert (flip["arm"], flip["value"], flip["count"]) == ("2", flips / 200, 200)
    assert flip["lower"] < flip["value"] < flip["upper"]
    examples = details["examples"]
    assert len(examples) == 10 and all(e["arm"] == "2" and e["request_id"] in paired for e in examples)
    worst = examples[0]
    assert worst["candidate"] - worst["production"] == pytest.approx(worst["difference"])
    assert flipped[worst["request_id"]] == (worst["production"], worst["candidate"])


def _labelled(rng, accuracy, n):
    labels = rng.binomial(1, 0.5, n)
    right = rng.uniform(size=n) < accuracy
    return np.where(right, labels, 1 - labels) * 0.8 + 0.1, labels


def test_an_arm_failing_a_critical_metric_leaves_the_ab_test_and_the_others_go_on(db_url, tmp_path):
    with session_scope(db_url) as s:
        s.add(ModelVersion(model=MODEL, version="3"))
    _registry(db_url, ab_plan(MODEL, [("1", 34), ("2", 33), ("3", 33)]))
    jobs, rng, t0 = _jobs(db_url, tmp_path), np.random.default_rng(13), _start()
    for w in range(3):
        start = t0 + w * WINDOW_MS
        for version, error_rate in (("1", 0.01), ("2", 0.01), ("3", 0.2)):
            _write(db_url, rng, version, start, error_rate)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    last = outcomes[-1]
    assert (last.candidate, last.verdict.verdict, last.transition.action, last.transition.arms) == ("1,2,3", "fail",
                                                                                      "drop_arms", ("3",))
    with session_scope(db_url) as s:
        plan = current_plan(s, MODEL)
        assert [(arm.version, arm.weight) for arm in plan.arms] == [("1", 67.0), ("2", 33.0)]
        alert = s.scalar(select(Alert).where(Alert.detector == "rollout"))
        assert "without arm 3 from now on" in alert.summary and alert.details["dropped_arms"] == ["3"]
    [step] = _policy_steps(db_url)
    assert step["action"] == "set" and step["to"]["candidate"] == "1,2"
    assert "arm 3 failed; the other arms go on" in step["reason"]
    # the two arms left are a new test, judged afresh (without arm 3's windows) and held until one wins
    t1 = t0 + 3 * WINDOW_MS
    for version, error_rate in (("1", 0.01), ("2", 0.01)):
        _write(db_url, rng, version, t1, error_rate)
    fresh = jobs.analyse_rollouts(now_ms=_closed(t1))
    assert {(o.candidate, o.verdict.verdict, o.transition.action) for o in fresh} == {("1,2", "inconclusive", "hold")}
    assert fresh[-1].window_start_ms == t1
    with session_scope(db_url) as s:
        assert [(arm.version, arm.weight) for arm in current_plan(s, MODEL).arms] == [("1", 67.0), ("2", 33.0)]


def test_an_ab_test_of_three_arms_promotes_the_winning_arm(db_url, tmp_path):
    with session_scope(db_url) as s:
        s.add(ModelVersion(model=MODEL, version="3"))
    _registry(db_url, ab_plan(MODEL, [("1", 34), ("2", 33), ("3", 33)]))
    jobs, rng, t0 = _jobs(db_url, tmp_path, auto_promote=True), np.random.default_rng(12), _start()
    for w in range(3):
        start = t0 + w * WINDOW_MS
        for version, accuracy in (("1", 0.75), ("2", 0.75), ("3", 0.92)):
            predictions, labels = _labelled(rng, accuracy, 600)
            _answers(db_url, version, start, [f"{version}-{start}-{i}" for i in range(600)], predictions, labels)
    outcomes = jobs.analyse_rollouts(now_ms=_closed(t0 + 2 * WINDOW_MS))
    last = outcomes[-1]
    assert (last.candidate, last.verdict.verdict, last.verdict.winner, last.transition.action) == ("1,2,3", "pass", "3",
                                                                                           "promote")
    assert any("alpha 0.025" in r for r in last.verdict.reasons)
    with session_scope(db_url) as s:
        assert current_plan(s, MODEL) is None
        assert s.get(ModelAlias, (MODEL, "production")).version == "3"
        details = verdicts(s, MODEL)[-1]["details"]
    assert details["winner"] == "3" and details["reference"] == "1" and details["alpha"] == 0.025
    quality = {c["arm"]: c for c in details["comparisons"] if c["metric"] == "quality_delta"}
    assert set(quality) == {"2", "3"}
    assert quality["3"]["lower"] > 0.05 and quality["2"]["lower"] < 0 < quality["2"]["upper"]
    [step] = _policy_steps(db_url)
    assert step["action"] == "clear" and "declared the candidate better" in step["reason"]
