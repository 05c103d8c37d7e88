"""Reference-derived thresholds: each feature's effect-size alarm level from its own spread in the reference.

NannyML's approach to thresholds: split the reference into contiguous chunks of the
window's row count, measure each chunk against the whole reference with the same
statistic the window gets, and alarm above

    threshold = mean + k * std      (over the chunks; k = REFERENCE_THRESHOLD_Z)

so a feature that wanders naturally (seasonal, bursty) gets a higher bar than a
stable one, and small windows (noisier statistics) a higher bar than large ones.
Only the effect sizes are derived (PSI, normalised Wasserstein, Jensen-Shannon);
the significance level and the missing-rate delta stay as configured.

Reference: NannyML documentation, "Thresholds" (StandardDeviationThreshold).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from driftline import defaults
from driftline.detectors.thresholds.decision import THRESHOLD_SOURCES, DriftThresholds
from driftline.detectors.stats import registry

__all__ = ["DERIVED_STATISTICS", "ReferenceThresholds", "chunk_slices", "spread_threshold"]

# the registry's statistics whose floors are derived (PSI, normalised Wasserstein, Jensen-Shannon)
DERIVED_STATISTICS = tuple(s.key for s in registry.STATISTICS.values() if s.derived)
FIXED, REFERENCE = THRESHOLD_SOURCES

# (feature name, a chunk of its reference values) -> that chunk's tests, shaped as in a window's result.
Measure = Callable[[str, pd.Series], Mapping[str, Mapping[str, Any]]]


def chunk_slices(rows: int, size: int, max_chunks: int = defaults.REFERENCE_THRESHOLD_MAX_CHUNKS) -> list[slice]:
    """Contiguous chunks of `size` rows out of `rows` (a partial last chunk is dropped), at most `max_chunks`.

    Past `max_chunks`, the chunks kept are spread evenly over the whole reference,
    so its whole time span still counts.

    >>> chunk_slices(10, 3)
    [slice(0, 3, None), slice(3, 6, None), slice(6, 9, None)]
    """
    if size < 1:
        return []
    count = rows // size
    if count <= max_chunks:
        starts = np.arange(count)
    else:
        starts = np.unique(np.linspace(0, count - 1, max_chunks).round().astype(np.int64))
    return [slice(int(i) * size, (int(i) + 1) * size) for i in starts]


def spread_threshold(values: Sequence[float], k: float = defaults.REFERENCE_THRESHOLD_Z) -> float:
    """``mean + k * std`` (sample standard deviation) of the finite `values`; NaN when fewer than two."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size < 2:
        return float("nan")
    return float(finite.mean() + k * finite.std(ddof=1))


class ReferenceThresholds:
    """Derived thresholds per window size, computed once per size (windows of one chunk size share them)."""

    def __init__(self, reference: pd.DataFrame, names: Sequence[str], measure: Measure, *,
                 k: float = defaults.REFERENCE_THRESHOLD_Z,
                 min_chunks: int = defaults.REFERENCE_THRESHOLD_MIN_CHUNKS,
                 max_chunks: int = defaults.REFERENCE_THRESHOLD_MAX_CHUNKS):
        self.reference = reference
        self.names = list(names)
        self.measure = measure
        self.k = k
        self.min_chunks = min_chunks
        self.max_chunks = max_chunks
        self._cache: dict[int, dict[str, dict[str, float]] | None] = {}

    def derive(self, size: int) -> dict[str, dict[str, float]] | None:
        """{feature: {statistic: threshold}} for windows of `size` rows, or None when the reference is too small."""
        if size not in self._cache:
            self._cache[size] = self._derive(size)
        return self._cache[size]

    def _derive(self, size: int) -> dict[str, dict[str, float]] | None:
        slices = chunk_slices(len(self.reference), size, self.max_chunks)
        if len(slices) < self.min_chunks:
            return None
        derived: dict[str, dict[str, float]] = {}
        for name in self.names:
            column = self.reference[name]
            measured = [self.measure(name, column.iloc[part]) for part in slices]
            derived[name] = {}
            for statistic in DERIVED_STATISTICS:
                if statistic in measured[0]:
                    value = spread_threshold([m[statistic]["value"] for m in measured], self.k)
                    if np.isfinite(value):
                        derived[name][statistic] = max(value, 0.0)
        return derived

    def for_window(self, thresholds: DriftThresholds, rows: int) -> tuple[DriftThresholds, str, str | None]:
        """(thresholds for a window of `rows` rows, their source, a note when falling back to the fixed ones).

        A feature's own ``[drift.features.NAME]`` values still win over the derived ones.
        """
        derived = self.derive(rows)
        if derived is None:
            chunks = len(chunk_slices(len(self.reference), rows, self.max_chunks))
            return thresholds, FIXED, (f"reference-derived thresholds need at least {self.min_chunks} reference "
                                       f"chunks of the window's {rows} rows, the reference holds {chunks}: "
                                       f"fixed thresholds used")
        features = {name: {**derived.get(name, {}), **thresholds.feature_overrides(name)}
                    for name in set(derived) | set(thresholds.features)}
        return thresholds.replace(features=features), REFERENCE, None
