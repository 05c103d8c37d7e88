"""A poll that does not return is detected: its fetch is dead-lettered and stored as read, the process exits.

The stuck poll is made real: a reader that blocks inside `poll()` on a marked record (as
kafka-python spun inside one on a malformed batch). The collector's exit is replaced by a
recorder (the test runs in-process); a second collector then reads on after the range.
"""
from __future__ import annotations

import threading
import urllib.request

import orjson
import pytest
from sqlalchemy import select

from driftline.collector import record_batches
from driftline import defaults
from driftline.store import db as store_db
from driftline.store.models import DeadLetter
from tests.support.collector_helpers import collector_thread, config, event, events, produce_raw, record_batch
from tests.support.waiting import wait_until

MARK = b"block-the-poll"


@pytest.fixture(scope="module")
def own_broker(embedded_broker_factory) -> str:
    return embedded_broker_factory(partitions=1).bootstrap_servers


def test_a_stuck_poll_is_dead_lettered_and_the_next_collector_reads_on(own_broker, sqlite_url, unique_id, monkeypatch):
    model = f"stuck-{unique_id}"
    release = threading.Event()
    read = record_batches.LeanPartitionRecords._read

    def blocking_read(self, tp, records, *args):
        for record in read(self, tp, records, *args):
            if record.value == MARK:
                release.wait(60)  # stuck, until the test lets go (bounded)
                raise RuntimeError("released")
            yield record

    monkeypatch.setattr(record_batches.LeanPartitionRecords, "_read", blocking_read)
    produce_raw(own_broker, record_batch([orjson.dumps(event(model, i)) for i in range(3)]))
    exits: list[int] = []
    cfg = config(own_broker, sqlite_url, decoders=0, poll_stuck_s=1.5, kafka_client="kafka-python")  # its reader
    try:
        with collector_thread(cfg) as runner:
            runner.exit_process = exits.append
            wait_until(lambda: events(sqlite_url, model) == 3, timeout=60, message="the first events")
            stuck_base = produce_raw(own_broker, record_batch([MARK, b"also skipped"]))
            produce_raw(own_broker, record_batch([orjson.dumps(event(model, i)) for i in range(3, 6)]))
            wait_until(lambda: exits, timeout=60, message="the watchdog")
            stalled = runner.metrics.registry.get_sample_value("driftline_collector_seconds_since_last_poll")
            release.set()
    finally:
        release.set()
    assert exits == [defaults.COLLECTOR_POLL_STUCK_EXIT_CODE]
    assert stalled is not None and stalled > 1.5
    with store_db.session_scope(sqlite_url) as session:
        letters = [(d.offset, d.reason) for d in session.scalars(select(DeadLetter))]
    assert len(letters) == 1 and letters[0][0] == stuck_base
    assert "poll did not return within 1.5 s" in letters[0][1]
    assert f"offsets {stuck_base}-{stuck_base + 1} skipped" in letters[0][1]
    assert events(sqlite_url, model) == 3  # stored with the offsets before the exit

    monkeypatch.setattr(record_batches.LeanPartitionRecords, "_read", read)
    with collector_thread(config(own_broker, sqlite_url, decoders=0, group_id=cfg.group_id)):
        wait_until(lambda: events(sqlite_url, model) >= 6, timeout=60, message="the events after the range")
    assert events(sqlite_url, model) == 6


def test_metrics_expose_seconds_since_the_last_poll(own_broker, sqlite_url):
    with collector_thread(config(own_broker, sqlite_url, decoders=0, metrics_port=0)) as runner:
        port = runner.metrics.serve(0)
        wait_until(lambda: runner.metrics.registry.get_sample_value(
         "driftline_collector_seconds_since_last_poll") < 5, timeout=30, message="a poll")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    assert "driftline_collector_seconds_since_last_poll " in text
