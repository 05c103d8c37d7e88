"""The live serving signals of a worker, read from its /metrics: utilisation, recommended replicas, rates, cost
per 1 000 predictions per version, and the GPU's utilisation and memory when the worker serves on one.

The rest of the dashboard reads the store; these figures live only in the worker (docs/worker.md,
"Capacity, cost and device signals"), so the model page asks the worker at `dashboard_worker_metrics_url`
(default: the local worker's `http://127.0.0.1:{worker_port}/metrics`). A figure the worker does not
export (no GPU, no price for its device, no traffic yet) is absent here too.
"""
from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

# How long the page waits for the worker: it must never hold the page up.
TIMEOUT_SECONDS = 1.0
# metric name -> key of `parse_signals`'s answer
WORKER_GAUGES = {
    "driftline_worker_utilization": "utilization",
    "driftline_worker_recommended_replicas": "recommended_replicas",
    "driftline_worker_target_utilization": "target_utilization",
    "driftline_worker_arrival_rate": "arrival_rate",
    "driftline_worker_service_rate": "service_rate",
    "driftline_worker_requests_in_system": "requests_in_system",
    "driftline_worker_device_utilization_ratio": "gpu_utilization",
    "driftline_worker_device_memory_used_bytes": "gpu_memory_used_bytes",
    "driftline_worker_device_memory_total_bytes": "gpu_memory_total_bytes",
}
COST = "driftline_worker_cost_per_1000_predictions"


def metrics_url(settings: Any) -> str:
    return settings.dashboard_worker_metrics_url or f"http://127.0.0.1:{settings.worker_port}/metrics"


def parse_signals(text: str, model: str) -> dict[str, Any]:
    """The figures of `model`'s worker in a Prometheus text scrape; "cost" maps version -> cost per 1 000."""
    out: dict[str, Any] = {}
    costs: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model", model) != model:
                continue
            if sample.name in WORKER_GAUGES:
                out[WORKER_GAUGES[sample.name]] = sample.value
                if "device" in sample.labels:
                    out["device"] = sample.labels["device"]
            elif sample.name == COST:
                costs[sample.labels.get("version", "")] = sample.value
    if costs:
        out["cost"] = costs
    return out


def fetch_signals(url: str, model: str) -> tuple[dict[str, Any], str | None]:
    """(figures, problem): the worker's figures, or {} and why there are none."""
    try:
        response = httpx.get(url, timeout=TIMEOUT_SECONDS)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        return {}, f"no worker answered at {url} ({type(exc).__name__})"
    try:
        return parse_signals(response.text, model), None
    except ValueError as exc:
        return {}, f"{url} is not a Prometheus scrape ({exc})"
