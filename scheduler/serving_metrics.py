"""Latency and generated answers on /metrics: the latest window's quantiles per latency part, their objectives, and
token rates.

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_latency_seconds` | gauge | model, version, part, percentile | the window's p50/p95/p99 of a latency part (`total`, `queue`, `compute`, `ttft`, `tpot`, ...) |
| `driftline_latency_objective_seconds` | gauge | model, version, part, percentile | the objective that percentile is held to (only those set) |
| `driftline_tokens_per_second` | gauge | model, version, measure | generated answers: `request_p50` (median decode rate per request, 1000 / tpot) and `output` (output tokens per second of window) |

Seconds, the base unit Prometheus names want (results are in ms); `percentile`, not `quantile`, which Prometheus
keeps for summaries. Cardinality is bounded: a window keeps at most `LATENCY_MAX_PARTS` parts, `percentile` is one
of three and `measure` one of two, per live model version.
"""
from __future__ import annotations

from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from driftline import vocabulary
from driftline.store.monitoring import MonitoringSnapshot

# result metric -> `percentile` label
_QUANTILES = {vocabulary.P50_MS: "p50", vocabulary.P95_MS: "p95", vocabulary.P99_MS: "p99"}
# result metric -> `measure` label
_RATES = {vocabulary.TOKENS_PER_SECOND_P50: "request_p50", vocabulary.OUTPUT_TOKENS_PER_SECOND: "output"}


def serving_families(snapshot: MonitoringSnapshot) -> Iterator[Metric]:
    latency = GaugeMetricFamily("driftline_latency_seconds", "A latency part's percentile in the latest window.",
                                labels=["model", "version", "part", "percentile"])
    objective = GaugeMetricFamily("driftline_latency_objective_seconds",
                                  "The objective a latency part's percentile is held to.",
                                  labels=["model", "version", "part", "percentile"])
    rates = GaugeMetricFamily("driftline_tokens_per_second",
                              "Generated answers in the latest window: request_p50 (median decode rate per request) "
                              "and output (output tokens per second of window).",
                              labels=["model", "version", "measure"])
    by_name = {family.name: family for family in (latency, objective, rates)}
    for window in snapshot.windows:
        # keyed by labels: one series per label set, whatever the stored rows repeat (a valid exposition)
        found: dict[tuple[str, tuple[str, ...]], float] = {}  # (family name, labels) -> value
        for r in window.results:
            if r.detector != vocabulary.LATENCY or r.value is None:
                continue
            if r.metric in _QUANTILES and r.feature:
                labels = (window.model, window.version, r.feature, _QUANTILES[r.metric])
                found[(latency.name, labels)] = float(r.value) / 1000.0
                if r.threshold is not None:
                    found[(objective.name, labels)] = float(r.threshold) / 1000.0
            elif r.metric in _RATES:
                found[(rates.name, (window.model, window.version, _RATES[r.metric]))] = float(r.value)
        for (name, labels), value in sorted(found.items()):
            by_name[name].add_metric(list(labels), value)
    yield from (latency, objective, rates)
