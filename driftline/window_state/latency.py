"""`LatencyHistogram`: the mergeable latency quantile sketch of a window."""
from __future__ import annotations

import math
from typing import Any, Mapping, Self

import numpy as np

from driftline import defaults
from driftline.baseline import stored_sum
from driftline.baseline.values import finite_or_none
from driftline.window_state.codec import small_uint


class LatencyHistogram:
    r"""Log-bucket histogram of non-negative values (DDSketch's mapping, dense, fixed range).

    With relative accuracy :math:`\alpha` (`defaults.LATENCY_RELATIVE_ACCURACY`),
    :math:`\gamma = (1+\alpha)/(1-\alpha)`; value *x* goes to bucket
    :math:`i = \lceil \log_\gamma x \rceil`, which covers :math:`(\gamma^{i-1}, \gamma^i]`,
    and a bucket is represented by :math:`2\gamma^i/(\gamma+1)`, within a factor
    :math:`1 \pm \alpha` of every value in it. `quantile(q)` returns the bucket of
    the order statistic of rank :math:`\lfloor q (n-1) \rfloor`, so it is within
    1 % of numpy's ``quantile(x, q, method="lower")``. Values below
    `defaults.LATENCY_MIN_MS` (zero included) share the first bucket, values above
    `defaults.LATENCY_MAX_MS` the last. Merging adds the bucket counts.

    Reference: Masson, Rim, Lee, "DDSketch: A Fast and Fully-Mergeable Quantile
    Sketch with Relative-Error Guarantees", VLDB 2019.
    """

    gamma = (1 + defaults.LATENCY_RELATIVE_ACCURACY) / (1 - defaults.LATENCY_RELATIVE_ACCURACY)
    _log_gamma = math.log(gamma)
    _offset = math.ceil(math.log(defaults.LATENCY_MIN_MS) / _log_gamma)
    size = math.ceil(math.log(defaults.LATENCY_MAX_MS) / _log_gamma) - _offset + 1

    __slots__ = ("counts", "count", "sum", "max", "min", "out_of_range")

    def __init__(self) -> None:
        self.counts = np.zeros(self.size, dtype=np.int64)
        self.count = 0
        self.sum = 0.0
        self.max = -math.inf
        self.min = math.inf
        self.out_of_range = 0  # values above defaults.VALUE_MAX_ABS: counted here, not in the buckets or sums

    def add(self, values: np.ndarray) -> None:
        values = values[~np.isnan(values)] if values.size else values
        if values.size == 0:
            return
        sane = np.abs(values) <= defaults.VALUE_MAX_ABS
        if not sane.all():
            self.out_of_range += int(values.size - np.count_nonzero(sane))
            values = values[sane]
            if values.size == 0:
                return
        with np.errstate(divide="ignore"):
            index = np.ceil(np.log(np.maximum(values, defaults.LATENCY_MIN_MS)) / self._log_gamma) - self._offset
        index = np.clip(index, 0, self.size - 1).astype(np.intp)
        self.counts += np.bincount(index, minlength=self.size)
        self.count += int(values.size)
        self.sum += float(values.sum())
        self.max = max(self.max, float(values.max()))
        self.min = min(self.min, float(values.min()))

    def quantile(self, q: float) -> float | None:
        """The q-quantile within 1 % (class docstring); None when empty."""
        if self.count == 0:
            return None
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile needs 0 <= q <= 1, got {q}")
        if q == 1.0:
            return self.max  # kept exactly
        if q == 0.0:
            return self.min
        rank = q * (self.count - 1)
        bucket = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        value = 2.0 * self.gamma ** (bucket + self._offset) / (self.gamma + 1.0)
        return float(min(max(value, self.min), self.max))

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    def merged(self, other: "LatencyHistogram") -> Self:
        out = type(self)()
        out.counts = self.counts + other.counts
        out.count = self.count + other.count
        out.sum = self.sum + other.sum
        out.max = max(self.max, other.max)
        out.min = min(self.min, other.min)
        out.out_of_range = self.out_of_range + other.out_of_range
        return out

    def _pack(self) -> dict[str, Any]:
        nonzero = np.flatnonzero(self.counts)
        data = {"index": nonzero.astype(np.uint16), "counts": small_uint(self.counts[nonzero]), "count": self.count,
                "sum": self.sum, "max": finite_or_none(self.max), "min": finite_or_none(self.min)}
        if self.out_of_range:
            data["out_of_range"] = self.out_of_range
        return data

    @classmethod
    def _unpack(cls, data: Mapping[str, Any]) -> Self:
        out = cls()
        index = np.asarray(data["index"], dtype=np.intp)
        if index.size and (index.max() >= cls.size):
            raise ValueError("latency histogram does not match this version's bucket layout")
        out.counts[index] = np.asarray(data["counts"], dtype=np.int64)
        out.count, out.sum = int(data["count"]), stored_sum(data["sum"])
        out.max = -math.inf if data["max"] is None else float(data["max"])
        out.min = math.inf if data["min"] is None else float(data["min"])
        out.out_of_range = int(data.get("out_of_range", 0))
        return out
