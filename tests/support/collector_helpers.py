"""Helpers for the collector tests (`from tests.support.collector_helpers import event, produce`).

Events: `event(model, i, ts_ms=...)` builds a valid inference event (dict) whose numeric feature `x` is `i`
(encode it with `driftline.events.encode_event`); `produce(bootstrap, values, keys=None)` sends bytes with
kafka-python and returns each message's (partition, offset); `kcat(bootstrap, lines)` sends lines with kcat;
`record_batch(values, mutate)` and `produce_raw(bootstrap, batch)` send a batch as built.
Collectors: `collector_thread(config(...))` runs one in this process (a context manager that stops it and
re-raises its errors); `Spawned` is a `.venv/bin/driftline collector` process (tests/collector/conftest.py's
`spawn_collector` fixture starts them and cleans them up). Reading the store: `events(url, model)`,
`merged(url, model)`; waiting for them: `tests.support.waiting.wait_until`.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy import func, select

from driftline.config import TOPIC_INFERENCE
from driftline.events import INFERENCE_SCHEMA, LABEL_SCHEMA
from driftline.store import db as store_db
from driftline.store.models import WindowStateRecord
from driftline.window_state import WindowState
from tests.support.kafka_proxy import KafkaProxy

ROOT = Path(__file__).resolve().parents[2]
DRIFTLINE = ROOT / ".venv" / "bin" / "driftline"
# Event-time origin, fixed for the session on an hour boundary so tests know each event's
# window; two days in the past, because the collector dead-letters events stamped more than
# COLLECTOR_MAX_FUTURE_SECONDS ahead of its clock.
T0_MS = (int(time.time() * 1000) - 48 * 3_600_000) // 3_600_000 * 3_600_000


def event(model: str, i: int, ts_ms: int | None = None, version: str = "1", request_id: str | None = None,
          **extra: Any) -> dict[str, Any]:
    doc = {"schema": INFERENCE_SCHEMA, "event_id": uuid.uuid4().hex, "ts": T0_MS + i if ts_ms is None else ts_ms,
           "model": model, "version": version, "features": {"x": float(i), "color": "red" if i % 2 else "blue"},
           "prediction": (i % 100) / 100.0, "latency_ms": {"total": 1.0 + i % 7}, "status": "ok"}
    if request_id is not None:
        doc["request_id"] = request_id
    doc.update(extra)
    return doc


def label(model: str, request_id: str, value: Any, ts_ms: int = T0_MS) -> dict[str, Any]:
    return {"schema": LABEL_SCHEMA, "request_id": request_id, "ts": ts_ms, "model": model, "label": value}


def produce(bootstrap: str, values: list[bytes | None], keys: list[bytes | None] | None = None,
            topic: str = TOPIC_INFERENCE) -> list[tuple[int, int]]:
    """Send with kafka-python; returns (partition, offset) per message, in order."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks=1, linger_ms=5,
                             max_request_size=4 << 20)
    try:
        # A null value (a tombstone) needs a key.
        futures = [producer.send(topic, value=v, key=keys[i] if keys else (b"tombstone" if v is None else None))
                   for i, v in enumerate(values)]
        producer.flush(timeout=30)
        metadata = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=5)
    return [(m.partition, m.offset) for m in metadata]


def kcat(bootstrap: str, lines: list[bytes], topic: str = TOPIC_INFERENCE) -> None:
    """Send one message per line with kcat (librdkafka), the independent client."""
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic], input=b"\n".join(lines) + b"\n",
                   check=True, timeout=60, capture_output=True)


def record_batch(values: list[bytes], mutate: Callable[[bytearray], None] | None = None) -> bytes:
    """A v2 record batch of `values`; `mutate` edits it and the CRC is recomputed (a lie with a valid CRC)."""
    from kafka.record.memory_records import MemoryRecordsBuilder
    from kafka.record.util import calc_crc32c

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    for value in values:
        builder.append(timestamp=T0_MS, key=None, value=value, headers=[])
    builder.close()
    raw = bytearray(builder.buffer())
    if mutate is not None:
        mutate(raw)
        struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))  # CRC-32C from the attributes on
    return bytes(raw)


def produce_raw(bootstrap: str, batch: bytes, topic: str = TOPIC_INFERENCE, partition: int = 0) -> int:
    """Produce one record batch as given (ProduceRequest v3, acks=1, a raw socket); returns its base offset.

    kafka-python's producer only sends batches it built itself; a broker stores what it is handed.
    """
    def string(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    body = (struct.pack(">hhi", -1, 1, 10_000) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">iii", 1, partition, len(batch)) + batch)
    request = struct.pack(">hhi", 0, 3, 1) + string("driftline-tests") + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        response = _read_exactly(sock, size)
    # correlation id, topics: count, name, partitions: count, (index, error code, base offset, ...)
    name_len = struct.unpack_from(">h", response, 8)[0]
    _index, error, base_offset = struct.unpack_from(">ihq", response, 10 + name_len + 4)
    assert error == 0, f"produce failed with error code {error}"
    return base_offset


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    for _ in range(n):  # at least one byte a round
        if len(out) == n:
            break
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return out


def events(url: str, model: str) -> int:
    """Valid events stored for `model` (the status report's count)."""
    with store_db.session_scope(url) as session:
        return int(session.scalar(select(func.coalesce(func.sum(WindowStateRecord.events), 0))
                                  .where(WindowStateRecord.model == model)))


def rows(url: str, model: str) -> list[WindowStateRecord]:
    with store_db.session_scope(url) as session:
        return list(session.scalars(select(WindowStateRecord).where(WindowStateRecord.model == model)
                                    .order_by(WindowStateRecord.window_start_ms, WindowStateRecord.partition)))


def merged(url: str, model: str) -> dict[int, WindowState]:
    """window start -> the merge of all its partial states (what the detectors see)."""
    out: dict[int, list[WindowState]] = {}
    for row in rows(url, model):
        out.setdefault(row.window_start_ms, []).append(WindowState.from_bytes(row.state))
    return {start: WindowState.merge_all(states) for start, states in out.items()}


@contextlib.contextmanager
def collector_thread(config: Any) -> Iterator[Any]:
    """Run a `Collector` in a thread; on exit stop it, join it, re-raise what it raised."""
    from driftline.collector.consumer import Collector

    runner = Collector(config)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            runner.run()
        except BaseException as exc:  # surfaced in the test below
            errors.append(exc)

    thread = threading.Thread(target=target, name="collector", daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(60)
        assert not thread.is_alive(), "collector did not stop within 60 s"
    if errors:
        raise errors[0]


def config(bootstrap: str, url: str, **overrides: Any) -> Any:
    from driftline.collector.config import CollectorConfig

    values = dict(bootstrap_servers=bootstrap, db_url=url, group_id=f"test-{uuid.uuid4().hex[:10]}",
                  session_timeout_ms=2000, heartbeat_interval_ms=500, flush_interval_s=0.2, metrics_port=0)
    values.update(overrides)
    return CollectorConfig(**values)


class Spawned:
    """A `driftline collector` subprocess; its stderr goes to a file for the assertions."""

    def __init__(self, args: list[str], log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([str(DRIFTLINE), "collector", *args], stdout=self._log,
                                        stderr=subprocess.STDOUT, env=env, cwd=str(ROOT), start_new_session=True)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout_s: float = 40.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout_s)

    def wait(self, timeout_s: float = 60.0) -> int:
        try:
            return self.process.wait(timeout_s)
        finally:
            self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


@contextlib.contextmanager
def kcat_broker_running() -> Iterator[str]:
    """A fresh embedded broker that kcat can talk to (through `KafkaProxy`); yields its bootstrap address."""
    from driftline.broker import create_topics, free_port, tansu_binary, wait_for_port

    broker_port, proxy_port = free_port(), free_port()
    process = subprocess.Popen(
        [str(tansu_binary()), "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}", "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    proxy = None
    try:
        assert wait_for_port("127.0.0.1", broker_port, 15, process), "the embedded broker did not start"
        proxy = KafkaProxy(proxy_port, broker_port)
        create_topics(f"127.0.0.1:{proxy_port}", 4)
        yield f"127.0.0.1:{proxy_port}"
    finally:
        if proxy is not None:
            proxy.close()
        process.kill()  # memory storage: nothing to shut down gracefully
        process.wait(10)
