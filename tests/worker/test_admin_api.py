"""The admin API: the published default token opens nothing off loopback; fault injection only with --faults."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from driftline.config import DEFAULT_RETRAIN_TOKEN
from driftline.errors import UserError
from driftline.worker.admin import admin_token_problem, is_loopback
from driftline.worker.replay import ReplayConfig, run_replay
from driftline.worker.server import Worker, WorkerConfig

from tests.support.worker_helpers import MODEL, make_settings, registry_with_versions, serving

TOKEN = "admin-test-token"


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.7", False), ("", False), ("worker.example.com", False),
])
def test_only_loopback_addresses_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_the_default_or_an_empty_token_is_refused_off_loopback():
    for host in ("0.0.0.0", "::", "192.168.1.20"):
        assert "DRIFTLINE_RETRAIN_TOKEN" in admin_token_problem(host, DEFAULT_RETRAIN_TOKEN)
        assert "DRIFTLINE_RETRAIN_TOKEN" in admin_token_problem(host, "")
        assert admin_token_problem(host, "a-secret-of-my-own") is None
    assert admin_token_problem("127.0.0.1", DEFAULT_RETRAIN_TOKEN) is None


def test_a_worker_with_the_default_token_does_not_start_on_a_public_address(tmp_path, broker):
    settings = make_settings(tmp_path, broker)
    assert settings.retrain_token.get_secret_value() == DEFAULT_RETRAIN_TOKEN
    with pytest.raises(UserError, match="DRIFTLINE_RETRAIN_TOKEN") as refused:
        Worker(settings.model_copy(update={"worker_host": "0.0.0.0"}), WorkerConfig(device="cpu"))
    assert DEFAULT_RETRAIN_TOKEN not in str(refused.value)  # names the setting, never the value
    Worker(settings.model_copy(update={"worker_host": "0.0.0.0", "retrain_token": TOKEN}), WorkerConfig(device="cpu"))


def test_the_worker_command_refuses_the_default_token_on_0_0_0_0(tmp_path, sqlite_url, broker, monkeypatch, capsys):
    from driftline.cli import main

    monkeypatch.setenv("DRIFTLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    monkeypatch.setenv("DRIFTLINE_BOOTSTRAP_SERVERS", broker)
    monkeypatch.delenv("DRIFTLINE_RETRAIN_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--host", "0.0.0.0", "--device", "cpu"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "DRIFTLINE_RETRAIN_TOKEN" in err and "0.0.0.0" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def faultless(broker, tiny_results, tmp_path_factory):
    """A worker started without --faults."""
    settings = make_settings(tmp_path_factory.mktemp("faultless"), broker).model_copy(update={"retrain_token": TOKEN})
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_events=False))
    with serving(worker) as url:
        yield url, worker


def test_without_the_flag_fault_injection_does_not_exist(faultless):
    url, worker = faultless
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for response in (httpx.get(f"{url}/admin/faults", headers=auth),
                     httpx.post(f"{url}/admin/faults", json={"skew": True}, headers=auth),
                     httpx.post(f"{url}/admin/faults", json={"latency_ms": 60_000, "latency_fraction": 1}, headers=auth),
                     httpx.delete(f"{url}/admin/faults", headers=auth)):
        assert response.status_code == 404 and "--faults" in response.json()["detail"]
    assert worker.faults.as_dict() == {"skew": False, "latency_ms": 0.0, "latency_fraction": 0.0, "latency_version": None}
    assert httpx.post(f"{url}/predict", json={"features": worker.example}).status_code == 200


def test_replay_of_a_fault_scenario_says_the_worker_needs_the_flag(faultless):
    url, _worker = faultless
    with pytest.raises(UserError, match="--faults"):
        asyncio.run(run_replay(ReplayConfig(worker_url=url, scenario="skew", duration_s=0.1, token=TOKEN)))
