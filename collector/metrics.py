"""The collector's Prometheus metrics, served at http://127.0.0.1:PORT/metrics.

Each collector has its own registry (several can run in one process, as in the tests).

| metric | type | labels | meaning |
|---|---|---|---|
| `driftline_collector_messages_consumed_total` | counter | topic | messages read from Kafka (valid or not) |
| `driftline_collector_events_valid_total` | counter | | valid inference events folded into windows |
| `driftline_collector_events_late_total` | counter | | valid events whose window had closed (folded in, flagged) |
| `driftline_collector_events_duplicate_total` | counter | | events whose event_id was just seen on the partition (producer retries), not counted again |
| `driftline_collector_dead_letters_total` | counter | topic | invalid messages sent to the DLQ topic and store |
| `driftline_collector_labels_total` | counter | | valid label events |
| `driftline_collector_labels_joined_total` | counter | | labels joined with their prediction and counted |
| `driftline_collector_labels_rejected_total` | counter | | joined labels that did not fit the window's quality task |
| `driftline_collector_lag_messages` | gauge | topic, partition | highwater minus the next offset to read |
| `driftline_collector_watermark_lag_seconds` | gauge | topic, partition | wall clock minus the partition's stored watermark (largest event time stored): how far behind the stream this collector is |
| `driftline_collector_pending_messages` | gauge | | messages consumed and not yet flushed |
| `driftline_collector_assigned_partitions` | gauge | topic | partitions this collector owns |
| `driftline_collector_flushes_total` | counter | outcome (ok, error, fenced) | flush transactions |
| `driftline_collector_flush_duration_seconds` | histogram | | time of a successful flush, transaction included |
| `driftline_collector_log_resets_total` | counter | topic | times the topic's log was replaced (new topic id: broker restart, topic recreated) |
| `driftline_collector_seconds_since_last_poll` | gauge | | seconds since a Kafka poll last returned (stuck polls: `defaults.COLLECTOR_POLL_STUCK_SECONDS`) |
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from driftline.metrics_endpoint import MetricsEndpoint

_PREFIX = "driftline_collector_"


class CollectorMetrics(MetricsEndpoint):
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.consumed = Counter(_PREFIX + "messages_consumed", "Messages read from Kafka (valid or not).",
                                ["topic"], registry=r)
        self.valid = Counter(_PREFIX + "events_valid", "Valid inference events folded into windows.", registry=r)
        self.late = Counter(_PREFIX + "events_late", "Valid events whose window had already closed.", registry=r)
        self.duplicates = Counter(_PREFIX + "events_duplicate",
                                  "Events whose event_id was just seen on the same partition (not counted again).",
                                  registry=r)
        self.dead_letters = Counter(_PREFIX + "dead_letters", "Invalid messages sent to the DLQ topic and store.",
                                    ["topic"], registry=r)
        self.labels = Counter(_PREFIX + "labels", "Valid label events.", registry=r)
        self.labels_joined = Counter(_PREFIX + "labels_joined", "Labels joined with their prediction.", registry=r)
        self.labels_rejected = Counter(_PREFIX + "labels_rejected",
                                       "Joined labels that did not fit the window's quality task.", registry=r)
        self.lag = Gauge(_PREFIX + "lag_messages", "Highwater minus the next offset to read.",
                         ["topic", "partition"], registry=r)
        self.watermark_lag = Gauge(_PREFIX + "watermark_lag_seconds",
                                   "Wall clock minus the largest event time stored for the partition.",
                                   ["topic", "partition"], registry=r)
        self.pending = Gauge(_PREFIX + "pending_messages", "Messages consumed and not yet flushed.", registry=r)
        self.assigned = Gauge(_PREFIX + "assigned_partitions", "Partitions this collector owns.", ["topic"],
                              registry=r)
        self.flushes = Counter(_PREFIX + "flushes", "Flush transactions by outcome.", ["outcome"], registry=r)
        self.flush_seconds = Histogram(_PREFIX + "flush_duration_seconds", "Duration of successful flushes.",
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                                       registry=r)
        self.log_resets = Counter(_PREFIX + "log_resets", "Topic logs replaced (new topic id).", ["topic"],
                                  registry=r)
        self.since_last_poll = Gauge(_PREFIX + "seconds_since_last_poll", "Seconds since a Kafka poll last returned.",
                                     registry=r)
        self._server = None

