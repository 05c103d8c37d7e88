"""A broker restart mid-stream: the collector recovers by itself and counts every event once.

The embedded broker keeps everything in memory: a restart brings empty topics whose offsets
start at 0 again, under a new topic id. Stored offsets of the old log must not be applied to
the new one (that would skip its first records), and the records the collector fetched from
the new log before it noticed must not be counted twice.
"""
from __future__ import annotations

import random
import time
from typing import Any, Callable

import pytest

from sqlalchemy import select

from driftline.broker import free_port
from driftline.collector.kafka_internals import connections
from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import ConsumerOffset
from tests.support.collector_helpers import collector_thread, config, event, events, merged, produce
from tests.support.waiting import wait_until


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
def test_collector_survives_broker_restarts_while_running_and_while_stopped(embedded_broker_factory, sqlite_url,
                                                                             unique_id):
    model = f"restart-{unique_id}"
    port = free_port()
    rng = random.Random(1)
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        values = [encode_event(event(model, sent + i)) for i in range(n)]
        produce(f"127.0.0.1:{port}", values, keys=[str(rng.random()).encode() for _ in range(n)])
        sent += n

    broker = embedded_broker_factory(port=port)
    send(400)
    cfg = config(broker.bootstrap_servers, sqlite_url)  # the default client (either is watched: _broker_gone)
    with collector_thread(cfg) as collector:
        wait_until(lambda: events(sqlite_url, model) == 400, message="the first 400 events")
        ids_before = _topic_ids(sqlite_url, cfg.group_id)

        seen_gone = _broker_gone(collector)
        broker.stop()
        wait_until(seen_gone, message="the collector to see the broker gone")
        broker = embedded_broker_factory(port=port)
        # More than before the restart: offsets of the new log run past the old stored ones.
        send(1_500)
        wait_until(lambda: events(sqlite_url, model) == 1_900, timeout=60,
                   message="the events produced after the restart")
        wait_until(lambda: collector.consumed >= 1_900 and not collector._pending(),
                   message="the collector to consume and flush all 1 900 messages")
        time.sleep(1.0)  # an observation window, not a wait: a late re-read would be counted twice in it
        assert events(sqlite_url, model) == 1_900
        assert collector.metrics.log_resets.labels("driftline.inference")._value.get() >= 1
    assert _topic_ids(sqlite_url, cfg.group_id).isdisjoint(ids_before)

    # The broker restarts while no collector runs: the stored offsets name the old log.
    broker.stop()
    broker = embedded_broker_factory(port=port)
    send(1_000)
    with collector_thread(config(broker.bootstrap_servers, sqlite_url, group_id=cfg.group_id)) as collector:
        wait_until(lambda: events(sqlite_url, model) == 2_900, timeout=60, message="all 2 900 events")
        wait_until(lambda: collector.consumed >= 1_000 and not collector._pending(),
                   message="the collector to consume and flush the 1 000 messages of the new log")
        time.sleep(1.0)  # an observation window, not a wait: a late re-read would be counted twice in it
    assert events(sqlite_url, model) == 2_900
    states = merged(sqlite_url, model)
    assert sum(s.features["x"].total for s in states.values()) == sum(range(2_900))
    broker.stop()


def _broker_gone(collector: Any) -> Callable[[], bool]:
    """Whether the collector's client has seen its connection closed since this was called."""
    source = collector._consumer
    if collector.config.kafka_client == "confluent":
        lost = source.connections_lost
        return lambda: source.connections_lost > lost
    before = connections(source.consumer)
    assert before, "the collector holds no connection to the broker"
    # kafka-python drops a connection once it has seen it closed
    return lambda: not any(old is now for old in before for now in connections(source.consumer))


def _topic_ids(url: str, group: str) -> set[str]:
    with store_db.session_scope(url) as session:
        return set(session.scalars(select(ConsumerOffset.topic_id).where(ConsumerOffset.group_id == group)))
