"""Replay: scenario traffic is what it claims, reaches a real worker, toggles faults, and emits labels."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys

import httpx
import numpy as np
import orjson
import pandas as pd
import pytest

from driftline import defaults, vocabulary
from driftline.broker import free_port
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS, load_settings
from driftline.detectors.rollout.policy import RolloutPolicy
from driftline.errors import UserError
from driftline.rollouts import ab_plan, canary_plan, shadow_plan
from driftline.store import db as store_db
from driftline.store.db import session_scope
from driftline.store.rollouts import current_plan, steps
from driftline.worker.faults import Faults
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.dataset import default_probability, generate_inputs
from driftline.worker.publish import publish
from driftline.worker.registry import Registry
from driftline.worker.replay import ReplayConfig, build_traffic, run_replay
from driftline.worker.scenario_setup import (candidate_faults, canary_weight, prepare_candidate, scenario_plan,
                                             training_set)
from driftline.worker.scenarios import DOWNTURN, RESEEDED, SCENARIOS, UNSEEN, Candidate
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until
from tests.support.worker_helpers import MODEL, make_settings, read_topic, registry_with_versions, serving

TOKEN = "replay-token"


def test_up_and_replay_offer_every_scenario():
    """`up --scenario S` hands S to `driftline replay`: both commands' choices are the scenarios defined."""
    from driftline.commands.up import SCENARIOS as UP_CHOICES
    from driftline.worker.commands import SCENARIO_NAMES

    assert set(UP_CHOICES) == set(SCENARIO_NAMES) == set(SCENARIOS)


def test_scenarios_change_what_they_say_and_nothing_else():
    none = build_traffic(SCENARIOS["none"], 0, 3_000, seed=4)
    shifted = build_traffic(SCENARIOS["covariate_shift"], 0, 3_000, seed=4)
    concept = build_traffic(SCENARIOS["concept_drift"], 0, 3_000, seed=4)
    dirty = build_traffic(SCENARIOS["data_quality"], 0, 3_000, seed=4)
    base, moved = pd.DataFrame(none.records), pd.DataFrame(shifted.records)
    assert moved["age"].mean() < base["age"].mean() - 5
    assert (moved["region"] == "south").mean() > (base["region"] == "south").mean() + 0.1
    assert concept.records == none.records  # same applicants ...
    assert concept.labels.mean() > none.labels.mean() + 0.03  # ... different outcomes
    frame = pd.DataFrame(dirty.records)
    assert 0.1 < frame.isna().any(axis=1).mean() < 0.25
    assert (frame["region"] == UNSEEN["region"]).any()
    assert (frame["age"] > 100).any() or (frame["age"] < 18).any()
    assert np.array_equal(dirty.labels, none.labels)  # labels come from the clean applicants
    regional = pd.DataFrame(build_traffic(SCENARIOS["segment_shift"], 0, 3_000, seed=4).records)
    north = base["region"] == "north"
    assert regional["region"].equals(base["region"])
    assert regional[~north].equals(base[~north])  # the other regions are the same applicants
    assert regional.loc[north, "age"].mean() < base.loc[north, "age"].mean() - 2
    assert regional.loc[north, "annual_income"].median() < base.loc[north, "annual_income"].median()
    coupled = pd.DataFrame(build_traffic(SCENARIOS["embedding_shift"], 0, 3_000, seed=4).records)
    for column in base.columns:  # every column keeps its values ...
        assert sorted(coupled[column].astype(str)) == sorted(base[column].astype(str)), column
    # ... while late payments, which fall with the credit score in training, now rise with it
    assert base["credit_score"].corr(base["num_late_payments"]) < 0 < coupled["credit_score"].corr(
        coupled["num_late_payments"])


def test_warmup_rows_come_first_from_the_none_scenario():
    traffic = build_traffic(SCENARIOS["covariate_shift"], 100, 200, seed=5)
    assert len(traffic.records) == 300 and traffic.scenario_start == 100
    assert traffic.records[:100] == generate_inputs(100, seed=5).to_dict("records")
    assert pd.DataFrame(traffic.records[100:])["age"].mean() < pd.DataFrame(traffic.records[:100])["age"].mean()


@pytest.fixture(scope="module")
def replay_worker(broker, tiny_results, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("replay"), broker).model_copy(update={"retrain_token": TOKEN})
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           faults=True))
    with serving(worker) as url:
        yield url


def _replay(url: str, broker: str, scenario: str, **overrides):
    # bounded by count, not time: the assertions see every row of the seeded traffic however slow the machine
    settings = {"rate": 80, "requests": 60, "concurrency": 16, "seed": 9, "label_delay_s": 0.2, **overrides}
    config = ReplayConfig(worker_url=url, scenario=scenario, bootstrap_servers=broker, token=TOKEN, **settings)
    return asyncio.run(run_replay(config))


def test_skew_replay_serves_buggy_features_then_switches_the_fault_off(replay_worker, broker):
    report = _replay(replay_worker, broker, "skew")
    assert report.requests == report.ok == 60 and report.errors == {}
    assert report.labels_sent == report.ok and report.labels_dropped == 0
    faults = httpx.get(f"{replay_worker}/admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert faults["skew"] is False
    events = [orjson.loads(raw) for raw in read_topic(broker, TOPIC_INFERENCE, set(report.request_ids)).values()]
    assert len(events) == report.ok
    for event in events:
        truth = FeatureTransform().apply([event["inputs"]])[0]["debt_to_income"]
        assert event["features"]["debt_to_income"] == pytest.approx(truth / 12)
    labels = read_topic(broker, TOPIC_LABELS, set(report.request_ids))
    assert len(labels) == report.ok
    assert {orjson.loads(raw)["label"] for raw in labels.values()} <= {0, 1}


def test_data_quality_replay_reaches_the_model_and_is_logged(replay_worker, broker):
    report = _replay(replay_worker, broker, "data_quality")
    assert report.ok == report.requests == 60 and report.errors == {}
    events = [orjson.loads(raw) for raw in read_topic(broker, TOPIC_INFERENCE, set(report.request_ids)).values()]
    assert len(events) == 60 and any(None in event["inputs"].values() for event in events)
    assert all(event["features"] == FeatureTransform().apply([event["inputs"]])[0] for event in events)


def test_latency_replay_raises_the_tail_and_switches_the_fault_off(replay_worker, broker):
    report = _replay(replay_worker, None, "latency", rate=100, requests=100)
    assert report.ok == report.requests == 100
    slow = sum(1 for ms in report.latencies_ms if ms >= 250)
    assert slow >= 5  # every twentieth request took 250 ms more (others may be slow on a busy box)
    assert report.summary()["p99_ms"] >= 250
    faults = httpx.get(f"{replay_worker}/admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert faults["latency_ms"] == 0


def test_bad_replay_settings_are_user_errors(replay_worker):
    with pytest.raises(UserError, match="unknown scenario"):
        asyncio.run(run_replay(ReplayConfig(worker_url=replay_worker, scenario="meteor")))
    with pytest.raises(UserError, match="cannot reach the worker"):
        asyncio.run(run_replay(ReplayConfig(worker_url=f"http://127.0.0.1:{free_port()}", duration_s=0.1)))
    with pytest.raises(UserError, match="--requests must be at least 1"):
        asyncio.run(run_replay(ReplayConfig(worker_url=replay_worker, requests=0)))
    with pytest.raises(UserError, match="401"):
        asyncio.run(run_replay(ReplayConfig(worker_url=replay_worker, scenario="skew", duration_s=0.1, token="nope")))


def _answered(url: str) -> float:
    """Requests the worker has answered 200 (0 before the first)."""
    match = re.search(r'^driftline_worker_requests_total\{code="200"\} (\S+)$', httpx.get(f"{url}/metrics").text,
                      re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_sigterm_stops_a_replay_cleanly_and_switches_the_fault_off(replay_worker, tmp_path):
    """What `driftline up` does at its end: SIGTERM mid-scenario gives a summary, exit 0, no traceback."""
    env = {**os.environ, "DRIFTLINE_RETRAIN_TOKEN": TOKEN, "DRIFTLINE_HOME": str(tmp_path)}
    replay = subprocess.Popen([sys.executable, "-m", "driftline.cli", "replay", "--scenario", "latency", "--rate", "40",
                               "--duration", "60", "--no-labels", "--json", "--worker-url", replay_worker],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        def fault_on() -> bool:
            assert replay.poll() is None, "the replay exited before it switched the fault on"
            return httpx.get(f"{replay_worker}/admin/faults", headers=headers).json()["latency_ms"] != 0

        wait_until(fault_on, timeout=60, interval=0.1, message="the replay to switch the latency fault on")
        served = _answered(replay_worker)
        # requests flow under the fault (some held by it) when the signal comes
        wait_until(lambda: _answered(replay_worker) > served, message="requests answered under the latency fault")
        replay.send_signal(signal.SIGTERM)
        out, err = replay.communicate(timeout=30)
    finally:
        replay.kill()
    assert replay.returncode == 0, err
    assert "Traceback" not in err
    summary = json.loads(out)
    assert summary["interrupted"] is True and summary["requests"] > 0
    assert httpx.get(f"{replay_worker}/admin/faults", headers=headers).json()["latency_ms"] == 0


# --- rollout scenarios --------------------------------------------------------------------

ROLLOUT_SCENARIOS = ("shadow", "canary_regression", "ab", "aa")


def test_rollout_scenarios_say_which_candidate_and_which_plan():
    modes = {name: SCENARIOS[name].rollout.mode for name in ROLLOUT_SCENARIOS}
    assert modes == {"shadow": vocabulary.ROLLOUT_SHADOW, "canary_regression": vocabulary.ROLLOUT_CANARY,
                     "ab": vocabulary.ROLLOUT_AB, "aa": vocabulary.ROLLOUT_AB}
    assert all(SCENARIOS[name].rollout is None for name in SCENARIOS if name not in ROLLOUT_SCENARIOS)
    # the A/A test and the shadow run the same equally good candidate; the others a candidate of their own
    assert SCENARIOS["shadow"].rollout.candidate == SCENARIOS["aa"].rollout.candidate == RESEEDED
    assert len({SCENARIOS[name].rollout.candidate.name for name in ROLLOUT_SCENARIOS}) == 3
    # only the canary's candidate is slowed, so only it needs a worker with --faults
    assert [name for name in SCENARIOS if SCENARIOS[name].uses_faults] == ["skew", "latency", "canary_regression"]
    assert SCENARIOS["canary_regression"].faults == {}  # production's answers are never slowed
    # ab's labels follow the concept its candidate learned; the others' the training concept
    assert SCENARIOS["ab"].risk == SCENARIOS["ab"].rollout.candidate.risk == DOWNTURN
    assert SCENARIOS["aa"].risk == SCENARIOS["shadow"].risk == SCENARIOS["none"].risk


def test_rollout_scenario_traffic_is_the_populations_it_names():
    none = build_traffic(SCENARIOS["none"], 0, 3_000, seed=4)
    for name in ("shadow", "canary_regression", "aa"):
        same = build_traffic(SCENARIOS[name], 0, 3_000, seed=4)
        assert same.records == none.records and np.array_equal(same.labels, none.labels)
    downturn = build_traffic(SCENARIOS["ab"], 0, 3_000, seed=4)
    assert downturn.records == none.records  # same applicants, more of them default
    assert downturn.labels.mean() > none.labels.mean() + 0.15


def test_candidate_training_sets_carry_their_concept_and_labelling_bug():
    clean_inputs, clean = training_set(Candidate("c", seed=5), 4_000)
    inputs, mislabelled = training_set(Candidate("m", seed=5, false_default_rate=0.4), 4_000)
    assert inputs.equals(clean_inputs)
    assert np.all(mislabelled >= clean)  # only repaid loans are relabelled, as defaults
    flipped = (mislabelled != clean).sum() / (clean == 0).sum()
    assert 0.35 < flipped < 0.45
    downturn_inputs, downturn = training_set(Candidate("d", seed=5, risk=DOWNTURN), 4_000)
    assert downturn_inputs.equals(clean_inputs)
    assert abs(downturn.mean() - default_probability(downturn_inputs, DOWNTURN).mean()) < 0.03
    assert downturn.mean() > clean.mean() + 0.15


def test_a_candidate_is_trained_like_production_on_its_rows_up_to_the_cap(tiny_results, tmp_path, monkeypatch):
    db_url = f"sqlite:///{tmp_path / 'driftline.db'}"
    store_db.upgrade(db_url)
    registry = Registry(db_url, tmp_path / "models")
    publish(registry, MODEL, tiny_results[0], promote=True)  # production: the test MLP on 1 500 rows
    monkeypatch.setattr(defaults, "REPLAY_CANDIDATE_MAX_ROWS", 1_000)
    version = prepare_candidate(registry, MODEL, SCENARIOS["shadow"].rollout.candidate)
    metrics = registry.get(MODEL, version).metrics
    assert version == "2" and registry.alias(MODEL) == "1"
    assert metrics["train_rows"] + metrics["holdout_rows"] == 1_000  # the cap, below production's 1 500
    assert (metrics["size"], metrics["epochs"]) == ("test", 2)


@pytest.mark.parametrize("rate, window_seconds, min_events, expected", [
    (60, 4, 40, 25),     # the e2e runs: a quarter of 240 requests a window is 60 >= 40
    (40, 15, 200, 50),   # `driftline up`'s demo on the default policy: half of 600
    (40, 15, 10, 5),     # a lenient policy judges a 5 % canary
    (1, 1, 200, 50),     # no step is enough: the last one
])
def test_canary_weight_is_the_first_step_the_analysis_can_judge(rate, window_seconds, min_events, expected):
    policy = RolloutPolicy(min_events=min_events)
    assert policy.canary_steps == (1, 5, 25, 50)
    assert canary_weight(policy, rate, window_seconds) == expected


def test_scenario_plans_and_faults():
    shadow, canary, ab = (SCENARIOS[name].rollout for name in ("shadow", "canary_regression", "ab"))
    assert scenario_plan("m", shadow, "1", "2", 25) == shadow_plan("m", "2", 1.0)
    assert scenario_plan("m", canary, "1", "2", 25) == canary_plan("m", "2", 25)
    assert scenario_plan("m", ab, "1", "2", 25) == ab_plan("m", [("1", 50.0), ("2", 50.0)])
    assert candidate_faults(canary, "2") == {"latency_ms": 250.0, "latency_fraction": 0.05, "latency_version": "2"}
    assert candidate_faults(shadow, "2") == {}


def test_a_latency_fault_can_slow_one_version_only():
    faults = Faults()
    faults.update({"latency_ms": 100, "latency_fraction": 0.5, "latency_version": "2"})
    assert [faults.extra_latency_s("1") for _ in range(4)] == [0.0] * 4
    assert [faults.extra_latency_s("2") for _ in range(4)] == [0.0, 0.1, 0.0, 0.1]
    faults.update({"latency_version": None})
    assert sum(faults.extra_latency_s("1") > 0 for _ in range(4)) == 2  # every version again
    for bad in ("../2", 7, "", "a" * 200):
        with pytest.raises(ValueError, match="latency_version"):
            faults.update({"latency_version": bad})
    assert faults.latency_version is None  # a refused update changes nothing


def test_a_rollout_scenario_needs_the_store(replay_worker):
    with pytest.raises(UserError, match="needs the store"):
        asyncio.run(run_replay(ReplayConfig(worker_url=replay_worker, scenario="shadow", duration_s=0.1)))


@pytest.fixture(scope="module")
def rollout_worker(broker, tiny_results, tmp_path_factory):
    """A worker that takes up plans within 0.2 s, with faults allowed; its settings judge a 50 % canary."""
    home = tmp_path_factory.mktemp("rollout-replay")
    toml = home / "driftline.toml"
    toml.write_text("[rollouts]\ncanary_steps = [50]\n")
    settings = make_settings(home, broker)
    settings = load_settings(toml, home=str(settings.home), db=settings.db_url, bootstrap_servers=broker,
                             retrain_token=TOKEN)
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0.2,
                                           faults=True, cache_size=0))
    with serving(worker) as url:
        yield url, settings


def test_canary_regression_replay_trains_a_candidate_sets_its_canary_and_slows_only_it(rollout_worker, broker):
    url, settings = rollout_worker
    # 200 requests, however long they take: the worker takes the plan up within 0.2 s (at most 20 requests at
    # 100/s), and half of the rest go to the canary; the 20 its one-in-twenty slowdown needs are 10 sigma below that
    report = _replay(url, broker, "canary_regression", rate=100, requests=200, settings=settings)
    assert report.requests == 200 and report.ok == 200 and report.errors == {}  # every request answered
    registry = Registry(settings.db_url, settings.artifacts_dir)
    assert registry.alias(MODEL) == "1"  # never promoted
    candidate = registry.get(MODEL, "2")
    assert "mislabelled" in candidate.description and candidate.metrics["size"] == "test"
    with session_scope(settings.db_url) as session:
        assert current_plan(session, MODEL) == canary_plan(MODEL, "2", 50)
        assert [(s["by"], s["reason"]) for s in steps(session, MODEL)] == [
            ("cli", "replay scenario canary_regression")]
    events = [orjson.loads(raw) for raw in read_topic(broker, TOPIC_INFERENCE, set(report.request_ids)).values()]
    by_version = {v: [e for e in events if e["version"] == v] for v in ("1", "2")}
    assert {e["role"] for e in by_version["2"]} == {"canary"} and len(by_version["2"]) >= 20
    # 240: the event loop's sleep may wake a fraction of a millisecond before the 250 ms are up
    slow = {v: sum(e["latency_ms"]["compute"] >= 240 for e in found) for v, found in by_version.items()}
    assert slow["2"] >= len(by_version["2"]) // 20 and slow["1"] == 0  # the candidate's answers only
    faults = httpx.get(f"{url}/admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert faults["latency_ms"] == 0 and faults["latency_version"] is None
    # a second run finds its candidate again instead of training another
    assert prepare_candidate(registry, MODEL, SCENARIOS["canary_regression"].rollout.candidate) == "2"
    assert [v.version for v in registry.versions(MODEL)] == ["1", "2"]
