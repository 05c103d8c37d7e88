"""`CollectorConfig`: everything one collector process is told, from the settings and the command line."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driftline import defaults
from driftline.config import TOPIC_DEAD_LETTERS, TOPIC_INFERENCE, TOPIC_LABELS, Settings
from driftline.collector.record_source import check_kafka_client, default_kafka_client
from driftline.kafka_security import KafkaSecurity
from driftline.segments import SegmentSpec


@dataclass
class CollectorConfig:
    bootstrap_servers: str
    db_url: str
    group_id: str = defaults.COLLECTOR_GROUP_ID
    window_seconds: int = defaults.WINDOW_SECONDS
    allowed_lateness_seconds: int = defaults.ALLOWED_LATENESS_SECONDS
    idle_partition_seconds: float = defaults.IDLE_PARTITION_SECONDS  # heartbeats come 4x as often (watermarks)
    flush_interval_s: float = defaults.COLLECTOR_FLUSH_INTERVAL_SECONDS
    flush_max_events: int = defaults.COLLECTOR_FLUSH_MAX_EVENTS
    poll_max_records: int = defaults.COLLECTOR_POLL_MAX_RECORDS
    session_timeout_ms: int = defaults.COLLECTOR_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = defaults.COLLECTOR_HEARTBEAT_INTERVAL_MS
    prediction_retention_days: float = defaults.COLLECTOR_PREDICTION_RETENTION_DAYS
    prune_interval_s: float = defaults.COLLECTOR_PRUNE_INTERVAL_SECONDS
    label_sweep_s: float = defaults.COLLECTOR_LABEL_SWEEP_SECONDS
    baseline_recheck_s: float = defaults.COLLECTOR_BASELINE_RECHECK_SECONDS
    dead_letter_raw_bytes: int = defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES
    dedup_event_ids: int = defaults.COLLECTOR_DEDUP_EVENT_IDS
    retry_min_s: float = defaults.COLLECTOR_FLUSH_RETRY_MIN_SECONDS
    retry_max_s: float = defaults.COLLECTOR_FLUSH_RETRY_MAX_SECONDS
    shutdown_flush_s: float = defaults.COLLECTOR_SHUTDOWN_FLUSH_SECONDS
    decoders: int | str = defaults.COLLECTOR_DECODERS  # decoder processes, or "auto" (driftline.collector.decoders)
    record_reader: str = defaults.COLLECTOR_RECORD_READER  # "lean" or "kafka-python" (driftline.collector.record_batches)
    # "confluent" (librdkafka) or "kafka-python" (driftline.collector.record_source); default: confluent if it imports
    kafka_client: str = field(default_factory=default_kafka_client)
    poll_stuck_s: float = defaults.COLLECTOR_POLL_STUCK_SECONDS  # a poll running longer is stuck
    stall_s: float = defaults.COLLECTOR_STALL_SECONDS  # librdkafka not moving on a partition this long: read past
    metrics_port: int = 0  # 0: no /metrics server
    max_messages: int | None = None  # stop once this many messages are consumed and flushed
    idle_exit_s: float | None = None  # stop after this long without a message (everything flushed)
    inference_topic: str = TOPIC_INFERENCE
    labels_topic: str = TOPIC_LABELS
    dead_letter_topic: str = TOPIC_DEAD_LETTERS
    client_id: str = "driftline-collector"
    security: KafkaSecurity | None = None  # TLS / SASL for the consumer and the DLQ producer (None: plaintext)
    segments: SegmentSpec = SegmentSpec()  # [segments]: columns window states keep per-value sub-states for

    @property
    def watermark_heartbeat_s(self) -> float:
        """How often idle partitions' watermarks are confirmed: well inside the scheduler's idle time."""
        return min(defaults.WATERMARK_HEARTBEAT_SECONDS, self.idle_partition_seconds / 4)

    def __post_init__(self) -> None:
        if self.record_reader not in defaults.COLLECTOR_RECORD_READERS:
            raise ValueError(f"record_reader must be one of {', '.join(defaults.COLLECTOR_RECORD_READERS)}, "
                             f"got {self.record_reader!r}")
        check_kafka_client(self.kafka_client)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> "CollectorConfig":
        values = {"bootstrap_servers": settings.bootstrap_servers, "db_url": settings.db_url,
                  "window_seconds": settings.window_seconds,
                  "allowed_lateness_seconds": settings.allowed_lateness_seconds,
                  "idle_partition_seconds": settings.idle_partition_seconds,
                  "metrics_port": settings.collector_metrics_port,
                  "security": KafkaSecurity.from_settings(settings).checked(),
                  "segments": SegmentSpec.from_settings(settings),
                  "kafka_client": settings.collector_kafka_client or default_kafka_client()}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
