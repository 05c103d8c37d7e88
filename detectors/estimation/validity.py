r"""Whether a model's estimates still hold: realized against the estimates' bands over the recent labelled windows.

CBPE's bands (`driftline.detectors.estimation.cbpe`) hold the realized metric with the stated coverage only
while labels follow the training calibration. Once labels have arrived for windows that also have an
estimate, each such window is *checked*: a metric *misses* when its realized value lies outside the band
of the estimate for the same labelled rows (|gap| > z·SE, the result's ``concept_drift``); the window
misses when any metric does. With the band at ``z`` a metric misses with probability at most
:math:`2(1 - \Phi(z))` when the assumptions hold, so a window with at most :math:`k` judged metrics
misses with probability at most :math:`p_0 = \min(1, 2k(1 - \Phi(z)))` (union bound; 1.35 % at z = 3, k = 5).

The verdict (`judge_validity`): over the last ``windows`` checked windows (those judged on at least
``quality_min_labels`` labels of their own), *x* of *n* missed; the estimates no longer hold when
:math:`P(X \ge x)` for :math:`X \sim \mathrm{Binomial}(n, p_0)` is below ``alpha``, the stated false-alarm
rate per judged window (`defaults.ESTIMATION_INVALID_ALPHA`). At z = 3 and alpha = 1 % that takes two
misses (one miss has probability 1.35 % > 1 %), so after a break that moves every labelled window out of
its bands the second labelled window raises it; misses older than ``windows`` checked windows stop counting,
so the verdict clears once the estimates hold again.

>>> judge_validity([WindowCheck(("accuracy",))], z=3.0, alpha=0.01, windows=10).invalid
False
>>> judge_validity([WindowCheck(("accuracy",)), WindowCheck(()), WindowCheck(("f1", "accuracy"))],
...                z=3.0, alpha=0.01, windows=10).invalid
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from driftline.vocabulary import ESTIMATED_METRICS

__all__ = ["Validity", "WindowCheck", "judge_validity", "miss_probability", "window_check"]


@dataclass(frozen=True)
class WindowCheck:
    """One labelled window's estimates against what came true: the metrics whose realized left their band."""

    missed: tuple[str, ...] = ()
    window_start_ms: int | None = None

    @property
    def miss(self) -> bool:
        return bool(self.missed)


@dataclass(frozen=True)
class Validity:
    """The verdict over the last checked windows: how many, how many missed, the binomial tail, the decision."""

    windows: int
    misses: int
    miss_probability: float
    p_value: float
    alpha: float
    invalid: bool


def miss_probability(z: float, metrics: int = len(ESTIMATED_METRICS)) -> float:
    """The most a window misses (any of `metrics` outside its band at `z`) while the estimates hold."""
    return min(1.0, metrics * math.erfc(z / math.sqrt(2.0)))


def _upper_tail(misses: int, n: int, p: float) -> float:
    """P(X >= misses) for X ~ Binomial(n, p), summed exactly (n is a handful of windows)."""
    if misses <= 0:
        return 1.0
    if p >= 1.0:
        return 1.0
    return min(1.0, sum(math.comb(n, k) * p ** k * (1.0 - p) ** (n - k) for k in range(misses, n + 1)))


def window_check(concept_drift: Mapping[str, Any]) -> WindowCheck | None:
    """A window's check from its metrics' ``concept_drift`` flags (None: not judged); None when none was judged."""
    judged = {metric: flag for metric, flag in concept_drift.items() if isinstance(flag, bool)}
    if not judged:
        return None
    return WindowCheck(tuple(sorted(metric for metric, flag in judged.items() if flag)))


def judge_validity(checks: Sequence[WindowCheck], *, z: float, alpha: float, windows: int) -> Validity:
    """The binomial test over the last `windows` of `checks` (oldest first; module docstring)."""
    recent = list(checks)[-windows:] if windows > 0 else []
    misses = sum(check.miss for check in recent)
    p0 = miss_probability(z)
    p_value = _upper_tail(misses, len(recent), p0)
    return Validity(len(recent), misses, p0, p_value, alpha, bool(recent) and p_value < alpha)
