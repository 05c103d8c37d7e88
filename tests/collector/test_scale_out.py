"""Two collectors in one group share the 4-partition topic on PostgreSQL; their partial window
states merge to the right totals, also when one of them is killed and the other takes over."""
from __future__ import annotations

import random
import re
from collections import Counter
from tests.support.collector_helpers import T0_MS, event, events, merged, produce, rows
from tests.support.waiting import wait_until
from driftline.events import encode_event

WINDOW_MS = 60_000


def _inference_partitions(log: str) -> set[int]:
    owned: set[int] = set()
    for line in re.findall(r"assigned (.*)", log):
        owned |= {int(p) for p in re.findall(r"driftline\.inference\[(\d+)\]", line)}
    return owned


def test_two_collectors_share_the_partitions_and_their_windows_merge_exactly(broker, postgres_url, spawn_collector,
                                                                             unique_id, kafka_client):
    model = f"scale-{unique_id}"
    group = f"scale-{unique_id}"
    docs = [event(model, i, ts_ms=T0_MS + i * 10) for i in range(8_000)]  # 80 s: two windows
    rng = random.Random(3)
    keys = [str(rng.random()).encode() for _ in docs]
    produce(broker, [encode_event(d) for d in docs[:4_000]], keys=keys[:4_000])

    flags = ("--flush-interval", "0.1", "--poll-max-records", "250", "--log-level", "info", "--kafka-client",
             kafka_client)
    first = spawn_collector(broker, postgres_url, group, *flags, name="a")
    second = spawn_collector(broker, postgres_url, group, *flags, name="b")
    wait_until(lambda: events(postgres_url, model) == 4_000, timeout=60, message="the first 4 000 events")
    wait_until(lambda: _inference_partitions(first.output()) and _inference_partitions(second.output())
               and len(_inference_partitions(first.output()) | _inference_partitions(second.output())) == 4,
               timeout=20, message="both collectors to own inference partitions")

    produce(broker, [encode_event(d) for d in docs[4_000:]], keys=keys[4_000:])
    wait_until(lambda: events(postgres_url, model) > 4_000, timeout=30, message="the second batch to start")
    second.kill()  # mid-stream: the first collector takes its partitions over after the session timeout
    wait_until(lambda: events(postgres_url, model) == 8_000, timeout=60, message="all 8 000 events")
    assert first.terminate() == 0, first.output()
    assert "collector stopped" in first.output()
    assert events(postgres_url, model) == 8_000

    stored_rows = rows(postgres_url, model)
    assert {r.partition for r in stored_rows} == {0, 1, 2, 3}  # partial states per (window, partition)
    states = merged(postgres_url, model)
    windows = Counter(d["ts"] - d["ts"] % WINDOW_MS for d in docs)
    assert {start: s.events for start, s in states.items()} == dict(windows)
    for start, state in states.items():
        in_window = [d for d in docs if d["ts"] - d["ts"] % WINDOW_MS == start]
        assert state.features["x"].total == sum(d["features"]["x"] for d in in_window)
        assert state.latency["total"].count == len(in_window)
        assert state.min_event_ms == min(d["ts"] for d in in_window)
        assert state.max_event_ms == max(d["ts"] for d in in_window)
