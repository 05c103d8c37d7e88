"""Decoder processes (`--decoders`): the same store as folding in one process; failures stop the collector.

The other collector tests run with the default (`auto`: two decoders on two to seven cores); these compare
the in-process path with two decoders, and cover a decoder that dies and a collector killed with
its decoders running.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections import Counter
from typing import Callable

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from driftline.broker import free_port
from driftline.config import TOPIC_INFERENCE
from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import DeadLetter
from tests.support.collector_helpers import DRIFTLINE, T0_MS, collector_thread, config, event, events, merged, produce
from tests.support.waiting import wait_until

WINDOW_MS = 60_000


def _stream(model: str, unique_id: str) -> tuple[list[bytes], list[bytes], list[dict], int]:
    """Valid events over three windows, each fifth one sent twice (a producer retry, so to the same
    partition), and malformed messages; returns values, keys, the valid events and the malformed count."""
    docs = [event(model, i, ts_ms=T0_MS + i * 60, request_id=f"{unique_id}-{i}") for i in range(3_000)]
    values, keys = [], []
    for i, doc in enumerate(docs):
        key = doc["request_id"].encode()
        values.append(encode_event(doc))
        keys.append(key)
        if i % 5 == 0:
            values.append(encode_event(doc))  # same event_id: dropped as a duplicate
            keys.append(key)
        if i % 250 == 0:
            values.append(orjson.dumps({**doc, "event_id": uuid.uuid4().hex, "features": [1, 2]}))
            values.append(b'{"model": "' + model.encode() + b'", broken')
            keys += [key, key]
    bad = sum(2 for i in range(len(docs)) if i % 250 == 0)
    return values, keys, docs, bad


def _dead_letters(url: str, model: str) -> Counter:
    """Reasons of the dead letters whose raw bytes name `model` (the shared topic holds other tests' too)."""
    with store_db.session_scope(url) as session:
        rows = session.execute(select(DeadLetter.reason, DeadLetter.raw)).all()
    return Counter(reason for reason, raw in rows if model.encode() in bytes(raw))


def _caught_up(sample: Callable[[str, dict[str, str]], float | None], partitions: int = 4) -> bool:
    """The collector has read the whole inference topic: its lag gauge is 0 on every partition.

    `sample(name, labels)` reads one of its metrics (from its registry, or from its /metrics page).
    """
    lags = [sample("driftline_collector_lag_messages", {"topic": TOPIC_INFERENCE, "partition": str(p)})
            for p in range(partitions)]
    return all(lag == 0 for lag in lags)


def _scraped(port: int) -> Callable[[str, dict[str, str]], float | None]:
    """`sample(name, labels)` over one scrape of the /metrics page on `port` (None: not there, or no answer yet)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        text = ""
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for family in text_string_to_metric_families(text) for s in family.samples}
    return lambda name, labels: values.get((name, tuple(sorted(labels.items()))))


def _store(url: str, model: str) -> dict:
    states = merged(url, model)
    return {start: (s.events, s.features["x"].total, dict(s.features["color"].categories), s.latency["total"].count)
            for start, s in states.items()}


def test_in_process_and_two_decoders_store_the_same(broker, tmp_path, _sqlite_template, unique_id):
    model = f"dec-{unique_id}"
    values, keys, docs, bad = _stream(model, unique_id)
    produce(broker, values, keys=keys)

    stored = {}
    for decoders in (0, 2):
        url = f"sqlite:///{tmp_path}/decoders-{decoders}.db"
        shutil.copyfile(_sqlite_template, url.removeprefix("sqlite:///"))
        with collector_thread(config(broker, url, decoders=decoders)) as runner:
            wait_until(lambda: events(url, model) >= len(docs) and sum(_dead_letters(url, model).values())
                       >= bad, timeout=90, message=f"all events stored with decoders={decoders}")
            # the whole topic read (the duplicates after the last new event too) and nothing held back
            wait_until(lambda: _caught_up(runner.metrics.registry.get_sample_value) and not runner._pending(),
                       timeout=90, message=f"the whole topic read and flushed with decoders={decoders}")
            assert runner.metrics.duplicates._value.get() >= 600
        stored[decoders] = (_store(url, model), _dead_letters(url, model))

    expected = Counter(d["ts"] - d["ts"] % WINDOW_MS for d in docs)
    windows, letters = stored[0]
    assert {start: v[0] for start, v in windows.items()} == dict(expected)
    assert sum(letters.values()) == bad
    assert stored[2] == stored[0]


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_decoder_stops_the_collector_and_a_restart_stores_everything_once(broker, sqlite_url, spawn_collector,
                                                                                   unique_id):
    model = f"deckill-{unique_id}"
    group = f"deckill-{unique_id}"
    docs = [event(model, i, ts_ms=T0_MS + i * 20) for i in range(6_000)]
    produce(broker, [encode_event(d) for d in docs[:3_000]])

    first = spawn_collector(broker, sqlite_url, group, "--decoders", "2", "--flush-interval", "0.05",
                            "--poll-max-records", "200", name="first")
    wait_until(lambda: events(sqlite_url, model) >= 500, timeout=60, message="the first collector to store")
    decoders = wait_until(lambda: _children(first.process.pid), message="the decoder processes")
    assert len(decoders) == 2
    os.kill(decoders[0], signal.SIGKILL)
    code = first.wait(60)
    assert code != 0
    assert "decoder" in first.output() and "gone" in first.output()
    assert events(sqlite_url, model) <= 3_000
    assert not _alive(decoders[1]), "the other decoder must not outlive its collector"

    produce(broker, [encode_event(d) for d in docs[3_000:]])
    last = spawn_collector(broker, sqlite_url, group, "--decoders", "2", "--idle-exit", "3", name="last")
    assert last.wait(120) == 0, last.output()
    assert events(sqlite_url, model) == len(docs)


def test_a_decoder_killed_while_the_collector_is_idle_stops_it(broker, sqlite_url, spawn_collector, unique_id):
    """Nothing more is sent to the dead decoder (its partitions are read to the end): the collector still exits."""
    model = f"decidle-{unique_id}"
    docs = [event(model, i, ts_ms=T0_MS + i) for i in range(200)]
    produce(broker, [encode_event(d) for d in docs])
    idle = spawn_collector(broker, sqlite_url, f"decidle-{unique_id}", "--decoders", "2", "--flush-interval", "0.05",
                           name="idle")
    wait_until(lambda: events(sqlite_url, model) == len(docs), timeout=60, message="every event stored")
    decoders = wait_until(lambda: len(_children(idle.process.pid)) == 2 and _children(idle.process.pid),
                          message="two decoder processes")
    os.kill(decoders[1], signal.SIGKILL)
    assert idle.wait(30) != 0
    assert "decoder" in idle.output() and "gone" in idle.output() and "exit -9" in idle.output()


def test_sigkill_of_the_collector_leaves_no_decoder_behind(broker, sqlite_url, spawn_collector, unique_id):
    collector = spawn_collector(broker, sqlite_url, f"orphans-{unique_id}", "--decoders", "2", name="killed")
    decoders = wait_until(lambda: len(_children(collector.process.pid)) == 2 and _children(collector.process.pid),
                          message="two decoder processes")
    collector.kill()
    wait_until(lambda: not any(_alive(pid) for pid in decoders), timeout=30,
               message="the decoders to exit with their collector")


@pytest.mark.parametrize("value", ["-1", "many", "65"])
def test_a_bad_decoders_value_is_one_line(value):
    result = subprocess.run([str(DRIFTLINE), "collector", "--decoders", value], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "--decoders" in result.stderr and "auto" in result.stderr
    assert "Traceback" not in result.stderr


def test_auto_runs_two_decoders_on_two_to_seven_cores_and_four_from_eight():
    from driftline.collector.decoders import decoder_count

    assert [decoder_count("auto", cpus) for cpus in (1, 2, 3, 7, 8, 16)] == [0, 2, 2, 2, 4, 4]
    assert decoder_count(3, 2) == 3


def test_sigterm_to_the_process_group_still_flushes_what_the_decoders_hold(broker, sqlite_url, spawn_collector,
                                                                           unique_id):
    """`driftline up` and a terminal signal the whole group: the decoders outlive the collector's final flush."""
    model = f"decterm-{unique_id}"
    group = f"decterm-{unique_id}"
    docs = [event(model, i, ts_ms=T0_MS + i) for i in range(2_000)]
    produce(broker, [encode_event(d) for d in docs])
    # Flushes far apart: what is folded when the signal comes is still in the decoders.
    port = free_port()
    collector = spawn_collector(broker, sqlite_url, group, "--decoders", "2", "--flush-interval", "600",
                                "--flush-max-events", "1000000", "--metrics-port", str(port), name="term")
    wait_until(lambda: "assigned" in collector.output(), timeout=60, message="the collector to join")

    def holding_the_backlog() -> bool:
        sample = _scraped(port)
        return _caught_up(sample) and (sample("driftline_collector_pending_messages", {}) or 0) >= len(docs)

    wait_until(holding_the_backlog, timeout=60, message="the collector to read the backlog (nothing is flushed "
               "for ten minutes)")
    assert events(sqlite_url, model) == 0
    os.killpg(collector.process.pid, signal.SIGTERM)
    assert collector.wait(60) == 0, collector.output()
    assert events(sqlite_url, model) > 0, "the final flush must store what the decoders folded"

    rest = spawn_collector(broker, sqlite_url, group, "--idle-exit", "3", name="rest")
    assert rest.wait(90) == 0, rest.output()
    assert events(sqlite_url, model) == len(docs)


@pytest.mark.slow  # about a minute or more on two cores: out of `make test-fast`
def test_a_flush_in_flight_never_deadlocks_with_a_backlog(broker, sqlite_url, unique_id):
    """A take is answered while the collector keeps sending: a large answer and a full queue must not block both.

    Many windows make each decoder's answer larger than a socket buffer, and a backlog with
    small polls keeps the queues to the decoders full while the take is unanswered: a decoder
    then blocks sending its answer, and the collector must read it rather than wait for room.
    """
    model = f"backlog-{unique_id}"
    count = 30_000
    # 1 500 one-minute windows, 20 events each, over four partitions.
    docs = [event(model, i, ts_ms=T0_MS + (i // 20) * WINDOW_MS + i % 20) for i in range(count)]
    produce(broker, [encode_event(d) for d in docs])
    cfg = config(broker, sqlite_url, decoders=2, flush_interval_s=0.05, poll_max_records=200)
    with collector_thread(cfg):
        wait_until(lambda: events(sqlite_url, model) == count, timeout=120,
                   message="every event stored through flushes in flight")
    windows = merged(sqlite_url, model)
    assert len(windows) == count // 20
    assert sum(s.events for s in windows.values()) == count
