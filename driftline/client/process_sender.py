"""`ProcessEventSender`: the parent side of an `EventSender` whose producer runs in a child process."""
from __future__ import annotations

import logging
import pickle
import subprocess
import time
from multiprocessing.connection import Connection
from typing import Any, Mapping

import orjson

from driftline.client.producer_process import CLOSE_CHILD
from driftline.client.sender import EventSender
from driftline.client.tuning import DEFAULT_MAX_BUFFERED, DRAIN_INTERVAL_S, RECONNECT_BACKOFF_S, THREAD_STOP_S
from driftline.events import encode_event
from driftline.supervisor import start_python_child

log = logging.getLogger(__name__)


class ProcessEventSender(EventSender):
    """An `EventSender` whose Kafka producer runs in a child process, off the serving process's GIL.

    The background thread only encodes what is waiting and ships it, one pipe write per
    drain interval, to a child Python process that hands it to a `LibrdkafkaSender`
    (confluent-kafka: the per-record work in C, not kafka-python's Python) and reports
    its cumulative sent and failed counts back. The counts and the bound stay those of
    `EventSender`: an event counts as buffered until the child reports it acknowledged or
    failed, so the child never holds more than `max_buffered`. Kafka down at start or
    mid-run: the child buffers, as `EventSender` does. The child dies with us: it lives in
    its own session (a terminal's Ctrl-C reaches only us, and we stop it after flushing),
    and when this process dies its end of the pipe reads end-of-file, so it flushes what
    it holds (bounded) and exits. A child that dies is restarted; what it held counts as
    failed.
    """

    # The child's own close (up to THREAD_STOP_S) and its exit.
    _thread_stop_s = THREAD_STOP_S + 3.0

    def __init__(self, bootstrap_servers: str, max_buffered: int = DEFAULT_MAX_BUFFERED,
                 client_id: str = "driftline-logger", producer_config: Mapping[str, Any] | None = None):
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._shipped = 0            # events written to the current child
        self._child_settled = 0      # of those, reported sent or failed
        self._child_counts = (0, 0)  # (sent, failed) the current child reported last
        self._child_connected = False
        self._child_failures = 0     # children lost in a row (reset by a child's report)
        super().__init__(bootstrap_servers, max_buffered, client_id, producer_config)

    def _connected(self) -> bool:
        return self._child_connected

    @property
    def child_pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def _start_child(self) -> None:
        self._process, self._conn = start_python_child(
            "import sys; from driftline.client.producer_process import run_producer_process; run_producer_process(int(sys.argv[1]))",
            start_new_session=True)
        self._conn.send({"bootstrap_servers": self.bootstrap_servers, "max_buffered": self.max_buffered,
                         "client_id": self.client_id, "producer_config": self.producer_config,
                         "log_level": log.getEffectiveLevel(),
                         "kafka_log_level": logging.getLogger("kafka").getEffectiveLevel()})

    def _run(self) -> None:
        while True:
            if self._conn is None and not self._closing.is_set():
                if self._child_failures:  # a child that keeps dying is restarted with backoff
                    self._closing.wait(RECONNECT_BACKOFF_S[min(self._child_failures, len(RECONNECT_BACKOFF_S)) - 1])
                    if self._closing.is_set():
                        break
                try:
                    self._start_child()
                except Exception as exc:  # cannot start Python: keep buffering, retry
                    if not self._child_failures:
                        log.warning("cannot start the event producer process (%s); buffering events and retrying",
                                    exc)
                    self._child_lost()
                    continue
            if self._conn is not None:
                self._read_reports()
            if self._conn is not None and self._waiting:
                batch = []
                while self._waiting:
                    topic, key, event = self._waiting.popleft()
                    try:
                        batch.append((topic, key, event if isinstance(event, bytes) else encode_event(event)))
                    except orjson.JSONEncodeError as exc:
                        self._fail_unsendable(topic, exc)
                try:
                    self._conn.send_bytes(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
                    self._shipped += len(batch)
                except OSError as exc:  # the child is gone: this batch waits for the next one
                    log.warning("the event producer process is gone (%s); restarting it", exc)
                    self._waiting.extendleft(reversed(batch))
                    self._child_lost()
            if self._closing.is_set():
                break
            self._closing.wait(DRAIN_INTERVAL_S)
        self._stop_child()

    def _read_reports(self) -> None:
        try:
            while self._conn.poll(0):
                self._apply_report(self._conn.recv())
        except (EOFError, OSError):
            log.warning("the event producer process exited; restarting it")
            self._child_lost()

    def _apply_report(self, report: tuple[int, int, bool]) -> None:
        sent, failed, connected = report
        self._child_failures = 0
        new_sent, new_failed = sent - self._child_counts[0], failed - self._child_counts[1]
        self._child_counts = (sent, failed)
        self._child_settled += new_sent + new_failed
        self._settle(new_sent, new_failed)
        self._child_connected = connected

    def _child_lost(self) -> None:
        """Forget the current child: what it held and had not reported counts as failed."""
        self._child_failures += 1
        lost = self._shipped - self._child_settled
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._end_process(grace_s=0.0)
        self._shipped, self._child_settled, self._child_counts = 0, 0, (0, 0)
        self._settle(failed=lost)
        self._child_connected = False

    def _end_process(self, grace_s: float) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _stop_child(self) -> None:
        """Ask the child to close (the parent has flushed already) and wait for its last report."""
        if self._conn is not None:
            try:
                self._conn.send_bytes(CLOSE_CHILD)
                deadline = time.monotonic() + THREAD_STOP_S
                while self._conn.poll(max(0.0, deadline - time.monotonic())):
                    self._apply_report(self._conn.recv())
            except (EOFError, OSError):
                pass  # the child closed its end after its final report
            self._conn.close()
            self._conn = None
            self._end_process(grace_s=2.0)
        leftover = self._shipped - self._child_settled + len(self._waiting)
        self._waiting.clear()
        self._shipped = self._child_settled = 0
        self._settle(failed=leftover)
        self._child_connected = False
