"""Latency parts and token rates on the scheduler's /metrics: one series per part and quantile, objectives where set."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftline.scheduler.metrics import families
from driftline.store.monitoring import LatestResult, MonitoringSnapshot, VersionWindow
from driftline.vocabulary import LATENCY


class _Families:
    def __init__(self, snapshot):
        self.snapshot = snapshot

    def collect(self):
        return families(self.snapshot, max_features=10)


def exposition(windows) -> dict:
    registry = CollectorRegistry()
    registry.register(_Families(MonitoringSnapshot(windows, {}, 0, 0, [])))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}


def test_each_part_and_quantile_gets_a_series_and_token_rates_their_measures():
    results = [LatestResult(LATENCY, "total", "p99_ms", 240.0, 250.0, False, {}),
               LatestResult(LATENCY, "ttft", "p99_ms", 2500.0, 2000.0, True, {}),
               LatestResult(LATENCY, "ttft", "p50_ms", 180.0, None, False, {}),
               LatestResult(LATENCY, "tpot", "p95_ms", 21.0, None, False, {}),
               LatestResult(LATENCY, "ttft", "p99_ms", 2500.0, 2000.0, True, {}),  # a repeated row: one series
               LatestResult(LATENCY, "", "qps", 30.0, None, False, {}),  # exported nowhere here
               LatestResult(LATENCY, "", "tokens_per_second_p50", 48.0, None, False, {}),
               LatestResult(LATENCY, "", "output_tokens_per_second", 1450.0, None, False, {}),
               LatestResult(LATENCY, "queue", "p99_ms", None, None, False, {"insufficient_data": True})]
    found = exposition([VersionWindow("chat", "3", 0, 60_000, 500, "ok", results=results)])

    def key(name, part, percentile="p99"):
        return (name, (("model", "chat"), ("part", part), ("percentile", percentile), ("version", "3")))

    assert found[key("driftline_latency_seconds", "ttft")] == 2.5  # seconds, Prometheus' base unit
    assert found[key("driftline_latency_objective_seconds", "ttft")] == 2.0
    assert found[key("driftline_latency_seconds", "total")] == 0.24
    assert found[key("driftline_latency_seconds", "ttft", "p50")] == 0.18
    assert key("driftline_latency_objective_seconds", "ttft", "p50") not in found  # no objective, no series
    assert found[key("driftline_latency_seconds", "tpot", "p95")] == 0.021
    assert not any(dict(labels).get("part") == "queue" for _, labels in found)  # no value, no series
    rates = {dict(labels)["measure"]: v for (name, labels), v in found.items()
             if name == "driftline_tokens_per_second"}
    assert rates == {"request_p50": 48.0, "output": 1450.0}


def test_a_version_without_latency_results_has_no_latency_series():
    found = exposition([VersionWindow("credit", "1", 0, 60_000, 500, "ok", results=[])])
    assert not [name for name, _ in found if name.startswith(("driftline_latency", "driftline_tokens"))]
