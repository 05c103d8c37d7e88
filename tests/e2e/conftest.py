"""End-to-end harness: `driftline up` as a user runs it, with local HTTP sinks standing in for Slack and PagerDuty."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from driftline.broker import free_port
from tests.support.fake_services import Sink

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
MODEL = "credit-default"


@pytest.fixture
def sink():
    """One local server standing in for Slack (`/slack`) and PagerDuty (`/pagerduty`), see `Sink`."""
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def trained_home(tmp_path_factory) -> Path:
    """A home with a migrated SQLite store and one trained, promoted model version (trained once per run)."""
    home = tmp_path_factory.mktemp("trained-home")
    env = {**os.environ, "DRIFTLINE_HOME": str(home)}
    env.pop("DRIFTLINE_DB", None)
    subprocess.run([DRIFTLINE, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    result = subprocess.run([DRIFTLINE, "train", "--model", MODEL, "--size", "small"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return home


@pytest.fixture
def home(trained_home, tmp_path) -> Path:
    """A private copy of the trained home (store and artifacts) for one test."""
    target = tmp_path / "home"
    shutil.copytree(trained_home, target)
    return target


@dataclass
class UpRun:
    home: Path
    output: str
    returncode: int

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.home / 'driftline.db'}"


def _run_up(home: Path, scenario: str, *, duration: float, window_seconds: int = 4, rate: float = 60.0,
           warmup: float = 0.0, sink: Sink | None = None, extra_env: dict | None = None,
           config: str | None = None, timeout: float = 300) -> UpRun:
    """`driftline up --scenario S --duration D --no-dashboard` on free ports, waited for to the end."""
    env = {**os.environ, "DRIFTLINE_HOME": str(home), "DRIFTLINE_WORKER_PORT": str(free_port()),
           "DRIFTLINE_WORKER_GRPC_PORT": str(free_port()),
           "DRIFTLINE_COLLECTOR_METRICS_PORT": str(free_port()),
           "DRIFTLINE_SCHEDULER_METRICS_PORT": str(free_port()), "DRIFTLINE_DASHBOARD_PORT": str(free_port())}
    for name in ("DRIFTLINE_DB", "DRIFTLINE_BOOTSTRAP_SERVERS", "DRIFTLINE_SLACK_WEBHOOK_URL",
                 "DRIFTLINE_PAGERDUTY_ROUTING_KEY", "DRIFTLINE_PAGERDUTY_URL", "DRIFTLINE_RETRAIN_WEBHOOK_URL"):
        env.pop(name, None)
    if sink is not None:
        env |= {"DRIFTLINE_SLACK_WEBHOOK_URL": f"{sink.url}/slack", "DRIFTLINE_PAGERDUTY_URL": f"{sink.url}/pagerduty",
                "DRIFTLINE_PAGERDUTY_ROUTING_KEY": "R0UT1NGKEY0000000000000000000000"}
    if config is not None:
        path = home / "driftline.toml"
        path.write_text(config)
        env["DRIFTLINE_CONFIG"] = str(path)
    env |= extra_env or {}
    argv = [DRIFTLINE, "up", "--scenario", scenario, "--duration", str(duration), "--window-seconds",
            str(window_seconds), "--rate", str(rate), "--warmup", str(warmup), "--no-dashboard",
            "--broker-port", str(free_port())]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return UpRun(home, result.stdout + result.stderr, result.returncode)


@pytest.fixture
def run_up():
    """`run_up(home, scenario, duration=..., sink=...) -> UpRun`: one bounded `driftline up` run."""
    return _run_up
