"""`driftline collector`: run the Kafka consumer that folds events into window states."""
from __future__ import annotations

import logging
import signal
import sys
from typing import Any

import click

from driftline import defaults
from driftline.config import common_options


def _decoders(_ctx: Any, _param: Any, value: str) -> int | str:
    if value == "auto":
        return value
    try:
        count = int(value)
    except ValueError:
        count = -1
    if not 0 <= count <= 64:
        raise click.BadParameter(f"expected 'auto' or a number of processes from 0 to 64, got {value!r}")
    return count


@click.command()
@click.option("--group-id", default=defaults.COLLECTOR_GROUP_ID, show_default=True,
              help="Kafka consumer group; every collector of one store uses the same group.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None,
              help="Port of the Prometheus /metrics server on 127.0.0.1 (0: none; default: "
                   "DRIFTLINE_COLLECTOR_METRICS_PORT or 9108).")
@click.option("--flush-interval", type=click.FloatRange(min=0.01), default=defaults.COLLECTOR_FLUSH_INTERVAL_SECONDS,
              show_default=True, help="Seconds between flushes of window states and offsets to the store.")
@click.option("--flush-max-events", type=click.IntRange(min=1), default=defaults.COLLECTOR_FLUSH_MAX_EVENTS,
              show_default=True, help="Flush as soon as this many messages are pending.")
@click.option("--poll-max-records", type=click.IntRange(min=1), default=defaults.COLLECTOR_POLL_MAX_RECORDS,
              show_default=True, help="Records per Kafka poll (one vectorised fold per poll).")
@click.option("--window-seconds", type=click.IntRange(min=1), default=None,
              help="Event-time window length (default: DRIFTLINE_WINDOW_SECONDS or 60).")
@click.option("--allowed-lateness-seconds", type=click.IntRange(min=0), default=None,
              help="How long after its end a window still takes events without flagging them late "
                   "(default: DRIFTLINE_ALLOWED_LATENESS_SECONDS or 30).")
@click.option("--prediction-retention-days", type=click.FloatRange(min=0, min_open=True),
              default=defaults.COLLECTOR_PREDICTION_RETENTION_DAYS, show_default=True,
              help="How long predictions wait for their labels.")
@click.option("--session-timeout-ms", type=click.IntRange(min=1000), default=defaults.COLLECTOR_SESSION_TIMEOUT_MS,
              show_default=True, help="Kafka group session timeout.")
@click.option("--heartbeat-interval-ms", type=click.IntRange(min=100),
              default=defaults.COLLECTOR_HEARTBEAT_INTERVAL_MS, show_default=True,
              help="Kafka group heartbeat interval.")
@click.option("--decoders", default=str(defaults.COLLECTOR_DECODERS), show_default=True, callback=_decoders,
              help="Decoder processes that decode and fold events beside the collector process "
                   "(0: all in one process; auto: two on 2-7 cores, four from 8 cores up).")
@click.option("--record-reader", type=click.Choice(defaults.COLLECTOR_RECORD_READERS),
              default=defaults.COLLECTOR_RECORD_READER, show_default=True,
              help="How fetched record batches are unpacked: driftline's lean reader (same records, about "
                   "half the CPU) or kafka-python's own.")
@click.option("--kafka-client", type=click.Choice(defaults.COLLECTOR_KAFKA_CLIENTS), default=None,
              help="The Kafka client library: librdkafka (confluent-kafka, several times faster) or kafka-python "
                   "(which bounds decompression itself) (default: DRIFTLINE_COLLECTOR_KAFKA_CLIENT, else confluent "
                   "where confluent-kafka imports).")
@click.option("--max-events", type=click.IntRange(min=1), default=None,
              help="Stop once this many messages (both topics, valid or not) are consumed and stored "
                   "(tests, benchmarks).")
@click.option("--idle-exit", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop after this many seconds without a message, everything stored (tests, benchmarks).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@common_options
def collector(group_id: str, metrics_port: int | None, flush_interval: float, flush_max_events: int,
              poll_max_records: int, window_seconds: int | None, allowed_lateness_seconds: int | None,
              prediction_retention_days: float, session_timeout_ms: int, heartbeat_interval_ms: int,
              decoders: int | str, record_reader: str, kafka_client: str | None, max_events: int | None, idle_exit: float | None, log_level: str,
              settings: Any) -> None:
    """Consume inference events and labels from Kafka into event-time window states.

    Exactly once into the store: window states, dead letters, predictions and labels
    are written in one transaction with the consumed offsets; SIGTERM or Ctrl-C
    flushes and exits.
    """
    from driftline.collector.config import CollectorConfig
    from driftline.collector.consumer import Collector
    from driftline.store.db import require_migrated

    if heartbeat_interval_ms >= session_timeout_ms:
        raise click.BadParameter("must be below --session-timeout-ms", param_hint="--heartbeat-interval-ms")
    logging.basicConfig(level=getattr(logging, log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("kafka", "driftline.collector.librdkafka"):  # the clients' own chatter: warnings and worse
        logging.getLogger(name).setLevel(max(logging.WARNING, getattr(logging, log_level.upper())))
    require_migrated(settings.db_url)
    config = CollectorConfig.from_settings(
        settings, group_id=group_id, metrics_port=metrics_port, flush_interval_s=flush_interval,
        flush_max_events=flush_max_events, poll_max_records=poll_max_records, window_seconds=window_seconds,
        allowed_lateness_seconds=allowed_lateness_seconds, prediction_retention_days=prediction_retention_days,
        session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
        max_messages=max_events, idle_exit_s=idle_exit, decoders=decoders,
        record_reader=record_reader, kafka_client=kafka_client)
    runner = Collector(config)

    def stop(signum: int, _frame: Any) -> None:
        logging.getLogger(__name__).info("%s: flushing and stopping", signal.Signals(signum).name)
        runner.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stored = runner.run()
    click.echo(f"collector stopped: {stored} messages stored ({runner.consumed} consumed)", err=True)
