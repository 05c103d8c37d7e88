"""The receiver's dead letters in the store's `dead_letters` table, beside the collector's.

The collector reads only `driftline.inference` and `driftline.labels`, never the DLQ topic, so what the
receiver refuses would reach the store by no other way: `driftline status`, the dashboard and the
scheduler's dead-letter metric count them from here. Rows have the collector's shape
(driftline.dead_letters): `topic` names the receiver endpoint (`receiver:/`, `receiver:/events`),
`partition` is empty, `offset` the JSON line's number, the bytes are cut to the same bound.

Written by a thread in batches, off the HTTP path: a request never waits on the store. At most
`max_rows` rows wait; beyond that (the store down for long under a flood of bad input) a row is not
stored, only counted and logged (one line per RECEIVER_LOG_EVERY_SECONDS, `LogThrottle`, with the
count of the others): its letter is on the DLQ topic all the same.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from sqlalchemy import insert
from sqlalchemy.exc import SQLAlchemyError

from driftline import defaults
from driftline.store import db
from driftline.store.models import DeadLetter

log = logging.getLogger(__name__)

_BATCH_ROWS = 500  # rows per insert: one transaction stays short


class LogThrottle:
    """One error line per `every_s` for a failure that repeats under a flood, saying how many were not logged."""

    def __init__(self, logger: logging.Logger, every_s: float = defaults.RECEIVER_LOG_EVERY_SECONDS):
        self.logger = logger
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._skipped = 0

    def error(self, message: str, *args: Any) -> None:
        self._log(logging.ERROR, message, *args)

    def warning(self, message: str, *args: Any) -> None:
        self._log(logging.WARNING, message, *args)

    def _log(self, level: int, message: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.every_s:
                self._skipped += 1
                return
            skipped, self._skipped, self._last = self._skipped, 0, now
        if skipped:
            self.logger.log(level, message + " (%d more like it not logged since the last one)", *args, skipped)
        else:
            self.logger.log(level, message, *args)


class DeadLetterStore:
    def __init__(self, db_url: str, max_rows: int = defaults.RECEIVER_DEAD_LETTER_STORE_ROWS,
                 interval_s: float = defaults.RECEIVER_DEAD_LETTER_STORE_INTERVAL_SECONDS):
        self.db_url = db_url
        self.max_rows = max_rows
        self.interval_s = interval_s
        self.stored = 0
        self.not_stored = 0  # refused for lack of room, or still unwritten at close
        self._rows: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # the thread and close() never write the same rows twice
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._refusals = LogThrottle(log)
        self._thread = threading.Thread(target=self._run, name="driftline-receiver-dead-letters", daemon=True)
        self._thread.start()

    def add(self, values: dict[str, Any]) -> None:
        """Queue one row (driftline.dead_letters.dead_letter_values); never blocks."""
        with self._lock:
            if len(self._rows) >= self.max_rows:
                self.not_stored += 1
                refused = True
            else:
                self._rows.append(values)
                refused = False
        if refused:
            self._refusals.error("a dead letter (%s) was not stored: %d rows already wait for the store",
                                 values["reason"], self.max_rows)
            return
        self._wake.set()

    def pending(self) -> int:
        with self._lock:
            return len(self._rows)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if not self.write():
                self._stop.wait(self.interval_s)  # the store is failing: wait before the next try

    def write(self) -> bool:
        """Write what waits, batch by batch; False when the store failed (the rows stay queued)."""
        with self._writing:
            return self._write()

    def _write(self) -> bool:
        while True:
            with self._lock:
                batch = [self._rows[i] for i in range(min(_BATCH_ROWS, len(self._rows)))]
            if not batch:
                return True
            try:
                with db.session_scope(self.db_url) as session:
                    session.execute(insert(DeadLetter), batch)
            except SQLAlchemyError as exc:
                log.warning("cannot store %d dead letters yet (%s); retrying", len(batch), exc)
                return False
            except Exception:  # the writer must outlive any store failure: its rows stay queued
                log.exception("storing %d dead letters failed; retrying", len(batch))
                return False
            with self._lock:
                for _ in batch:
                    self._rows.popleft()
                self.stored += len(batch)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is left (one more try), then stop; rows still unwritten are counted and logged."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=timeout_s)
        self.write()
        with self._lock:
            left, self._rows = len(self._rows), deque()
            self.not_stored += left
        if left:
            log.error("%d dead letters were not stored (the store failed); they are on the DLQ topic", left)
