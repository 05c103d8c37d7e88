"""Fault injection during a `driftline up` run: kill components one at a time; everything recovers.

With a broker that outlives the components (here: one started by the test, as a production Kafka would),
counts stay exact: every event the worker put on Kafka is counted once in the store, after SIGKILLs of the
collector, the scheduler and the worker. With the embedded broker (memory storage), a broker crash loses
what it held; `up` restarts it and traffic flows again (README: "The embedded broker").
"""
from __future__ import annotations

import os
import signal
import subprocess

import pytest
from kafka import KafkaConsumer, TopicPartition
from sqlalchemy import func, select

from driftline.config import TOPIC_INFERENCE
from driftline.store.db import session_scope
from driftline.store.models import WindowStateRecord
from tests.support.waiting import wait_until

from .conftest import DRIFTLINE, up_env

MODEL = "credit-default"
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def children(pid: int) -> dict[str, int]:
    """Component name -> pid of `driftline up`'s child processes."""
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        child_pid, _, args = line.strip().partition(" ")
        for name in ("collector", "scheduler", "worker", "replay", "dashboard", "tansu"):
            if f"driftline.cli {name}" in args or (name == "tansu" and "tansu broker" in args):
                found[name] = int(child_pid)
    return found


def stored_events(db_url: str) -> int:
    with session_scope(db_url) as s:
        return int(s.scalar(select(func.coalesce(func.sum(WindowStateRecord.events), 0))
                            .where(WindowStateRecord.model == MODEL)))


def topic_total(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        parts = [TopicPartition(TOPIC_INFERENCE, p) for p in consumer.partitions_for_topic(TOPIC_INFERENCE)]
        consumer.assign(parts)
        consumer.poll(timeout_ms=1000)  # highwater() is filled by fetch responses
        total = 0
        for tp in parts:
            consumer.seek_to_beginning(tp)

        def highwaters_known() -> bool:
            if any(consumer.highwater(tp) is None for tp in parts):
                consumer.poll(timeout_ms=500)
            return all(consumer.highwater(tp) is not None for tp in parts)

        wait_until(highwaters_known, timeout=30, interval=0, message="the highwater mark of every partition")
        for tp in parts:
            total += consumer.highwater(tp) or 0
        return total
    finally:
        consumer.close()


def test_killing_collector_scheduler_and_worker_loses_and_double_counts_nothing(home, embedded_broker_factory, up):
    broker = embedded_broker_factory()
    db_url = f"sqlite:///{home / 'driftline.db'}"
    env = up_env(home, extra_env={"DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers})
    running = up(home, "none", broker=False, extra_env={"DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers})
    pid = running.proc.pid
    running.wait_for(lambda: stored_events(db_url) > 200, "events to reach the store")
    for name in ("collector", "scheduler", "worker"):
        before = stored_events(db_url)
        killed = children(pid)[name]
        os.kill(killed, signal.SIGKILL)
        running.wait_for(lambda: children(pid).get(name) not in (None, killed), f"{name} to be restarted")
        running.wait_for(lambda: stored_events(db_url) > before + 100, f"progress after killing {name}")
    seen = stored_events(db_url)  # over 500 by the waits above, however fast the machine
    run = running.stop()
    output = run.output
    assert run.returncode == 0, output[-3000:]
    for name in ("collector", "scheduler", "worker"):
        assert f"{name}" in output and "restarting in" in output
    # Drain what the collector had not consumed when `up` stopped: it resumes from the offsets in the store.
    drain = subprocess.run([DRIFTLINE, "collector", "--idle-exit", "5", "--metrics-port", "0"],
                           env=env | {"DRIFTLINE_DB": db_url}, capture_output=True, text=True, timeout=120)
    assert drain.returncode == 0, drain.stderr[-2000:]
    produced = topic_total(broker.bootstrap_servers)
    assert produced >= seen > 500  # traffic flowed across the three kills (a count the waits guarantee)
    assert stored_events(db_url) == produced


def test_embedded_broker_crash_is_restarted_and_traffic_flows_again(home, up):
    db_url = f"sqlite:///{home / 'driftline.db'}"
    running = up(home, "none")
    pid = running.proc.pid
    running.wait_for(lambda: stored_events(db_url) > 200, "events to reach the store")
    crashed = children(pid)["tansu"]
    os.kill(crashed, signal.SIGKILL)
    running.wait_for(lambda: children(pid).get("tansu") not in (None, crashed), "`up` to restart the broker")
    before = stored_events(db_url)
    running.wait_for(lambda: stored_events(db_url) > before + 200, "traffic after the broker restart")
    run = running.stop()
    output = run.output
    assert run.returncode == 0, output[-3000:]
    assert "broker exited" in output and "restarted" in output
