"""Latency of one window against the model's SLO: quantiles per part, error rate, QPS, concurrency."""
from __future__ import annotations

from typing import Any

from driftline.vocabulary import INSUFFICIENT_DATA_REASON
from driftline.baseline.values import finite_or_none
from driftline.detectors.families.results import WindowResult, insufficient
from driftline.detectors.thresholds.levels import LatencySLO
from driftline.vocabulary import CONCURRENCY, ERROR_RATE, LATENCY, LATENCY_TOTAL, P50_MS, P95_MS, P99_MS, QPS
from driftline.window_state import WindowState

__all__ = ["latency"]


def latency(state: WindowState, slo: LatencySLO, window_seconds: float) -> list[WindowResult]:
    """Latency quantiles per part against the SLO (total only), error rate, QPS, concurrency."""
    events = state.events
    enough = events >= slo.min_events
    results = []

    def result(feature: str | None, metric: str, value: float | None, threshold: float | None,
               details: dict[str, Any]) -> None:
        breached = threshold is not None and value is not None and value > threshold
        if not enough:
            insufficient(details, f"{INSUFFICIENT_DATA_REASON}: {events} events < {slo.min_events}")
            breached = False
        results.append(WindowResult(LATENCY, feature, metric, value, threshold, bool(breached),
                                      dict(details, events=events)))

    objectives = {0.5: (P50_MS, slo.p50_ms), 0.95: (P95_MS, slo.p95_ms), 0.99: (P99_MS, slo.p99_ms)}
    for part, histogram in state.latency.items():
        for q, (metric, objective) in objectives.items():
            result(part, metric, histogram.quantile(q), objective if part == LATENCY_TOTAL else None,
                   {"count": histogram.count, "max_ms": finite_or_none(histogram.max)})
    error_rate = state.errors / events if events else 0.0
    result(None, ERROR_RATE, error_rate, slo.error_rate, {"errors": state.errors})
    qps = events / window_seconds if window_seconds > 0 else 0.0
    result(None, QPS, qps, slo.max_qps, {"window_seconds": window_seconds})
    total = state.latency.get(LATENCY_TOTAL)
    mean_seconds = (total.mean or 0.0) / 1000.0 if total is not None and total.count else 0.0
    # Little's law: requests in flight = arrival rate x mean time each spends inside.
    result(None, CONCURRENCY, qps * mean_seconds, slo.max_concurrency,
           {QPS: qps, "mean_latency_ms": mean_seconds * 1000.0})
    return results
