"""The ab and aa scenarios judged by the rollout analysis without a running stack, cheap enough for every run.

The scenario set-up trains the candidate (the small MLP, as the e2e runs use) and writes the plan;
the scenario's traffic is routed by that plan (`driftline.rollouts.assign`), answered by both
versions loaded as the worker loads them, folded with its labels into 4-second window states of
60 requests a second, and judged window by window by the scheduler's rollout analysis. The A/A
run (production against an equally good candidate) must declare no winner over four times the
labels an e2e run collects; the A/B run, on the same machinery, must declare the candidate.
"""
from __future__ import annotations

import random
import shutil
import time

import numpy as np
import pytest

from driftline.config import load_settings
from driftline.rollouts import assign
from driftline.scheduler.jobs import SchedulerJobs
from driftline.store import db
from driftline.store.db import session_scope
from driftline.store.models import WindowStateRecord
from driftline.store.rollouts import current_plan, steps
from driftline.window_state import EventBatch, WindowState
from driftline.worker.dataset import generate
from driftline.worker.publish import train_and_publish
from driftline.worker.registry import Registry
from driftline.worker.replay import build_traffic
from driftline.worker.scenario_setup import prepare_candidate, start_rollout
from driftline.worker.scenarios import SCENARIOS
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.server import load_version
from driftline.worker.training import TrainConfig

MODEL = "credit-default"
WINDOW_SECONDS = 4
LATENESS_SECONDS = 2
RATE = 60
PER_WINDOW = RATE * WINDOW_SECONDS
# The e2e runs' policy: judged from the third window, 40 events and 100 labels a side.
ROLLOUTS = "[rollouts]\nwindows = 3\nmin_events = 40\nmin_labels = 100\n"
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # trains two versions, judges 40 windows


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store and registry whose production version is `driftline train --size small`'s (trained once)."""
    home = tmp_path_factory.mktemp("ab-home")
    db_url = f"sqlite:///{home / 'driftline.db'}"
    db.upgrade(db_url)
    inputs, labels = generate(20_000, 7)
    train_and_publish(Registry(db_url, home / "models"), MODEL, inputs, labels, TrainConfig(size="small", seed=7),
                      promote=True)
    return home


def _judge(trained, tmp_path, scenario_name: str, windows: int, seed: int):
    """The scenario's rollout judged over `windows` windows: (outcomes, plan now, steps, the plan set)."""
    home = tmp_path / "home"
    shutil.copytree(trained, home)
    db_url = f"sqlite:///{home / 'driftline.db'}"
    (home / "driftline.toml").write_text(ROLLOUTS)
    jobs = SchedulerJobs(load_settings(home / "driftline.toml", db=db_url, window_seconds=WINDOW_SECONDS,
                                       allowed_lateness_seconds=LATENESS_SECONDS))
    registry = Registry(db_url, home / "models")
    scenario = SCENARIOS[scenario_name]
    candidate = prepare_candidate(registry, MODEL, scenario.rollout.candidate)
    plan = start_rollout(db_url, registry, scenario, MODEL, candidate, jobs.rollouts.policies.for_model(MODEL),
                         RATE, WINDOW_SECONDS)
    production = registry.alias(MODEL)
    loaded = {version: load_version(registry, MODEL, version, "cpu") for version in plan.versions}
    traffic = build_traffic(scenario, 0, windows * PER_WINDOW, seed)
    features = FeatureTransform().apply(traffic.records)
    rng = random.Random(seed)
    routed = np.array([assign(plan, production, None, rng).version for _ in traffic.records])
    first = (int(time.time() * 1000) // (WINDOW_SECONDS * 1000) + 1) * WINDOW_SECONDS * 1000  # after the plan
    outcomes = []
    with session_scope(db_url) as session:
        baselines = {version: jobs.cache.baseline(session, MODEL, version) for version in plan.versions}
    for window in range(windows):
        start = first + window * WINDOW_SECONDS * 1000
        rows = np.arange(window * PER_WINDOW, (window + 1) * PER_WINDOW)
        for version in plan.versions:
            mine = rows[routed[rows] == version]
            predictions = loaded[version].predict([features[i] for i in mine])
            events = [{"event_id": f"{version}-{i}", "request_id": f"r-{i}", "model": MODEL, "version": version,
                       "ts_ms": start + int(i - rows[0]) * WINDOW_SECONDS * 1000 // PER_WINDOW,
                       "features": features[i], "prediction": p, "latency_ms": {"total": 5.0 + (i % 7)}}
                      for i, p in zip(mine, predictions)]
            state = WindowState.empty(baselines[version]).add_batch(EventBatch.from_events(events))
            state.add_labels(predictions, traffic.labels[mine])
            with session_scope(db_url) as session:
                session.add(WindowStateRecord(model=MODEL, version=version, window_start_ms=start,
                                              window_end_ms=start + WINDOW_SECONDS * 1000, partition=0,
                                              events=len(events), state=state.to_bytes()))
        outcomes += jobs.analyse_rollouts(now_ms=start + (WINDOW_SECONDS + LATENESS_SECONDS) * 1000)
    with session_scope(db_url) as session:
        return outcomes, current_plan(session, MODEL), steps(session, MODEL), plan


def test_aa_declares_no_winner(trained, tmp_path):
    # 40 windows: 4 800 labels an arm, four times what a 75-second e2e run gathers
    outcomes, now, history, plan = _judge(trained, tmp_path, "aa", windows=40, seed=21)
    assert len(outcomes) == 40
    assert [o.verdict.sequential["winner"] for o in outcomes if o.verdict.sequential] == \
        [None] * sum(1 for o in outcomes if o.verdict.sequential)
    assert sum(1 for o in outcomes if o.verdict.sequential) >= 30  # the test ran, on enough labels
    assert not [o for o in outcomes if o.verdict.verdict == "fail"]
    assert all("A/B test: no winner yet" in " ".join(o.verdict.reasons) or
               "labels on the smaller side" in " ".join(o.verdict.reasons) for o in outcomes)
    assert now == plan and [s["by"] for s in history] == ["cli"]  # nothing moved it


def test_ab_declares_the_candidate_trained_on_the_new_concept(trained, tmp_path):
    outcomes, now, history, plan = _judge(trained, tmp_path, "ab", windows=12, seed=22)
    winners = [o.verdict.sequential["winner"] if o.verdict.sequential else None for o in outcomes]
    assert "candidate" in winners and "production" not in winners
    decided = winners.index("candidate") + 1
    assert decided <= 6, winners  # within a few windows: a few hundred labels an arm
    assert all(w == "candidate" for w in winners[decided - 1:])  # and it stays declared
    assert any(o.verdict.verdict == "pass" for o in outcomes)
    # auto_promote is off by default: the pass holds, the plan stays for a person to promote
    assert now == plan and [s["by"] for s in history] == ["cli"]


def test_ab_declares_the_better_arm_and_pages_nobody(trained, tmp_path):
    """What `driftline up --scenario ab` is held to: a pass that names the candidate better, never worse, the
    plan kept for a person to promote, and no rollout alert."""
    from sqlalchemy import select

    from driftline.store.models import Alert

    outcomes, now, history, plan = _judge(trained, tmp_path, "ab", windows=12, seed=23)
    assert plan.mode == "ab" and plan.versions == ("1", "2") and now == plan
    assert [(s["by"], s["action"]) for s in history] == [("cli", "set")]
    reasons = [" ".join(o.verdict.reasons) for o in outcomes]
    assert any(o.verdict.verdict == "pass" for o in outcomes), reasons
    assert any("A/B test: the candidate is better" in r for r in reasons), reasons
    assert not any("A/B test: the candidate is worse" in r for r in reasons), reasons
    with session_scope(f"sqlite:///{tmp_path / 'home' / 'driftline.db'}") as session:
        fired = session.scalars(select(Alert.detector).where(Alert.fired_at.is_not(None))).all()
    assert "rollout" not in fired, fired
