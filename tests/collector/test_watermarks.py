"""Partition watermarks as the collectors store them (driftline.watermarks): every partition registered before
any is stored, the event time stored with the events that carry it, idleness, and the invariant the scheduler
relies on — no window is closed before all its events are stored — through two collectors, a rebalance and one
of them killed mid-stream."""
from __future__ import annotations

import random
import threading
import time
from collections import Counter

from sqlalchemy import func, select

from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import PartitionWatermark, WindowStateRecord
from driftline.store.watermarks import partition_marks, stream_watermark
from tests.support.collector_helpers import collector_thread, config, event, produce
from tests.support.waiting import wait_until

WINDOW_MS = 1_000
IDLE_S = 2


def _stored(url: str, model: str) -> dict[int, int]:
    with store_db.session_scope(url) as s:
        return {int(start): int(n) for start, n in s.execute(
            select(WindowStateRecord.window_start_ms, func.sum(WindowStateRecord.events))
            .where(WindowStateRecord.model == model).group_by(WindowStateRecord.window_start_ms))}


def test_a_collector_stores_each_partitions_event_time_with_its_events_and_marks_idle_partitions(
        embedded_broker_factory, sqlite_url, kafka_client):
    broker = embedded_broker_factory().bootstrap_servers
    base = (int(time.time() * 1000) // 60_000 - 30) * 60_000
    docs = [event("wm", i, ts_ms=base + i * 10) for i in range(400)]
    placed = produce(broker, [encode_event(d) for d in docs], keys=[str(i).encode() for i in range(400)])
    newest = {}
    for (partition, _), doc in zip(placed, docs):
        newest[partition] = max(newest.get(partition, 0), doc["ts"])
    cfg = config(broker, sqlite_url, window_seconds=60, idle_partition_seconds=IDLE_S, kafka_client=kafka_client)
    with collector_thread(cfg):
        wait_until(lambda: sum(_stored(sqlite_url, "wm").values()) == 400, message="400 events stored")
        with store_db.session_scope(sqlite_url) as s:
            marks = {m.partition: m for m in partition_marks(s)}
        assert set(marks) == {0, 1, 2, 3}  # every partition of the topic is known to the watermark
        assert {p: m.event_time_ms for p, m in marks.items() if m.event_time_ms is not None} == newest

        def all_idle() -> bool:
            now = int(time.time() * 1000)
            with store_db.session_scope(sqlite_url) as s:
                return all(m.idle(now, IDLE_S * 1000) for m in partition_marks(s))
        # caught up and nothing new: the partitions turn idle, so the wall clock closes the last windows
        wait_until(all_idle, timeout=IDLE_S + 10, message="every partition idle")
        with store_db.session_scope(sqlite_url) as s:
            assert stream_watermark(s, int(time.time() * 1000), IDLE_S * 1000) >= max(newest.values())
    with store_db.session_scope(sqlite_url) as s:  # stopped: nobody confirms the partitions any more
        later = int(time.time() * 1000) + IDLE_S * 1000
        assert stream_watermark(s, later, IDLE_S * 1000) == min(newest.values())  # held where the stream stood


def test_no_window_is_closed_before_its_events_are_stored_through_a_rebalance_and_killed_collectors(
        embedded_broker_factory, postgres_url, spawn_collector, monkeypatch):
    """A backlog read by two collectors, one killed mid-stream (the other takes its partitions over); then,
    all caught up and idle, the last one killed and more events produced: its partitions, quiet now, hold the
    watermark (not idle) until a new collector stores them. At no moment is a window closed short of events."""
    monkeypatch.setenv("DRIFTLINE_IDLE_PARTITION_SECONDS", str(IDLE_S))
    broker = embedded_broker_factory().bootstrap_servers
    model = "wm-kill"
    base = (int(time.time() * 1000) // 60_000 - 30) * 60_000
    windows, per_window = 20, 1_500
    rng = random.Random(5)

    def stream(first_ms: int) -> list[dict]:
        return [event(model, i, ts_ms=first_ms + i * WINDOW_MS // per_window) for i in range(windows * per_window)]

    def send(docs: list[dict]) -> None:
        produce(broker, [encode_event(d) for d in docs], keys=[str(rng.random()).encode() for _ in docs])

    first, later = stream(base), stream(base + 5 * 60_000)  # the second part of the stream 5 minutes on
    expected = Counter(d["ts"] - d["ts"] % WINDOW_MS for d in first)  # what has been produced so far
    violations: list[str] = []
    closed_seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # what the scheduler would see at any moment
        while not stop.is_set():
            now = int(time.time() * 1000)
            with store_db.session_scope(postgres_url) as s:
                registered = bool(partition_marks(s))  # before any collector registers, the wall clock rules
                watermark = stream_watermark(s, now, IDLE_S * 1000)
            stored = _stored(postgres_url, model)  # read after the watermark: it can only have grown since
            if registered and watermark is not None:
                closed = [start for start in list(expected) if start + WINDOW_MS <= watermark]
                closed_seen.append(len(closed))
                violations.extend(f"window {start}: {stored.get(start, 0)} of {expected[start]} stored"
                                  for start in closed if stored.get(start, 0) != expected[start])
            stop.wait(0.05)

    def stored_all(docs: list[dict]) -> bool:
        return sum(_stored(postgres_url, model).values()) == len(docs)

    send(first)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    flags = ("--flush-interval", "0.1", "--poll-max-records", "300", "--window-seconds", "1")
    survivor = spawn_collector(broker, postgres_url, "wm-group", *flags, name="a")
    second = spawn_collector(broker, postgres_url, "wm-group", *flags, name="b")
    wait_until(lambda: sum(_stored(postgres_url, model).values()) > len(first) // 3, timeout=90,
               message="a third of the backlog stored")
    second.kill()  # mid-stream: its partitions hold the watermark until the survivor reads them
    wait_until(lambda: stored_all(first), timeout=120, message="the first part stored")
    wait_until(lambda: closed_seen and closed_seen[-1] == windows, timeout=IDLE_S + 30,
               message="the first part's windows closed once the partitions are idle")
    assert any(0 < n < windows for n in closed_seen)  # windows closed one by one as the backlog was read

    survivor.kill()  # nobody reads the partitions now; the rows still say "idle"
    time.sleep(IDLE_S + 0.5)  # ... from a reader not heard from since: they are stalled, not idle
    send(later)
    expected.update(d["ts"] - d["ts"] % WINDOW_MS for d in later)
    time.sleep(3)
    assert closed_seen[-1] <= windows  # the later part's windows wait: their events are not stored
    spawn_collector(broker, postgres_url, "wm-group", *flags, name="c")
    wait_until(lambda: stored_all(first + later), timeout=120, message="the later part stored")
    wait_until(lambda: closed_seen[-1] == 2 * windows, timeout=IDLE_S + 30, message="every window closed")
    stop.set()
    watcher.join(10)
    assert violations == [], violations[:5]
    with store_db.session_scope(postgres_url) as s:
        assert s.scalar(select(func.count()).select_from(PartitionWatermark)) == 4
