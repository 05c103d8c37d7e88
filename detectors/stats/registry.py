"""The one registry of drift statistics: what the detectors measure, the rule judges, /metrics and the docs list.

Every reader goes through here: the streaming families and `detect`'s paths (in memory, streamed, Spark, Dask)
measure a feature's registered statistics (`binned_tests`), the decision rule takes its thresholds, roles and
noise rules from them (`driftline.detectors.thresholds.decision`), the sampling-noise module measures the binned
ones' noise over categories, the scheduler's ``/metrics`` and the alert text read their fields, and
scripts/thresholds_table.py writes their table into docs/configuration.md. A statistic is one module on the
`Statistic` contract plus its import line below (docs/extending.md).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from driftline.detectors.stats import two_sample
from driftline.detectors.stats.statistic import BinnedStatistic, Statistic
from driftline.vocabulary import NUMERIC

__all__ = ["STATISTICS", "binned_tests", "effects", "noise_statistics", "register", "sorted_tests", "statistic"]

STATISTICS: dict[str, Statistic] = {}


def register(cls: type[Statistic]) -> type[Statistic]:
    """Class decorator: add a statistic (a class on the `Statistic` contract) under its key; a key taken twice is
    an error. The driftline statistics come first whatever imports first (the rule's reasons list them in order)."""
    if cls.key in STATISTICS:
        if type(STATISTICS[cls.key]).__qualname__ == cls.__qualname__:
            return cls  # its module imported again under another name (a doctest run by path): the same statistic
        raise ValueError(f"drift statistic {cls.key!r} is registered twice")
    STATISTICS[cls.key] = cls()
    ordered = sorted(STATISTICS.values(), key=lambda s: not s.dedicated)
    STATISTICS.clear()
    STATISTICS.update((s.key, s) for s in ordered)
    return cls


def statistic(key: str) -> Statistic | None:
    """The registered statistic named `key` (None: not a drift statistic, e.g. ``missing``)."""
    return STATISTICS.get(key)


def effects(kind: str) -> tuple[Statistic, ...]:
    """The effect sizes the rule judges for a feature of `kind`, in registration order."""
    return tuple(s for s in STATISTICS.values() if s.role == "effect" and kind in s.kinds)


def noise_statistics() -> tuple[BinnedStatistic, ...]:
    """The binned effect sizes whose sampling noise is measured over a categorical feature's categories."""
    return tuple(s for s in STATISTICS.values() if isinstance(s, BinnedStatistic) and s.role == "effect")


def _shared(kind: str) -> Iterable[BinnedStatistic]:
    return (s for s in STATISTICS.values()
            if isinstance(s, BinnedStatistic) and not s.dedicated and kind in s.kinds)


def binned_tests(reference_counts: Any, current_counts: Any, kind: str,
                 noise: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """``{key: {"value", "noise"?}}`` of every registered binned statistic the detectors do not measure in their
    own pass, from two count vectors on shared bins (`reference_counts` None: no bins, every value 0.0)."""
    tests: dict[str, dict[str, Any]] = {}
    for found in _shared(kind):
        value = 0.0 if reference_counts is None else found.value(np.asarray(reference_counts),
                                                                 np.asarray(current_counts))
        tests[found.key] = {"value": value, **({"noise": noise[found.key]} if noise and found.key in noise else {})}
    return tests



def sorted_tests(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> dict[str, dict[str, Any]]:
    """`binned_tests` of a numeric feature from two sorted, clean samples, on Evidently's shared bins
    (`two_sample.shared_bins_sorted`, the bins of the Jensen-Shannon distance)."""
    if reference_sorted.size == 0 or current_sorted.size == 0:
        return binned_tests(None, None, NUMERIC)
    return binned_tests(*two_sample.shared_bins_sorted(reference_sorted, current_sorted), NUMERIC)


# The statistics: one import line each; each module registers its classes with `register` (docs/extending.md).
from driftline.detectors.stats import builtin_statistics  # noqa: E402,F401
from driftline.detectors.stats import hellinger  # noqa: E402,F401
