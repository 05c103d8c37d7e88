"""`StoreBackoff`: when the collector may touch the store again after it failed.

A failed flush waits `retry_min_s`, doubling up to `retry_max_s` while flushes keep failing; a
failed read of the stored offsets waits the current delay without doubling it. Flushing and
placing partitions share one backoff, so that neither hammers a store the other found down.
"""
from __future__ import annotations

import time


class StoreBackoff:
    """The store's retry clock, shared by the flush coordinator and the partition placement."""

    def __init__(self, min_s: float, max_s: float):
        self.min_s = min_s
        self.max_s = max_s
        self.delay = min_s  # the wait after the next failure
        self.retry_at = 0.0  # time.monotonic() before which the store is left alone
        self.flush_failing = False  # the last flush failed (a flush's worth pending then pauses reading)

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def read_failed(self) -> None:
        self.retry_at = time.monotonic() + self.delay

    def flush_failed(self) -> float:
        """A flush failed: wait the current delay (returned) and double the next one."""
        waited = self.delay
        self.flush_failing = True
        self.retry_at = time.monotonic() + waited
        self.delay = min(self.delay * 2, self.max_s)
        return waited

    def flush_succeeded(self) -> None:
        self.flush_failing = False
        self.delay = self.min_s
        self.retry_at = 0.0
