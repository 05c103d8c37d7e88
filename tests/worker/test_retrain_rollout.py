"""`[alerts.retrain] rollout`: a retrained version that beat production is promoted, or entered as a shadow or
canary rollout plan for the rollout analysis to judge."""
from __future__ import annotations

import pytest

from driftline import defaults, vocabulary
from driftline.rollouts import canary_plan, shadow_plan
from driftline.store.db import session_scope
from driftline.store.rollouts import BY_POLICY, current_plan, set_plan, steps
from driftline.worker import retrain as retrain_module
from driftline.worker.dataset import generate
from driftline.worker.publish import publish
from driftline.worker.retrain import RetrainJob, run_retrain_job
from tests.support.waiting import wait_until
from tests.support.worker_helpers import make_settings, registry_with_versions


def _winning_job(tiny_results, tmp_path, monkeypatch, **changes):
    """A registry with version 1 in production and a retrain job whose candidate wins both holdout checks."""
    # the decision itself is tested in test_retraining.py; here it is the step after a win
    monkeypatch.setattr(retrain_module, "is_better", lambda *_: True)
    monkeypatch.setattr(retrain_module, "is_not_worse", lambda *_: True)
    registry = registry_with_versions(make_settings(tmp_path, "127.0.0.1:1"), [])
    publish(registry, "m", tiny_results[0])
    inputs, labels = generate(600, seed=31)
    job = RetrainJob(request_id=1, db_url=registry.db_url, artifacts_dir=str(registry.artifacts_dir), model="m",
                     inputs=inputs, labels=list(labels), epochs=1, incumbent=registry.get("m", "1"), **changes)
    return registry, job


@pytest.mark.parametrize("rollout,plan", [
    (vocabulary.ROLLOUT_SHADOW, lambda version: shadow_plan("m", version)),
    (vocabulary.ROLLOUT_CANARY, lambda version: canary_plan("m", version, defaults.ROLLOUT_CANARY_STEPS[0])),
])
def test_a_winning_candidate_enters_as_a_rollout_plan_instead_of_being_promoted(
        tiny_results, tmp_path, monkeypatch, rollout, plan):
    registry, job = _winning_job(tiny_results, tmp_path, monkeypatch, rollout=rollout)
    outcome = run_retrain_job(job)
    version = outcome["new_version"]
    assert outcome["promoted"] is False and registry.alias("m") == "1"
    assert outcome["response"]["rollout"] == plan(version).to_dict()
    assert f"entered as a {rollout}" in outcome["response"]["decision"]
    with session_scope(registry.db_url) as s:
        assert current_plan(s, "m") == plan(version)
        [step] = steps(s, "m")
    assert step["by"] == BY_POLICY and f"retrained version entered as a {rollout}" in step["reason"]


def test_promote_is_the_default_and_promotes(tiny_results, tmp_path, monkeypatch):
    registry, job = _winning_job(tiny_results, tmp_path, monkeypatch)
    assert job.rollout == vocabulary.STEP_PROMOTE
    outcome = run_retrain_job(job)
    assert outcome["promoted"] is True and registry.alias("m") == outcome["new_version"]
    assert outcome["response"]["rollout"] is None
    with session_scope(registry.db_url) as s:
        assert current_plan(s, "m") is None


def test_a_running_plan_is_left_alone(tiny_results, tmp_path, monkeypatch):
    registry, job = _winning_job(tiny_results, tmp_path, monkeypatch, rollout=vocabulary.ROLLOUT_CANARY)
    publish(registry, "m", tiny_results[1], promote=False)  # version 2, already in a person's canary
    with session_scope(registry.db_url) as s:
        set_plan(s, canary_plan("m", "2", 25))
    outcome = run_retrain_job(job)
    assert outcome["promoted"] is False and outcome["response"]["rollout"] is None
    assert "canary of version 2 is still running" in outcome["response"]["decision"]
    with session_scope(registry.db_url) as s:
        assert current_plan(s, "m") == canary_plan("m", "2", 25)


def test_a_request_asking_for_an_unknown_rollout_is_rejected_before_training(tmp_path):
    from types import SimpleNamespace

    from driftline.worker.retrain import RecentTraffic, RetrainManager

    registry = registry_with_versions(make_settings(tmp_path, "127.0.0.1:1"), [])
    manager = RetrainManager(registry, "m", RecentTraffic(10), min_rows=0, current=lambda: SimpleNamespace(version="1"))
    try:
        ticket = manager.submit("key-1", {"rollout": "yolo"})
        wait_until(lambda: manager.get(ticket.id)["status"] not in ("requested", "running"), timeout=20,
                   message="the request to be decided")
        document = manager.get(ticket.id)
    finally:
        manager.shutdown()
    assert document["status"] == "rejected" and "rollout must be one of promote, shadow, canary" in str(document)
