"""Helpers for the worker tests: settings on a fresh store, a registry with versions, a real uvicorn server in a
thread (`serving`), a Kafka topic reader and one /metrics sample; waiting is `tests.support.waiting`.

Import them: `from tests.support.worker_helpers import serving`.
"""
from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

from driftline.config import Settings, load_settings
from driftline.store import db as store_db
from driftline.worker.dataset import generate
from driftline.worker.publish import publish
from driftline.worker.registry import Registry
from driftline.worker.training import TrainConfig, TrainResult, train_model
from tests.support.waiting import wait_until

MODEL = "credit-default"


def make_settings(tmp_path: Path, bootstrap_servers: str, db_url: str | None = None) -> Settings:
    url = db_url or f"sqlite:///{tmp_path / 'driftline.db'}"
    if db_url is None:
        store_db.upgrade(url)
    return load_settings(home=str(tmp_path / "home"), db=url, bootstrap_servers=bootstrap_servers)


def registry_with_versions(settings: Settings, results: list[TrainResult]) -> Registry:
    """Versions 1..n registered; version 1 is production."""
    registry = Registry(settings.db_url, settings.artifacts_dir)
    for result in results:
        publish(registry, MODEL, result)
    return registry


@contextlib.contextmanager
def serving(worker: Any) -> Iterator[str]:
    """Run `worker` (a driftline.worker.server.Worker) under uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    import uvicorn

    from driftline.worker.server import create_app

    # The socket is bound here and handed to uvicorn: a port found free and bound later could be taken by another
    # test process in between ("address already in use").
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(worker), host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="on", **worker.config.limits.uvicorn_options()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-uvicorn", daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the worker's server thread ended before it started serving")
        return server.started

    wait_until(started, interval=0.02, message=f"the worker to serve on 127.0.0.1:{port}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def topic_records(bootstrap_servers: str, topic: str, done: Callable[[], bool],
                  timeout_s: float = 30.0) -> Iterator[tuple[int, Any]]:
    """(partition, record) of `topic` from its start (no consumer group), until `done()` or the timeout."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        # Until `done()`; the deadline only ends a read whose records never come (the caller's assertion then fails).
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done():
            for tp, records in consumer.poll(timeout_ms=200, max_records=5_000).items():
                for record in records:
                    yield tp.partition, record
    finally:
        consumer.close()


def read_topic(bootstrap_servers: str, topic: str, want: set[str], key: str = "request_id",
               timeout_s: float = 30.0) -> dict[str, bytes]:
    """Raw messages of `topic` whose JSON `key` is in `want`, read from the start (no consumer group)."""
    import orjson

    found: dict[str, bytes] = {}
    for _, record in topic_records(bootstrap_servers, topic, lambda: want <= set(found), timeout_s):
        # The topic is shared with other tests, some of which put malformed messages on it.
        try:
            doc = orjson.loads(record.value) if record.value is not None else None
        except orjson.JSONDecodeError:
            continue
        value = doc.get(key) if isinstance(doc, dict) else None
        if value in want:
            found.setdefault(value, record.value)
    return found


def metric(url: str, name: str) -> float:
    """One sample of the worker's /metrics."""
    text = httpx.get(f"{url}/metrics").text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def tiny_models() -> list[TrainResult]:
    """Two differently seeded tiny models (for promote/rollback)."""
    results = []
    for seed in (3, 4):
        inputs, labels = generate(1_500, seed)
        results.append(train_model(inputs, labels, TrainConfig(size="test", epochs=2, seed=seed)))
    return results
