"""`ThresholdSpreads`: each feature's effect sizes over reference chunks, kept with the baseline.

Reference-derived thresholds (`[drift] thresholds = "reference"`) are ``mean + k * std`` of a
statistic over reference chunks of the window's row count. `driftline detect` measures the
chunks on the reference it holds; the streaming service has only the baseline, so the baseline
keeps, for a grid of chunk sizes (`defaults.REFERENCE_THRESHOLD_SIZES` and the largest size the
reference holds `REFERENCE_THRESHOLD_MIN_CHUNKS` chunks of), the mean and standard deviation of
each feature's PSI, normalised Wasserstein and Jensen-Shannon over those chunks. A window of a
grid size gets exactly `detect`'s threshold; one between two sizes interpolates the two
thresholds linearly in log(threshold) against log(rows) (the no-drift noise of these statistics
falls as a power of the rows); one below the grid extrapolates the first segment's line; one
above it has no derived threshold (the reference is too short for it, as in `detect`).

The spreads are measured by `driftline.detectors.thresholds.spreads` (the statistics live with
the detectors); this module only keeps and reads them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from driftline.errors import UserError

__all__ = ["QualitySpreads", "ThresholdSpreads"]

# statistic -> (mean per size, standard deviation per size)
Spread = dict[str, tuple[list[float], list[float]]]


@dataclass(frozen=True)
class ThresholdSpreads:
    """Per chunk size, each feature's (and the prediction's) statistic means and standard deviations."""

    sizes: list[int]  # chunk sizes in rows, strictly increasing
    chunks: list[int]  # chunks measured at each size
    features: dict[str, Spread] = field(default_factory=dict)
    prediction: Spread | None = None

    def __post_init__(self) -> None:
        if not self.sizes or len(self.chunks) != len(self.sizes) or any(
                b <= a for a, b in zip(self.sizes, self.sizes[1:])) or min(self.sizes) < 1:
            raise UserError(f"baseline threshold spreads: sizes must be increasing positive row counts with one "
                            f"chunk count each, got sizes {self.sizes} and chunks {self.chunks}")
        for name, spread in [*self.features.items(), *([("prediction", self.prediction)] if self.prediction else [])]:
            for statistic, (means, stds) in spread.items():
                if len(means) != len(self.sizes) or len(stds) != len(self.sizes):
                    raise UserError(f"baseline threshold spreads of {name!r} {statistic}: "
                                    f"{len(means)} means and {len(stds)} deviations for {len(self.sizes)} sizes")

    @property
    def largest(self) -> int:
        return self.sizes[-1]

    def thresholds(self, rows: int, k: float) -> tuple[dict[str, dict[str, float]], dict[str, float]] | None:
        """({feature: {statistic: threshold}}, {statistic: threshold} of the prediction) for windows of
        `rows` rows, or None when `rows` exceeds the largest size measured."""
        if rows > self.largest or rows < 1:
            return None
        features = {name: self._spread_thresholds(spread, rows, k) for name, spread in self.features.items()}
        return features, ({} if self.prediction is None else self._spread_thresholds(self.prediction, rows, k))

    def _spread_thresholds(self, spread: Spread, rows: int, k: float) -> dict[str, float]:
        found = {}
        for statistic, (means, stds) in spread.items():
            value = self._interpolate([m + k * s for m, s in zip(means, stds)], rows)
            if value is not None:
                found[statistic] = value
        return found

    def _interpolate(self, levels: list[float], rows: int) -> float | None:
        sizes = np.asarray(self.sizes, dtype=np.float64)
        values = np.asarray(levels, dtype=np.float64)
        if not np.isfinite(values).all():
            return None
        values = np.clip(values, 0.0, None)
        if len(sizes) == 1:
            return float(values[0])
        at = int(np.clip(np.searchsorted(sizes, rows), 1, len(sizes) - 1))
        low, high = sizes[at - 1], sizes[at]
        if rows == high:
            return float(values[at])
        if rows == low:
            return float(values[at - 1])
        if values[at - 1] <= 0.0 or values[at] <= 0.0:  # a constant feature: no power law, straight line
            share = (rows - low) / (high - low)
            return float(max(values[at - 1] + share * (values[at] - values[at - 1]), 0.0))
        share = (math.log(rows) - math.log(low)) / (math.log(high) - math.log(low))
        return float(math.exp(math.log(values[at - 1]) + share * (math.log(values[at]) - math.log(values[at - 1]))))

    def to_dict(self) -> dict[str, Any]:
        def spread(s: Spread) -> dict[str, Any]:
            return {statistic: {"mean": list(means), "std": list(stds)} for statistic, (means, stds) in s.items()}

        return {"sizes": list(self.sizes), "chunks": list(self.chunks),
                "features": {name: spread(s) for name, s in self.features.items()},
                "prediction": None if self.prediction is None else spread(self.prediction)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ThresholdSpreads":
        def spread(s: Mapping[str, Any]) -> Spread:
            return {str(statistic): ([float(v) for v in values["mean"]], [float(v) for v in values["std"]])
                    for statistic, values in s.items()}

        try:
            return cls(sizes=[int(v) for v in data["sizes"]], chunks=[int(v) for v in data["chunks"]],
                       features={str(name): spread(s) for name, s in (data.get("features") or {}).items()},
                       prediction=None if data.get("prediction") is None else spread(data["prediction"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"baseline threshold spreads are malformed ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class QualitySpreads:
    """Each quality metric's mean and standard deviation over chunks of the quality reference's labelled rows.

    The window-to-window spread a metric really has (a confident model's log loss is heavy-tailed: its binned
    per-row spread understates it); `standard_deviation(rows)` scales the nearest measured size's by
    sqrt(size / rows), as a mean over rows does.
    """

    sizes: list[int]
    chunks: list[int]
    metrics: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.sizes or len(self.chunks) != len(self.sizes) or any(
                len(means) != len(self.sizes) or len(stds) != len(self.sizes) for means, stds in self.metrics.values()):
            raise UserError(f"baseline quality spreads: sizes {self.sizes}, chunks {self.chunks} and the metrics' "
                            "values do not line up")

    def standard_deviation(self, metric: str, rows: int) -> float | None:
        """The metric's spread over windows of `rows` labelled rows, or None when it was not measured."""
        if metric not in self.metrics or rows < 1:
            return None
        at = int(np.argmin([abs(math.log(size / rows)) for size in self.sizes]))
        std = self.metrics[metric][1][at]
        return float(std * math.sqrt(self.sizes[at] / rows)) if math.isfinite(std) else None

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "chunks": list(self.chunks),
                "metrics": {name: {"mean": list(means), "std": list(stds)} for name, (means, stds) in self.metrics.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "QualitySpreads":
        try:
            return cls(sizes=[int(v) for v in data["sizes"]], chunks=[int(v) for v in data["chunks"]],
                       metrics={str(name): ([float(v) for v in values["mean"]], [float(v) for v in values["std"]])
                                for name, values in (data.get("metrics") or {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"baseline quality spreads are malformed ({type(exc).__name__}: {exc})") from None
