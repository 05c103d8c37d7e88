"""Embedding drift's Prometheus series: the verdict and the test statistics of each embedding's latest window."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftline.scheduler.metrics import families
from driftline.store.monitoring import LatestResult, MonitoringSnapshot, VersionWindow


class _Families:
    def __init__(self, snapshot):
        self.snapshot = snapshot

    def collect(self):
        return families(self.snapshot, max_features=10)


def test_each_embedding_gets_its_verdict_and_scores():
    details = {"mmd": {"value": 0.004, "p_value": 1e-6}, "drifted_components": {"share": 0.3},
               "clusters": {"jensenshannon": 0.2}, "cosine_distance": 0.05}
    window = VersionWindow("search", "2", 0, 60_000, 500, "ok", results=[
        LatestResult("embedding_drift", "prompt", "mmd2", 0.004, 0.001, True, details),
        LatestResult("embedding_drift", "answer", "mmd2", None, None, False, {"insufficient_data": True})])
    registry = CollectorRegistry()
    registry.register(_Families(MonitoringSnapshot([window], {}, 0, 0, [])))
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}
    labels = (("embedding", "prompt"), ("model", "search"), ("version", "2"))
    assert found[("driftline_embedding_drifted", labels)] == 1.0
    assert found[("driftline_embedding_drifted", (("embedding", "answer"), *labels[1:]))] == 0.0
    scores = {dict(k[1])["test"]: v for k, v in found.items() if k[0] == "driftline_embedding_drift_score"}
    assert scores == {"mmd2": 0.004, "mmd_p_value": 1e-6, "drifted_components_share": 0.3,
                      "clusters_jensenshannon": 0.2, "cosine_distance": 0.05}
