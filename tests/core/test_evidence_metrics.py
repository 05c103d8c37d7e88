"""Sequential evidence on /metrics: each stream's e-value and paging line, at most as many streams as features."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driftline.scheduler.metrics import families
from driftline.store.monitoring import LatestResult, MonitoringSnapshot, VersionWindow


class _Families:
    def __init__(self, snapshot, max_features):
        self.snapshot, self.max_features = snapshot, max_features

    def collect(self):
        return families(self.snapshot, max_features=self.max_features)


def _found(window, max_features):
    registry = CollectorRegistry()
    registry.register(_Families(MonitoringSnapshot([window], {}, 0, 0, []), max_features))
    return {(s.name, s.labels.get("stream")): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples
            if s.name.startswith("driftline_evidence_")}


def _result(detector, feature, metric, e_value, paging=False):
    return LatestResult(detector, feature, metric, 0.1, 0.2, paging,
                        {"evidence": {"e_value": e_value, "line": 4320.0, "paging": paging}})


def test_each_stream_exports_its_e_value_against_its_line_and_the_nearest_are_kept():
    window = VersionWindow("credit", "3", 0, 60_000, 500, "ok", results=[
        _result("data_drift", "income", "psi", 9000.0, paging=True),
        _result("data_drift", "age", "psi", 0.4),
        _result("data_drift", "region", "psi", 50.0),
        _result("prediction_drift", "prediction", "psi", 12.0),
        _result("embedding_drift", "prompt", "mmd2", 700.0),
        LatestResult("dataset_drift", None, "drifted_share", 0.3, 0.5, False,
                     {"evidence": {"paging": False, "paging_features": ["income"], "line": 4320.0}})])
    found = _found(window, max_features=10)
    assert found[("driftline_evidence_e_value", "data_drift/income/psi")] == 9000.0
    assert found[("driftline_evidence_paging_line", "data_drift/income/psi")] == 4320.0
    assert found[("driftline_evidence_e_value", "embedding_drift/prompt/mmd2")] == 700.0
    assert found[("driftline_evidence_e_value", "prediction_drift/prediction/psi")] == 12.0
    assert not any(stream.startswith("dataset_drift") for _, stream in found)  # no e-value of its own
    capped = _found(window, max_features=3)  # paging first, then the nearest to the line
    assert {stream for name, stream in capped if name == "driftline_evidence_e_value"} == {
        "data_drift/income/psi", "embedding_drift/prompt/mmd2", "data_drift/region/psi"}
