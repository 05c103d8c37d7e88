"""The command line: every contract command exists; db upgrade and status work; errors are one line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from driftline.broker import free_port, wait_for_port
from driftline.cli import COMMANDS
from driftline.config import ALL_TOPICS
from driftline.store import db as store_db
from driftline.store.models import ModelVersion, WindowStateRecord
from tests.support.waiting import wait_until

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
CONTRACT_COMMANDS = ["up", "broker", "train", "baseline", "worker", "collector", "scheduler", "dashboard",
                     "replay", "detect", "status", "db"]


def run(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([DRIFTLINE, *args], capture_output=True, text=True, timeout=timeout, env=full_env)


def test_every_contract_command_is_registered():
    assert set(CONTRACT_COMMANDS) <= set(COMMANDS)


@pytest.mark.parametrize("command", CONTRACT_COMMANDS)
def test_every_command_has_help(command):
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout


def test_python_dash_m_runs_the_same_cli(tmp_path):
    """`python -m driftline` where no `driftline` script is installed (packages unpacked with pip --target)."""
    help_text = subprocess.run([sys.executable, "-m", "driftline", "--help"], capture_output=True, text=True,
                               timeout=60, cwd=tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    assert all(command in help_text.stdout for command in CONTRACT_COMMANDS)
    error = subprocess.run([sys.executable, "-m", "driftline", "status", "--db", "nonsense://x"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
    assert error.returncode != 0 and error.stderr.startswith("driftline: error:") and "Traceback" not in error.stderr


def test_db_upgrade_then_status_json(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert run("db", "upgrade", "--db", url).returncode == 0
    with store_db.session_scope(url) as s:
        s.add(ModelVersion(model="credit", version="1"))
        s.add(WindowStateRecord(model="credit", version="1", window_start_ms=0, window_end_ms=60_000,
                                partition=0, events=12, state=b""))
    result = run("status", "--json", env={"DRIFTLINE_DB": url})
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["models"][0] | {} == doc["models"][0]
    assert {k: doc["models"][0][k] for k in ("model", "version", "events", "windows")} == \
        {"model": "credit", "version": "1", "events": 12, "windows": 1}
    assert doc["dead_letters"] == 0 and doc["alerts"] == []
    human = run("status", "--db", url)
    assert "credit" in human.stdout and "dead letters: 0" in human.stdout


def test_db_upgrade_on_postgres(postgres_url):
    result = run("db", "upgrade", "--db", postgres_url)
    assert result.returncode == 0, result.stderr
    assert store_db.is_migrated(postgres_url)


def test_unreachable_database_is_one_line_without_traceback():
    result = run("status", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/nope")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "cannot connect to the database" in result.stderr and "--db" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_status_on_empty_store_says_what_to_do(tmp_path):
    result = run("status", "--db", f"sqlite:///{tmp_path / 'new.db'}")
    assert result.returncode == 1 and "driftline db upgrade" in result.stderr


def test_unknown_option_is_a_usage_error():
    result = run("status", "--no-such-option")
    assert result.returncode == 2 and "No such option" in result.stderr and "Traceback" not in result.stderr


def test_invalid_database_url():
    result = run("status", "--db", "not a url")
    assert result.returncode == 1 and "invalid database URL" in result.stderr


def test_missing_config_file():
    result = run("status", "--config", "/nonexistent.toml")
    assert result.returncode == 1 and "config file" in result.stderr


def _topics_created(bootstrap: str) -> bool:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return set(ALL_TOPICS) <= consumer.topics()
    finally:
        consumer.close()


def test_broker_command_runs_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen([DRIFTLINE, "broker", "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_port("127.0.0.1", port, 15)
        wait_until(lambda: _topics_created(f"127.0.0.1:{port}"), message="the broker to create its topics")
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        assert proc.returncode == 0
        assert "stopped" in proc.stderr.read()
        assert not wait_for_port("127.0.0.1", port, 0.5)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_broker_port_taken_is_one_line(broker):
    port = broker.rsplit(":", 1)[1]
    result = run("broker", "--port", port)
    assert result.returncode == 1 and "already in use" in result.stderr and "Traceback" not in result.stderr
