"""Capacity and cost signals of one worker replica, measured over a trailing window, exported at scrape time.

The forward pass is the worker's server (one batcher thread): over the last
`WORKER_SIGNAL_WINDOW_SECONDS` the worker measures

* the **utilisation** :math:`\\rho` = forward-pass busy seconds per second (the batches' compute time);
* the **service rate** :math:`\\mu` = requests per busy second of the forward pass (at the batch sizes seen);
* the **arrival rate** :math:`\\lambda` = requests answered per second (cache hits included), and the mean
  time in the worker :math:`W`, so that Little's law gives the requests in the worker :math:`L = \\lambda W`;
* the **recommended replicas** :math:`\\rho / \\rho^*` at the target utilisation :math:`\\rho^*`
  (`[capacity] target_utilization`, default 0.65): this replica's load in replicas at the target, which a
  deployment sums over its replicas and rounds up (queueing delay grows as :math:`\\rho/(1-\\rho)`);
* the **cost per 1 000 predictions** per model version, from `[cost] price_per_replica_hour` of the
  replica's device kind (``cpu``, ``cuda``): the replica's price per second, shared among the versions it
  serves by their share of its forward-pass time, over each version's measured prediction rate. A slower
  canary takes more forward-pass time per prediction, so it shows what it would cost.

A figure that cannot be measured (no traffic in the window, no price for the device) is absent from the
scrape, never zero.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Annotated, Any, Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import Field

from driftline import serving_defaults
from driftline.toml_sections import Table, given, parse_section

__all__ = ["CAPACITY", "COST", "CapacityTable", "CostTable", "ServingSignals", "SignalsConfig", "device_kind"]

CAPACITY = "capacity"
COST = "cost"


class CostTable(Table):
    """`[cost]`: the price of a replica-hour per device kind (``cpu``, ``cuda``)."""

    WHERE = "[cost]"

    price_per_replica_hour: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = {}


class CapacityTable(Table):
    """`[capacity]`: the utilisation the recommended replica count aims at, and the window the signals cover."""

    WHERE = "[capacity]"

    target_utilization: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = \
        serving_defaults.WORKER_TARGET_UTILIZATION
    window_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = serving_defaults.WORKER_SIGNAL_WINDOW_SECONDS


class SignalsConfig(CostTable, CapacityTable):
    """`[cost]` and `[capacity]` together: prices per device kind (per replica-hour), the target utilisation, the
    window; each table read (and its errors named) on its own."""

    WHERE = "[cost] or [capacity]"

    @classmethod
    def from_sections(cls, cost: Mapping[str, Any] | None, capacity: Mapping[str, Any] | None) -> "SignalsConfig":
        prices = parse_section(CostTable, cost, CostTable.WHERE)
        levels = parse_section(CapacityTable, capacity, CapacityTable.WHERE)
        return cls(**given(prices), **given(levels))

    @classmethod
    def from_settings(cls, settings: Any) -> "SignalsConfig":
        return cls.from_sections(settings.section(COST), settings.section(CAPACITY))


def device_kind(device: str) -> str:
    """"cuda:0" -> "cuda", "cpu" -> "cpu": the key of `[cost] price_per_replica_hour`."""
    return device.split(":", 1)[0]


class ServingSignals(Collector):
    """Records answers and batches (thread-safe, O(1) each) and yields the gauges above at scrape time."""

    def __init__(self, config: SignalsConfig | None = None, clock: Callable[[], float] = time.monotonic):
        self.config = config or SignalsConfig()
        self.clock = clock
        self.model: str | None = None
        self.device: str | None = None
        self._lock = threading.Lock()
        self._started = clock()
        # (time, version, total ms, forward-pass ms attributed to this request) per answer
        self._answers: deque[tuple[float, str, float, float]] = deque()
        self._batches: deque[tuple[float, int, float]] = deque()  # (time, size, seconds) per forward pass

    def set_model(self, model: str, device: str) -> None:
        self.model, self.device = model, device

    def answered(self, version: str, total_ms: float, compute_ms: float, batch_size: int | None) -> None:
        """One answered request; `compute_ms / batch_size` is its share of its batch's forward pass (0: cached)."""
        share = compute_ms / batch_size if batch_size else 0.0
        now = self.clock()
        with self._lock:
            self._answers.append((now, version, total_ms, share))
            self._trim(now)

    def batch(self, size: int, seconds: float) -> None:
        now = self.clock()
        with self._lock:
            self._batches.append((now, size, seconds))
            self._trim(now)

    def _trim(self, now: float) -> None:
        oldest = now - self.config.window_seconds
        for queue in (self._answers, self._batches):
            while queue and queue[0][0] < oldest:
                queue.popleft()

    def figures(self) -> dict[str, Any]:
        """The measured figures (a key is absent when it cannot be measured); see the module docstring."""
        now = self.clock()
        with self._lock:
            self._trim(now)
            answers, batches = list(self._answers), list(self._batches)
        span = min(self.config.window_seconds, now - self._started)
        out: dict[str, Any] = {"window_seconds": span}
        if span <= 0:
            return out
        busy = sum(seconds for _, _, seconds in batches)
        served = sum(size for _, size, _ in batches)
        out["utilization"] = busy / span
        out["recommended_replicas"] = out["utilization"] / self.config.target_utilization
        if busy > 0:
            out["service_rate"] = served / busy
        if answers:
            out["arrival_rate"] = len(answers) / span
            out["requests_in_system"] = out["arrival_rate"] * (sum(a[2] for a in answers) / len(answers) / 1000.0)
        price = self.config.price_per_replica_hour.get(device_kind(self.device or ""))
        if price is not None and answers:
            out["cost_per_1000_predictions"] = _cost_per_version(answers, price / 3600.0, span)
        return out

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.model is None:
            return
        figures = self.figures()
        labels, values = ["model", "device"], [self.model, self.device or ""]
        for key, name, doc in _GAUGES:
            if key in figures:
                gauge = GaugeMetricFamily(name, doc, labels=labels)
                gauge.add_metric(values, figures[key])
                yield gauge
        gauge = GaugeMetricFamily("driftline_worker_target_utilization",
                                  "The utilisation the recommended replica count aims at ([capacity]).", labels=labels)
        gauge.add_metric(values, self.config.target_utilization)
        yield gauge
        costs = figures.get("cost_per_1000_predictions")
        if costs:
            gauge = GaugeMetricFamily("driftline_worker_cost_per_1000_predictions",
                                      "The replica's price ([cost] per replica-hour of its device kind) per 1 000 "
                                      "predictions of each version, at the measured rates.",
                                      labels=["model", "version", "device"])
            for version, cost in sorted(costs.items()):
                gauge.add_metric([self.model, version, self.device or ""], cost)
            yield gauge


_GAUGES = (
    ("utilization", "driftline_worker_utilization",
     "Forward-pass busy seconds per second over the signal window (rho)."),
    ("recommended_replicas", "driftline_worker_recommended_replicas",
     "This replica's load in replicas at the target utilisation (rho / target): sum over replicas, round up."),
    ("service_rate", "driftline_worker_service_rate",
     "Requests per busy second of the forward pass (mu), at the batch sizes seen."),
    ("arrival_rate", "driftline_worker_arrival_rate", "Requests answered per second (lambda), cache hits included."),
    ("requests_in_system", "driftline_worker_requests_in_system",
     "Requests in the worker by Little's law (L = lambda x mean latency)."),
)


def _cost_per_version(answers: list[tuple[float, str, float, float]], price_per_second: float,
                      span: float) -> dict[str, float]:
    """Cost per 1 000 predictions per version: the price shared by forward-pass time (by answers if none),
    over the version's predictions per second."""
    count: dict[str, int] = {}
    busy: dict[str, float] = {}
    for _, version, _, share in answers:
        count[version] = count.get(version, 0) + 1
        busy[version] = busy.get(version, 0.0) + share
    total_busy, total = sum(busy.values()), len(answers)
    out = {}
    for version, n in count.items():
        weight = busy[version] / total_busy if total_busy > 0 else n / total
        out[version] = price_per_second * weight * 1000.0 / (n / span)
    return out if all(math.isfinite(v) for v in out.values()) else {}
