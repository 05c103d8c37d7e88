"""The worker's Prometheus metrics, on a registry of its own (so several workers can share a process in tests)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from driftline.client import SenderStats
from driftline.worker.device_metrics import DeviceMetrics
from driftline.worker.serving_signals import ServingSignals, SignalsConfig

# Seconds; dense below 10 ms where the worker lives, sparse up to the 10 s the latency fault can reach.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
                   0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class _EventSenderCollector(Collector):
    """Reads the event sender's counters at scrape time (the sender itself stays metric-free)."""

    def __init__(self, stats: Callable[[], SenderStats | None]):
        self.stats = stats

    def collect(self) -> Iterator:
        stats = self.stats()
        if stats is None:
            return
        for name, value, doc in (("sent", stats.sent, "Inference events acknowledged by Kafka."),
                                 ("dropped", stats.dropped, "Events dropped because the buffer was full."),
                                 ("failed", stats.failed, "Events accepted but not delivered in time.")):
            yield CounterMetricFamily(f"driftline_worker_events_{name}", doc, value=value)
        yield GaugeMetricFamily("driftline_worker_events_buffered", "Events waiting for Kafka.", value=stats.buffered)
        yield GaugeMetricFamily("driftline_worker_kafka_connected", "1 when the event producer is connected.",
                                value=1 if stats.connected else 0)


PROTOCOL_PREDICT = "predict"
PROTOCOL_V2_REST = "v2-rest"
PROTOCOL_V2_GRPC = "v2-grpc"


class ProtocolLatency:
    """The latency histogram's three stages for one protocol (children looked up once, not per request)."""

    __slots__ = ("total", "queue", "compute", "signals")

    def __init__(self, histogram: Histogram, protocol: str, signals: ServingSignals | None = None):
        self.total = histogram.labels("total", protocol)
        self.queue = histogram.labels("queue", protocol)
        self.compute = histogram.labels("compute", protocol)
        self.signals = signals

    def observe(self, total_ms: float, queue_ms: float, compute_ms: float, version: str | None = None,
                batch_size: int | None = None) -> None:
        """One answer; with its `version` it also counts in the capacity and cost signals (`ServingSignals`)."""
        self.total.observe(total_ms / 1000.0)
        self.queue.observe(queue_ms / 1000.0)
        self.compute.observe(compute_ms / 1000.0)
        if self.signals is not None and version is not None:
            self.signals.answered(version, total_ms, compute_ms, batch_size)


class WorkerMetrics:
    def __init__(self, sender_stats: Callable[[], SenderStats | None], queue_depth: Callable[[], int],
                 settings: Any = None):
        """`settings`: where the `[cost]` and `[capacity]` sections are read (None: their defaults)."""
        self.registry = CollectorRegistry()
        r = self.registry
        # capacity and cost (worker/serving_signals.py)
        self.signals = ServingSignals(SignalsConfig.from_settings(settings) if settings is not None else None)
        self.device_metrics: DeviceMetrics | None = None  # the GPU's figures, once the device is known
        self.latency = Histogram("driftline_worker_latency_seconds",
                                 "Request latency by stage (queue, compute, total) and protocol (predict: POST /predict; "
                                 "v2-rest, v2-grpc: the Open Inference Protocol, per row).",
                                 ["stage", "protocol"], buckets=LATENCY_BUCKETS, registry=r)
        self.latency_predict = ProtocolLatency(self.latency, PROTOCOL_PREDICT, self.signals)
        self.latency_v2_rest = ProtocolLatency(self.latency, PROTOCOL_V2_REST, self.signals)
        self.latency_v2_grpc = ProtocolLatency(self.latency, PROTOCOL_V2_GRPC, self.signals)
        self.batch_size = Histogram("driftline_worker_batch_size", "Requests per forward pass.",
                                    buckets=BATCH_BUCKETS, registry=r)
        self.batch_seconds = Histogram("driftline_worker_batch_seconds", "Forward pass time per batch.",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter("driftline_worker_requests", "POST /predict answers by HTTP status.", ["code"],
                                registry=r)
        self.v2_requests = Counter("driftline_worker_v2_requests",
                                   "Open Inference Protocol infer answers by protocol and status (HTTP code or gRPC "
                                   "status name).", ["protocol", "code"], registry=r)
        self.cache_hits = Counter("driftline_worker_cache_hits", "Predictions answered from the cache.", registry=r)
        self.cache_misses = Counter("driftline_worker_cache_misses", "Predictions computed by the model.", registry=r)
        self.cache_remote_hits = Counter("driftline_worker_cache_remote_hits",
                                         "Cache hits answered by the shared Redis tier (part of cache_hits).",
                                         registry=r)
        self.cache_remote_errors = Counter("driftline_worker_cache_remote_errors",
                                           "Failed or timed-out Redis round trips (each answered as a miss).",
                                           registry=r)
        self.model_swaps = Counter("driftline_worker_model_swaps", "Hot swaps to another production version.",
                                   registry=r)
        self.shadow_answers = Counter("driftline_worker_shadow_answers",
                                      "Shadow predictions made by a rollout's candidate (logged, never returned).",
                                      registry=r)
        self.shadow_dropped = Counter("driftline_worker_shadow_dropped",
                                      "Shadow copies dropped because the candidate fell behind (queue full).",
                                      registry=r)
        self.shadow_errors = Counter("driftline_worker_shadow_errors", "Shadow batches the candidate failed on.",
                                     registry=r)
        self.routed = Counter("driftline_worker_routed_requests", "POST /predict answers by rollout role.", ["role"],
                              registry=r)
        self.plan_changes = Counter("driftline_worker_plan_changes", "Rollout plan changes picked up.", registry=r)
        self.queue_depth = Gauge("driftline_worker_queue_depth", "Requests waiting for a batch.", registry=r)
        self.body_reads = Gauge("driftline_worker_body_reads",
                                "POST /predict requests whose body is still arriving (they hold no admission slot).",
                                registry=r)
        self.queue_depth.set_function(queue_depth)
        self.model_info = Gauge("driftline_worker_model_info", "The version being served (value 1).",
                                ["model", "version", "device"], registry=r)
        r.register(_EventSenderCollector(sender_stats))
        r.register(self.signals)

    def observe_batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.batch_seconds.observe(seconds)
        self.signals.batch(size, seconds)

    def set_model(self, model: str, version: str, device: str) -> None:
        self.model_info.clear()
        self.model_info.labels(model, version, device).set(1)
        self.signals.set_model(model, device)
        if self.device_metrics is None:
            self.device_metrics = DeviceMetrics(device)
            self.registry.register(self.device_metrics)
