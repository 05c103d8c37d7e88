"""Embedding drift on /metrics: the latest window's verdict and test statistics per embedding.

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_embedding_drifted` | gauge | model, version, embedding | 1 when the embedding drifted by the documented decision rule |
| `driftline_embedding_drift_score` | gauge | model, version, embedding, test | `mmd2`, `mmd_p_value`, `drifted_components_share`, `clusters_jensenshannon`, `cosine_distance`, `domain_classifier_auc` |
"""
from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from driftline import vocabulary
from driftline.store.monitoring import MonitoringSnapshot

# test label -> where its value sits in the result's details
_SCORES = {"mmd2": ("mmd", "value"), "mmd_p_value": ("mmd", "p_value"),
           "drifted_components_share": ("drifted_components", "share"),
           "clusters_jensenshannon": ("clusters", vocabulary.JENSENSHANNON), "cosine_distance": ("cosine_distance",),
           "domain_classifier_auc": ("domain_classifier", "auc")}


def _number(details: Any, path: tuple[str, ...]) -> float | None:
    for key in path:
        details = details.get(key) if isinstance(details, dict) else None
    return float(details) if isinstance(details, (int, float)) and not isinstance(details, bool) else None


def embedding_families(snapshot: MonitoringSnapshot) -> Iterator[Metric]:
    drifted = GaugeMetricFamily("driftline_embedding_drifted",
                                "1 when the embedding drifted in the latest window (the documented decision rule).",
                                labels=["model", "version", "embedding"])
    score = GaugeMetricFamily("driftline_embedding_drift_score", "An embedding drift test's statistic, latest window.",
                              labels=["model", "version", "embedding", "test"])
    for window in snapshot.windows:
        seen: set[str] = set()
        for r in window.results:
            if r.detector != vocabulary.EMBEDDING_DRIFT or not r.feature or r.feature in seen:
                continue
            seen.add(r.feature)
            labels = [window.model, window.version, r.feature]
            drifted.add_metric(labels, float(r.breached))
            for test, path in _SCORES.items():
                value = _number(r.details or {}, path)
                if value is not None:
                    score.add_metric([*labels, test], value)
    yield from (drifted, score)
