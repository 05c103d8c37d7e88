"""The receiver's Prometheus metrics, at GET /metrics on its own port (as the worker serves its own).

Each receiver has its own registry (several can run in one process, as in the tests). The counts are
the service's own (`Receiver.stats()`), read at scrape time, so the service stays metric-free.

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_receiver_halves_total` | counter | | CloudEvent halves received (valid or not) |
| `driftline_receiver_pairs_total` | counter | | request/response pairs completed |
| `driftline_receiver_unpaired_total` | counter | | halves dead-lettered without their other half (waited too long, pushed out, at stop) |
| `driftline_receiver_duplicates_total` | counter | | halves received again (logger retries), ignored |
| `driftline_receiver_events_total` | counter | | valid events handed to the Kafka producer |
| `driftline_receiver_dead_letters_total` | counter | | refusals dead-lettered (DLQ topic and store; a call's merged letter counts each it holds) |
| `driftline_receiver_pending_halves` | gauge | | halves waiting for their other half |
| `driftline_receiver_pending_bytes` | gauge | | bytes those halves hold (bounded by receiver_max_pending_bytes) |
| `driftline_receiver_dead_letters_not_sent_total` | counter | | dead letters not sent for the in-flight bound (Kafka slow or down; kept in the store) |
| `driftline_receiver_dead_letters_inflight_bytes` | gauge | | bytes of dead letters waiting for Kafka |
| `driftline_receiver_events_buffered` | gauge | | events waiting for Kafka |
| `driftline_receiver_events_sent_total` | counter | | events acknowledged by Kafka |
| `driftline_receiver_events_failed_total` | counter | | events not delivered in time |
| `driftline_receiver_requests_total` | counter | endpoint (cloudevents, events, otlp), code | HTTP calls answered |
| `driftline_receiver_request_duration_seconds` | histogram | endpoint | time to answer a call (body read, pairing, validation, buffering) |
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

_PREFIX = "driftline_receiver_"
# Seconds: a call is a few milliseconds of parsing; the top buckets catch a slow store lookup.
DURATION_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
ENDPOINT_CLOUDEVENTS = "cloudevents"
ENDPOINT_EVENTS = "events"
ENDPOINT_OTLP = "otlp"

_COUNTERS = (("halves", "halves", "CloudEvent halves received (valid or not)."),
             ("pairs", "pairs", "Request/response pairs completed."),
             ("unpaired", "unpaired", "Halves dead-lettered without their other half."),
             ("duplicates", "duplicates", "Halves received again (logger retries), ignored."),
             ("events", "events", "Valid events handed to the Kafka producer."),
             ("dead_letters", "dead_letters", "Refusals dead-lettered (a merged letter counts each it holds)."),
             ("events_sent", "sent", "Events acknowledged by Kafka."),
             ("events_failed", "failed", "Events accepted but not delivered in time."),
             ("dead_letters_not_sent", "dead_letters_not_sent", "Dead letters not sent: too many waited for Kafka."))


class _StatsCollector(Collector):
    def __init__(self, stats: Callable[[], dict[str, Any]]):
        self.stats = stats

    def collect(self) -> Iterator:
        stats = self.stats()
        for name, key, doc in _COUNTERS:
            yield CounterMetricFamily(_PREFIX + name, doc, value=stats[key])
        yield GaugeMetricFamily(_PREFIX + "pending_halves", "Halves waiting for their other half.",
                                value=stats["pending_halves"])
        yield GaugeMetricFamily(_PREFIX + "pending_bytes", "Bytes the waiting halves hold.",
                                value=stats["pending_bytes"])
        yield GaugeMetricFamily(_PREFIX + "events_buffered", "Events waiting for Kafka.", value=stats["buffered"])
        yield GaugeMetricFamily(_PREFIX + "dead_letters_inflight_bytes", "Bytes of dead letters waiting for Kafka.",
                                value=stats["dead_letters_inflight_bytes"])


class ReceiverMetrics:
    def __init__(self, stats: Callable[[], dict[str, Any]]):
        self.registry = CollectorRegistry()
        self.registry.register(_StatsCollector(stats))
        self.requests = Counter(_PREFIX + "requests", "HTTP calls answered.", ["endpoint", "code"],
                                registry=self.registry)
        self.duration = Histogram(_PREFIX + "request_duration_seconds", "Time to answer a call.", ["endpoint"],
                                  buckets=DURATION_BUCKETS, registry=self.registry)

    def observe(self, endpoint: str, code: int, seconds: float) -> None:
        self.requests.labels(endpoint, str(code)).inc()
        self.duration.labels(endpoint).observe(seconds)
