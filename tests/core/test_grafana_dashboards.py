"""deploy/grafana: the dashboards are what build.py writes, and every metric their queries name is one that
driftline's worker, collector or scheduler exports."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from driftline.collector.metrics import CollectorMetrics
from driftline.scheduler.metrics import SchedulerMetrics
from driftline.worker.metrics import WorkerMetrics

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",), "unknown": ("",)}


def exported_names(sqlite_url: str) -> set[str]:
    """Every family the three stages export; the worker's serving signals once it serves and has answered
    (they are absent before), its GPU figures by name (a CPU worker has none)."""
    from driftline.config import load_settings
    from driftline.worker import device_metrics

    worker = WorkerMetrics(lambda: None, lambda: 0, load_settings(None))
    worker.signals.config = type(worker.signals.config)(price_per_replica_hour={"cpu": 1.0})
    worker.set_model("m", "1", "cpu")
    worker.observe_batch(1, 0.001)
    worker.latency_predict.observe(2.0, 0.5, 1.0, "1", 1)
    registries = [CollectorMetrics().registry, worker.registry, SchedulerMetrics(sqlite_url).registry]
    return {family.name + suffix for registry in registries for family in registry.collect()
            for suffix in SUFFIXES.get(family.type, ("",))} | set(device_metrics.NAMES)


def test_the_dashboards_are_what_build_writes(tmp_path):
    before = {p.name: p.read_text() for p in GRAFANA.glob("*.json")}
    subprocess.run([sys.executable, str(GRAFANA / "build.py")], check=True, timeout=60)
    assert {p.name: p.read_text() for p in GRAFANA.glob("*.json")} == before
    assert set(before) == {"driftline-serving.json", "driftline-monitoring.json"}


def test_every_queried_metric_is_exported(sqlite_url):
    known = exported_names(sqlite_url)
    for path in GRAFANA.glob("*.json"):
        dashboard = json.loads(path.read_text())
        assert dashboard["uid"] and dashboard["title"] and dashboard["panels"]
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)]
        named = {name for expr in exprs for name in re.findall(r"\bdriftline_\w+", expr)}
        assert named and named <= known, f"{path.name}: unknown metrics {sorted(named - known)}"
