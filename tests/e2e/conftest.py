"""End-to-end harness: `driftline up` as a user runs it, with local HTTP sinks standing in for Slack and PagerDuty.

A test starts `up` (`up(home, scenario, ...)`), waits on the outcome its scenario must reach in the store
or the sink (with a deadline only a stuck run meets), stops `up` with SIGINT as a user's Ctrl-C, and
asserts the outcome and a clean exit: a slow machine makes the test slower, never failing.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from filelock import FileLock
from sqlalchemy.exc import OperationalError

from driftline.broker import free_port
from tests.support.fake_services import Sink
from tests.support.waiting import wait_until

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
MODEL = "credit-default"


@pytest.fixture
def sink():
    """One local server standing in for Slack (`/slack`) and PagerDuty (`/pagerduty`), see `Sink`."""
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def trained_home(tmp_path_factory, worker_id) -> Path:
    """A home with a migrated SQLite store and one trained, promoted model version (trained once per run, by the
    first test process that asks; the others wait for it and copy it, as they copy it for each test)."""
    # the folder above each xdist process's own is the run's (with -n 0 it would hold earlier runs' too)
    run_dir = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    home, trained = run_dir / "trained-home", run_dir / "trained-home.done"
    with FileLock(run_dir / "trained-home.lock"):
        if not trained.exists():
            shutil.rmtree(home, ignore_errors=True)  # what a process that failed half-way left
            home.mkdir()
            _train(home)
            trained.touch()
    return home


def _train(home: Path) -> None:
    env = {**os.environ, "DRIFTLINE_HOME": str(home)}
    env.pop("DRIFTLINE_DB", None)
    subprocess.run([DRIFTLINE, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    # 80 000 rows: a holdout of 16 000 behind the version's quality reference, whose error is the same offset in
    # every window of a run; at the default 20 000 a no-drift run's pooled labels could page on it
    result = subprocess.run([DRIFTLINE, "train", "--model", MODEL, "--size", "small", "--rows", "80000"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr


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


# `--duration` of a run the test stops itself: only a stuck run reaches it (the test's own wait ends sooner).
UP_CAP_SECONDS = 900
# How long a test waits for its scenario's outcome in the store: generous, so that only a stuck run fails.
OUTCOME_TIMEOUT_S = 480


def up_env(home: Path, sink: Sink | None = None, extra_env: dict | None = None) -> dict[str, str]:
    """The environment of a `driftline up` run on free ports, with `sink` standing in for Slack and PagerDuty."""
    env = {**os.environ, "DRIFTLINE_HOME": str(home), "DRIFTLINE_WORKER_PORT": str(free_port()),
           "DRIFTLINE_WORKER_GRPC_PORT": str(free_port()), "DRIFTLINE_RECEIVER_PORT": str(free_port()),
           "DRIFTLINE_COLLECTOR_METRICS_PORT": str(free_port()),
           "DRIFTLINE_SCHEDULER_METRICS_PORT": str(free_port()), "DRIFTLINE_DASHBOARD_PORT": str(free_port())}
    for name in ("DRIFTLINE_DB", "DRIFTLINE_BOOTSTRAP_SERVERS", "DRIFTLINE_SLACK_WEBHOOK_URL", "DRIFTLINE_CONFIG",
                 "DRIFTLINE_RECEIVER_TOKEN", "DRIFTLINE_PAGERDUTY_ROUTING_KEY", "DRIFTLINE_PAGERDUTY_URL", "DRIFTLINE_RETRAIN_WEBHOOK_URL"):
        env.pop(name, None)
    if sink is not None:
        env |= {"DRIFTLINE_SLACK_WEBHOOK_URL": f"{sink.url}/slack", "DRIFTLINE_PAGERDUTY_URL": f"{sink.url}/pagerduty",
                "DRIFTLINE_PAGERDUTY_ROUTING_KEY": "R0UT1NGKEY0000000000000000000000"}
    return env | (extra_env or {})


class RunningUp:
    """A `driftline up` run in the background: wait on what it writes, then stop it with a signal, as a user does.

    `wait_for(condition, message)` polls `condition()` (a store query, the sink) until it holds; the run
    failing first ends the wait at once with its output. `stop()` sends SIGINT and returns the `UpRun`.
    """

    def __init__(self, argv: list[str], env: dict[str, str], home: Path):
        self.home = home
        self.worker_url = f"http://127.0.0.1:{env['DRIFTLINE_WORKER_PORT']}"
        self.receiver_url = f"http://127.0.0.1:{env['DRIFTLINE_RECEIVER_PORT']}"
        # the embedded broker's address (None with DRIFTLINE_BOOTSTRAP_SERVERS: the test's own broker)
        self.bootstrap_servers = (f"127.0.0.1:{argv[argv.index('--broker-port') + 1]}"
                                  if "--broker-port" in argv else env.get("DRIFTLINE_BOOTSTRAP_SERVERS"))
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.home / 'driftline.db'}"

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, condition: Callable[[], Any], message: str, timeout: float = OUTCOME_TIMEOUT_S) -> Any:
        def holds() -> Any:
            if self.proc.poll() is not None:
                raise AssertionError(f"`driftline up` exited ({self.proc.returncode}) before {message}:\n"
                                     f"{self.output[-4000:]}")
            try:
                return condition()
            except OperationalError:  # the store busy with the run's writes: ask again next round
                return None

        return wait_until(holds, timeout=timeout, interval=1.0, message=message)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 180) -> UpRun:
        """Stop the run with `sig` (Ctrl-C by default) and wait for it to exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.kill()
        return UpRun(self.home, self.output, self.proc.returncode)

    def kill(self) -> None:
        """Make sure nothing is left running (after a failed wait)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._reader.join(timeout=10)


def start_up(home: Path, scenario: str, *, window_seconds: int = 4, rate: float = 60.0, warmup: float = 0.0,
             sink: Sink | None = None, extra_env: dict | None = None, config: str | None = None,
             duration: float = UP_CAP_SECONDS, broker: bool = True) -> RunningUp:
    """`driftline up --scenario S --no-dashboard` on free ports in the background (`--duration` only as a cap)."""
    env = up_env(home, sink, extra_env)
    if config is not None:
        path = home / "driftline.toml"
        path.write_text(config)
        env["DRIFTLINE_CONFIG"] = str(path)
    argv = [DRIFTLINE, "up", "--scenario", scenario, "--duration", str(duration), "--window-seconds",
            str(window_seconds), "--rate", str(rate), "--warmup", str(warmup), "--no-dashboard"]
    if broker:
        argv += ["--broker-port", str(free_port())]
    return RunningUp(argv, env, home)


@pytest.fixture
def up():
    """`up(home, scenario, sink=...) -> RunningUp`; whatever a test leaves running is killed after it."""
    runs: list[RunningUp] = []

    def start(*args, **kwargs) -> RunningUp:
        runs.append(start_up(*args, **kwargs))
        return runs[-1]

    yield start
    for run in runs:
        run.kill()


def evaluated_windows(db_url: str) -> int:
    """Windows of the model evaluated with status ok."""
    from sqlalchemy import func, select

    from driftline.store.db import session_scope
    from driftline.store.models import WindowEvaluation

    with session_scope(db_url) as s:
        return s.scalar(select(func.count()).select_from(WindowEvaluation).where(
            WindowEvaluation.model == MODEL, WindowEvaluation.status == "ok")) or 0


def assert_clean_exit(run: UpRun) -> None:
    """`up` stopped by its signal exits 0, having stopped every component, with no traceback."""
    assert run.returncode == 0, run.output[-4000:]
    assert "Traceback" not in run.output, run.output[-4000:]


# The no-drift run's latency SLO, out of a loaded machine's reach: the p99 of a real run beside other tests
# on two cores measures the machine, not the scenario (the latency detector's verdict on the latency
# scenario is tested at the evaluation level, tests/worker/test_scenario_verdicts.py).
UNLOADED_LATENCY = "[latency]\np50_ms = 5000\np95_ms = 5000\np99_ms = 5000\n"


@pytest.fixture(scope="session")
def none_run(trained_home, tmp_path_factory):
    """One `up --scenario none` run that tests only read (its store and what its sink received), shared by
    the no-drift test and the dashboard's pages: ten windows evaluated, then stopped with Ctrl-C."""
    home = tmp_path_factory.mktemp("none-run") / "home"
    shutil.copytree(trained_home, home)
    sink = Sink().start()
    run = start_up(home, "none", sink=sink, config=UNLOADED_LATENCY)
    try:
        run.wait_for(lambda: evaluated_windows(run.db_url) >= 10, "ten evaluated windows")
        stopped = run.stop()
    finally:
        run.kill()
        sink.stop()
    return stopped, sink
