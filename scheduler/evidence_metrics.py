"""Sequential evidence on /metrics: each stream's e-value after the latest window, and the line it pages at.

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_evidence_e_value` | gauge | model, version, stream | the stream's e-value after the latest evaluated window |
| `driftline_evidence_paging_line` | gauge | model, version, stream | the e-value at which it pages (`[alerts] false_pages_per_model_per_month`) |

``stream`` is "detector/feature/metric" (`driftline.detectors.families.evidence.stream_name`), e.g.
``data_drift/income/psi``; the ratio of the two series is how far the evidence is from paging.
Cardinality: at most `max_streams` streams per model version (paging first, then the nearest to their line).
"""
from __future__ import annotations

import math
from typing import Any, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from driftline.detectors.families.evidence import EVIDENCE_KEY, stream_name
from driftline.store.monitoring import MonitoringSnapshot


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def evidence_families(snapshot: MonitoringSnapshot, max_streams: int) -> Iterator[Metric]:
    e_value = GaugeMetricFamily("driftline_evidence_e_value",
                                "A sequential-evidence stream's e-value after the latest evaluated window.",
                                labels=["model", "version", "stream"])
    line = GaugeMetricFamily("driftline_evidence_paging_line", "The e-value at which the stream pages.",
                             labels=["model", "version", "stream"])
    for window in snapshot.windows:
        streams: dict[str, tuple[float, float, bool]] = {}
        for r in window.results:
            found = (r.details or {}).get(EVIDENCE_KEY)
            if not isinstance(found, dict):
                continue
            value, paging_line = _number(found.get("e_value")), _number(found.get("line"))
            if value is None or paging_line is None or not paging_line > 0:
                continue  # the dataset verdict's evidence lists paging features, it has no e-value of its own
            streams[stream_name(r.detector, r.feature, r.metric)] = (value, paging_line, bool(found.get("paging")))
        ranked = sorted(streams.items(), key=lambda item: (not item[1][2], -_log_ratio(*item[1][:2]), item[0]))
        for stream, (value, paging_line, _) in sorted(ranked[:max_streams]):
            labels = [window.model, window.version, stream]
            e_value.add_metric(labels, value)
            line.add_metric(labels, paging_line)
    yield from (e_value, line)


def _log_ratio(value: float, paging_line: float) -> float:
    return math.log(max(value, 1e-300)) - math.log(paging_line)
