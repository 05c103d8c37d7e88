"""The paging line of the sequential policy: from a stated false-page rate and the window length to an e-value."""
from __future__ import annotations

import math
from dataclasses import dataclass

from driftline import defaults
from driftline.detectors.stats.sequential import arl_threshold

__all__ = ["PagingPolicy"]

_MONTH_SECONDS = 30 * 24 * 3600


@dataclass(frozen=True)
class PagingPolicy:
    """The paging line from a stated false-page rate and the window length.

    >>> PagingPolicy(false_pages_per_model_per_month=1.0, window_seconds=3600).line(14)
    10080.0
    """

    false_pages_per_model_per_month: float = defaults.ALERT_FALSE_PAGES_PER_MODEL_PER_MONTH
    window_seconds: float = defaults.WINDOW_SECONDS
    drifts: tuple[float, ...] = defaults.SEQUENTIAL_DRIFTS
    minimum: float = defaults.SEQUENTIAL_MIN_E_VALUE
    cap: float = defaults.SEQUENTIAL_EVIDENCE_CAP
    # realized quality against an in-sample reference: the judged windows that set the live level first
    live_reference_windows: int = defaults.QUALITY_LIVE_REFERENCE_WINDOWS

    def __post_init__(self) -> None:
        rate = self.false_pages_per_model_per_month
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"false_pages_per_model_per_month must be a positive number, got {rate}")
        if not self.window_seconds > 0:
            raise ValueError(f"window length must be positive, got {self.window_seconds}")

    def line(self, streams: int) -> float:
        """The e-value at which one of `streams` streams pages."""
        return arl_threshold(_MONTH_SECONDS / self.window_seconds, self.false_pages_per_model_per_month, streams,
                             self.minimum)
