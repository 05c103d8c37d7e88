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

from driftline.broker import free_port
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.errors import UserError
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.dataset import generate_inputs
from driftline.worker.replay import ReplayConfig, build_traffic, run_replay
from driftline.worker.scenarios import SCENARIOS, UNSEEN
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until

TOKEN = "replay-token"


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


def test_warmup_rows_come_first_from_the_none_scenario():
    traffic = build_traffic(SCENARIOS["covariate_shift"], 100, 200, seed=5)
    assert len(traffic.records) == 300 and traffic.scenario_start == 100
    assert traffic.records[:100] == generate_inputs(100, seed=5).to_dict("records")
    assert pd.DataFrame(traffic.records[100:])["age"].mean() < pd.DataFrame(traffic.records[:100])["age"].mean()


@pytest.fixture(scope="module")
def replay_worker(broker, tiny_results, tmp_path_factory, kit):
    settings = kit.make_settings(tmp_path_factory.mktemp("replay"), broker).model_copy(update={"retrain_token": TOKEN})
    kit.registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=kit.MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           faults=True))
    with kit.serving(worker) as url:
        yield url


def _replay(url: str, broker: str, scenario: str, **overrides):
    settings = {"rate": 80, "duration_s": 1.0, "concurrency": 16, "seed": 9, "label_delay_s": 0.2, **overrides}
    config = ReplayConfig(worker_url=url, scenario=scenario, bootstrap_servers=broker, token=TOKEN, **settings)
    return asyncio.run(run_replay(config))


def test_skew_replay_serves_buggy_features_then_switches_the_fault_off(replay_worker, broker, kit):
    report = _replay(replay_worker, broker, "skew")
    assert report.requests >= 40 and report.ok == report.requests and report.errors == {}
    assert report.labels_sent == report.ok and report.labels_dropped == 0
    faults = httpx.get(f"{replay_worker}/admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert faults["skew"] is False
    events = [orjson.loads(raw) for raw in kit.read_topic(broker, TOPIC_INFERENCE, set(report.request_ids)).values()]
    assert len(events) == report.ok
    for event in events:
        truth = FeatureTransform().apply([event["inputs"]])[0]["debt_to_income"]
        assert event["features"]["debt_to_income"] == pytest.approx(truth / 12)
    labels = kit.read_topic(broker, TOPIC_LABELS, set(report.request_ids))
    assert len(labels) == report.ok
    assert {orjson.loads(raw)["label"] for raw in labels.values()} <= {0, 1}


def test_data_quality_replay_reaches_the_model_and_is_logged(replay_worker, broker, kit):
    report = _replay(replay_worker, broker, "data_quality")
    assert report.ok == report.requests and report.errors == {}
    events = [orjson.loads(raw) for raw in kit.read_topic(broker, TOPIC_INFERENCE, set(report.request_ids)).values()]
    assert any(None in event["inputs"].values() for event in events)
    assert all(event["features"] == FeatureTransform().apply([event["inputs"]])[0] for event in events)


def test_latency_replay_raises_the_tail_and_switches_the_fault_off(replay_worker, broker):
    report = _replay(replay_worker, None, "latency", rate=100, duration_s=1.0)
    assert report.ok == report.requests
    slow = sum(1 for ms in report.latencies_ms if ms >= 250)
    assert slow >= report.ok // 20  # every twentieth request took 250 ms more (others may be slow on a busy box)
    assert report.summary()["p99_ms"] >= 250
    faults = httpx.get(f"{replay_worker}/admin/faults", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert faults["latency_ms"] == 0


def test_bad_replay_settings_are_user_errors(replay_worker):
    with pytest.raises(UserError, match="unknown scenario"):
        asyncio.run(run_replay(ReplayConfig(worker_url=replay_worker, scenario="meteor")))
    with pytest.raises(UserError, match="cannot reach the worker"):
        asyncio.run(run_replay(ReplayConfig(worker_url=f"http://127.0.0.1:{free_port()}", duration_s=0.1)))
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
