"""End-to-end harness: `driftline up` as a user runs it, with local HTTP sinks standing in for Slack and PagerDuty."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from driftline.broker import free_port

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
MODEL = "credit-default"


@dataclass
class Sink:
    """A local HTTP server that records every request and answers like Slack / PagerDuty.

    `fail_first[path] = N` makes the first N requests to that path answer 500 (a flaky channel).
    """

    server: ThreadingHTTPServer
    requests: list[dict] = field(default_factory=list)
    fail_first: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self, path: str) -> list[dict]:
        return [r["json"] for r in self.requests if r["path"] == path and r["status"] < 300]

    def attempts(self, path: str) -> int:
        return sum(1 for r in self.requests if r["path"] == path)


def _start_sink() -> Sink:
    sink: Sink

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                doc = json.loads(body or b"null")
            except ValueError:
                doc = None
            remaining = sink.fail_first.get(self.path, 0)
            if remaining > 0:
                sink.fail_first[self.path] = remaining - 1
                status, reply, ctype = 500, b'{"status": "error"}', "application/json"
            elif self.path == "/slack":
                status, reply, ctype = 200, b"ok", "text/plain"
            elif self.path == "/pagerduty":
                dedup = (doc or {}).get("dedup_key", "")
                status, ctype = 202, "application/json"
                reply = json.dumps({"status": "success", "message": "Event processed", "dedup_key": dedup}).encode()
            else:
                status, reply, ctype = 404, b"not found", "text/plain"
            sink.requests.append({"path": self.path, "headers": dict(self.headers), "json": doc, "status": status})
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink = Sink(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return sink


@pytest.fixture
def sink():
    s = _start_sink()
    yield s
    s.server.shutdown()
    s.server.server_close()


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
           "DRIFTLINE_COLLECTOR_METRICS_PORT": str(free_port()), "DRIFTLINE_DASHBOARD_PORT": str(free_port())}
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
