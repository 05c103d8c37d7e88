"""The worker's commands: train, models, promote, rollback, worker, replay (in-process, and one real server)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from driftline.broker import free_port, wait_for_port
from driftline.cli import main

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))


def cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def env(tmp_path, sqlite_url, monkeypatch, broker):
    monkeypatch.setenv("DRIFTLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    monkeypatch.setenv("DRIFTLINE_BOOTSTRAP_SERVERS", broker)
    monkeypatch.setenv("DRIFTLINE_RETRAIN_TOKEN", "cli-token")
    return {**os.environ}


def test_train_models_promote_rollback(env, capsys):
    code, out, _ = cli(capsys, "train", "--size", "test", "--rows", "800", "--epochs", "1")
    assert code == 0 and "registered credit-default version 1" in out and "production -> version 1" in out
    code, out, _ = cli(capsys, "train", "--size", "test", "--rows", "800", "--epochs", "1", "--seed", "8")
    assert code == 0 and "production stays at version 1" in out
    code, out, _ = cli(capsys, "models", "--json")
    listed = json.loads(out)
    assert [(v["version"], v["production"]) for v in listed] == [("1", True), ("2", False)]
    assert all(len(v["artifact_sha256"]) == 64 and len(v["training_data_sha256"]) == 64 for v in listed)
    assert listed[0]["training_data_sha256"] != listed[1]["training_data_sha256"]
    code, out, _ = cli(capsys, "promote", "2", "--reason", "better AUC")
    assert code == 0 and "production -> version 2 (was 1)" in out
    code, out, _ = cli(capsys, "models")
    assert "* credit-default" in out and out.index("* credit-default") > out.index("  credit-default")
    code, out, _ = cli(capsys, "rollback")
    assert code == 0 and "production -> version 1 (rolled back from 2)" in out
    code, _, err = cli(capsys, "rollback")
    assert code == 1 and err.count("\n") == 1 and "no earlier production version" in err
    code, _, err = cli(capsys, "promote", "7")
    assert code == 1 and "has no version '7'" in err


def test_worker_needs_a_trained_model_and_a_real_device(env, capsys):
    code, _, err = cli(capsys, "worker")
    assert code == 1 and "run `driftline train` first" in err
    code, _, err = cli(capsys, "replay", "--worker-url", f"http://127.0.0.1:{free_port()}", "--duration", "0.1")
    assert code == 1 and "cannot reach the worker" in err
    code, _, err = cli(capsys, "replay", "--requests", "10", "--duration", "5")
    assert code == 1 and "--requests or --duration, not both" in err
    code, _, err = cli(capsys, "replay", "--requests", "0")
    assert code == 2 and "--requests" in err


def test_worker_command_serves_and_replay_drives_it(env, capsys):
    assert cli(capsys, "train", "--size", "test", "--rows", "800", "--epochs", "1")[0] == 0
    if not _cuda_visible():
        code, _, err = cli(capsys, "worker", "--device", "cuda")
        assert code == 1 and "no CUDA device" in err
    port = free_port()
    process = subprocess.Popen([DRIFTLINE, "worker", "--port", str(port), "--device", "cpu", "--max-batch-size", "8",
                                "--grpc-port", str(free_port()), "--no-labels", "--log-level", "warning"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert wait_for_port("127.0.0.1", port, timeout_s=60, process=process), process.stderr.read().decode()
        health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
        assert health == {"status": "ok", "model": "credit-default", "version": "1", "device": "cpu",
                          "kafka_connected": health["kafka_connected"]}
        code, out, _ = cli(capsys, "replay", "--worker-url", f"http://127.0.0.1:{port}", "--scenario", "none",
                           "--rate", "40", "--requests", "30", "--label-delay", "0", "--json")
        summary = json.loads(out)
        assert code == 0 and summary["requests"] == summary["ok"] == 30  # bounded by count: every one answered
        assert summary["labels_sent"] == summary["ok"]
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert f'driftline_worker_requests_total{{code="200"}} {float(summary["ok"])}' in text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


@pytest.mark.parametrize("taken_option", ["--grpc-port", "--port"])
def test_a_port_in_use_is_one_line_naming_it_and_its_option(env, capsys, taken_option):
    assert cli(capsys, "train", "--size", "test", "--rows", "800", "--epochs", "1")[0] == 0
    with socket.socket() as holder:  # another process's server on the port
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = {"--port": str(free_port()), "--grpc-port": str(free_port()), taken_option: str(taken)}
        result = subprocess.run([DRIFTLINE, "worker", *(x for item in ports.items() for x in item), "--device", "cpu",
                                 "--no-events", "--no-labels"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert f"port {taken} on 127.0.0.1" in result.stderr and taken_option in result.stderr
    assert "Traceback" not in result.stderr


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()
