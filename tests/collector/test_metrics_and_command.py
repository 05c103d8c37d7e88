"""Prometheus /metrics, duplicate events, and the `driftline collector` command."""
from __future__ import annotations

import subprocess

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftline.broker import free_port
from driftline.config import TOPIC_LABELS
from driftline.events import encode_event
from tests.support.collector_helpers import DRIFTLINE, collector_thread, config, event, events, label, produce
from tests.support.waiting import wait_until


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_refuse_a_rebound_host_and_answer_loopback_names():
    """A DNS-rebinding page reaches 127.0.0.1 under its own name: no feature names or scores for it."""
    from driftline.collector.metrics import CollectorMetrics

    metrics = CollectorMetrics()
    metrics.consumed.labels("driftline.inference").inc()
    port = metrics.serve(0)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        refused = httpx.get(url, headers={"Host": "rebind.evil.example"}, timeout=5)
        assert refused.status_code == 400 and "driftline_collector" not in refused.text
        assert "rebind.evil.example" in refused.json()["detail"]
        for host in ("localhost", f"127.0.0.1:{port}", "[::1]"):
            assert "driftline_collector_messages_consumed_total" in httpx.get(url, headers={"Host": host}, timeout=5).text
        assert httpx.post(url, content=b"x", timeout=5).status_code == 405
    finally:
        metrics.stop()


# (client, record reader): the reader is kafka-python's fetcher's (the lean one is the reader of most other
# kafka-python tests); librdkafka reads batches itself
@pytest.mark.parametrize("client, record_reader", [("kafka-python", "kafka-python"), ("confluent", "lean")])
def test_metrics_count_what_the_collector_did(client, record_reader, embedded_broker_factory, sqlite_url, unique_id):
    from driftline.collector.record_batches import LeanPartitionRecords

    broker = embedded_broker_factory()  # its own topics: the counters are exact
    model = f"metrics-{unique_id}"
    valid = [event(model, i, request_id=f"{unique_id}-{i}") for i in range(200)]
    duplicate = valid[7]  # a producer retry: the same event on the same partition
    values = [encode_event(e) for e in valid] + [b"not json", b"{}", encode_event(duplicate)]
    produce(broker.bootstrap_servers, values, keys=[b"one-partition"] * len(values))
    produce(broker.bootstrap_servers, [encode_event(label(model, f"{unique_id}-1", 1))], topic=TOPIC_LABELS)
    port = free_port()
    cfg = config(broker.bootstrap_servers, sqlite_url, metrics_port=port, record_reader=record_reader,
                 kafka_client=client)
    with collector_thread(cfg) as collector:
        wait_until(lambda: collector.flushed == 204, message="204 messages stored")
        reader = getattr(getattr(collector._consumer, "consumer", None), "_fetcher", None)
        wait_until(lambda: _samples(port).get(("driftline_collector_lag_messages",
                                               (("partition", "0"), ("topic", "driftline.inference")))) is not None,
                   message="the lag gauge")
        samples = _samples(port)
    if client == "kafka-python":
        assert (reader.PartitionRecords is LeanPartitionRecords) == (record_reader == "lean")
    assert events(sqlite_url, model) == 200  # the duplicate is not counted again

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("driftline_collector_messages_consumed_total", topic="driftline.inference") == 203
    assert value("driftline_collector_messages_consumed_total", topic="driftline.labels") == 1
    assert value("driftline_collector_events_valid_total") == 200
    assert value("driftline_collector_events_duplicate_total") == 1
    assert value("driftline_collector_dead_letters_total", topic="driftline.inference") == 2
    assert value("driftline_collector_labels_total") == 1
    assert value("driftline_collector_labels_joined_total") == 1
    assert value("driftline_collector_events_late_total") == 0
    assert value("driftline_collector_flushes_total", outcome="ok") >= 1
    assert value("driftline_collector_flush_duration_seconds_count") >= 1
    assert value("driftline_collector_assigned_partitions", topic="driftline.inference") == 4
    lags = {k[1]: v for k, v in samples.items() if k[0] == "driftline_collector_lag_messages"}
    assert len(lags) == 8 and all(v == 0 for v in lags.values())
    assert value("driftline_collector_pending_messages") == 0


def test_command_help_and_bad_options(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(DRIFTLINE), "collector", *args], capture_output=True, text=True, timeout=60)

    help_text = run("--help")
    assert help_text.returncode == 0
    for option in ("--group-id", "--metrics-port", "--flush-interval", "--max-events", "--idle-exit",
                   "--record-reader"):
        assert option in help_text.stdout
    reader = run("--record-reader", "confluent")
    assert reader.returncode == 2 and "'lean'" in reader.stderr and "'kafka-python'" in reader.stderr
    bad = run("--session-timeout-ms", "2000", "--heartbeat-interval-ms", "5000")
    assert bad.returncode == 2 and "--heartbeat-interval-ms" in bad.stderr
    empty = run("--db", f"sqlite:///{tmp_path / 'empty.db'}", "--metrics-port", "0")
    assert empty.returncode == 1 and "driftline db upgrade" in empty.stderr and "Traceback" not in empty.stderr


def test_sigterm_flushes_and_exits_cleanly(embedded_broker_factory, sqlite_url, spawn_collector, unique_id):
    broker = embedded_broker_factory().bootstrap_servers  # its own topics: pending counts only ours
    model = f"term-{unique_id}"
    port = free_port()
    # A 30 s flush interval: the events can only be stored by the flush that SIGTERM triggers.
    proc = spawn_collector(broker, sqlite_url, f"term-{unique_id}", "--flush-interval", "30",
                           "--metrics-port", str(port))
    produce(broker, [encode_event(event(model, i)) for i in range(50)])

    def pending() -> float:
        try:
            return _samples(port).get(("driftline_collector_pending_messages", ()), 0)
        except httpx.HTTPError:
            return 0

    wait_until(lambda: pending() >= 50, timeout=40, message="the collector to hold the 50 events")
    assert events(sqlite_url, model) == 0
    assert proc.terminate() == 0, proc.output()
    assert events(sqlite_url, model) == 50
    assert "SIGTERM: flushing and stopping" in proc.output()
