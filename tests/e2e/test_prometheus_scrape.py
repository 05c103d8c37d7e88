"""A real Prometheus server (Debian package `prometheus`, on loopback, a temporary configuration and data
folder) scrapes the scheduler's /metrics over a store where a drift scenario was evaluated by the real
scheduler, and a PromQL query through Prometheus's HTTP API names the drifted features."""
from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request

from driftline.broker import free_port
from driftline.scheduler.metrics import SchedulerMetrics
from tests.support.drift_store import evaluate_drift_scenario
from tests.support.waiting import wait_until


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError:
        return None, ""


def _query(base: str, promql: str) -> list[dict]:
    status, body = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    if status != 200:
        return []
    document = json.loads(body)
    assert document["status"] == "success", document
    return document["data"]["result"]


def test_prometheus_scrapes_the_drifted_features_of_a_drift_scenario(sqlite_url, tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: run scripts/install-system-deps.sh (Debian package prometheus)"
    evaluate_drift_scenario(sqlite_url, shifts={"income": 25.0, "age": 30.0})
    metrics = SchedulerMetrics(sqlite_url, cache_seconds=1.0, detail_models=("*",))
    target = metrics.serve(0)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: driftline-scheduler\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{target}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    server = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                               f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            assert server.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            return _get(f"{base}/-/ready")[0] == 200
        wait_until(ready, timeout=120, interval=0.2, message="Prometheus to be ready")
        drifted = wait_until(lambda: _query(base, 'driftline_feature_drifted{job="driftline-scheduler"} == 1'),
                             timeout=120, interval=0.5, message="a scrape showing the drifted features")
        assert {r["metric"]["feature"] for r in drifted} == {"income", "age"}
        assert {(r["metric"]["model"], r["metric"]["version"]) for r in drifted} == {("credit", "1")}
        count = _query(base, "driftline_drifted_features")
        assert [float(r["value"][1]) for r in count] == [2.0]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        metrics.stop()
