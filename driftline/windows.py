"""The window key: which event-time window of which model version, one type from the collector to the alerts.

The collector folds events under it, the store's window rows are read and written by it, the scheduler
judges a window by it, and the alert lifecycle and the retraining policy advance on it. Windows are
``[window_start_ms, window_end_ms)`` in epoch milliseconds (driftline.collector.windows says how a start is
chosen).

>>> key = WindowKey.starting("credit-default", "3", 7_200_000, 3_600_000)
>>> key.window_end_ms, key.version_key
(10800000, ('credit-default', '3'))
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WindowKey"]


@dataclass(frozen=True, order=True)
class WindowKey:
    """One window of one model version; orders by model, version, then event time."""

    model: str
    version: str
    window_start_ms: int
    window_end_ms: int

    @classmethod
    def starting(cls, model: str, version: str, window_start_ms: int, window_ms: int) -> WindowKey:
        """The window of `window_ms` milliseconds that starts at `window_start_ms`."""
        return cls(model, version, int(window_start_ms), int(window_start_ms) + int(window_ms))

    @property
    def version_key(self) -> tuple[str, str]:
        """(model, version): the stream of windows this one belongs to."""
        return (self.model, self.version)

    @property
    def window_ms(self) -> int:
        return self.window_end_ms - self.window_start_ms
