"""What every detector family returns: one `WindowResult` per (detector, feature, metric)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from driftline import vocabulary

__all__ = ["WindowResult", "finite_or_none", "insufficient", "json_number", "json_safe"]


@dataclass
class WindowResult:
    """One verdict: `metric` of `feature` (None: the whole window) measured `value` against `threshold`."""

    detector: str
    feature: str | None
    metric: str
    value: float | None
    threshold: float | None
    breached: bool
    details: dict[str, Any] = field(default_factory=dict)
    segment: str = ""  # "column=value" of a segment's result; "" for the whole population

    @property
    def insufficient_data(self) -> bool:
        return bool(self.details.get(vocabulary.INSUFFICIENT_DATA_KEY))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and infinities become None); "segment" only on a segment's result."""
        out = {"detector": self.detector, "feature": self.feature, "metric": self.metric,
               "value": json_number(self.value), "threshold": json_number(self.threshold),
               "breached": self.breached, "details": json_safe(self.details)}
        if self.segment:
            out["segment"] = self.segment
        return out


def json_number(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def json_safe(value: Any) -> Any:
    """`value` with numpy scalars as Python ones and non-finite floats as None (the store keeps JSON)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return json_number(value)
    return value


def insufficient(details: dict[str, Any], reason: str) -> dict[str, Any]:
    """Mark `details` as a verdict that had too little data behind it (in place; also returned)."""
    details[vocabulary.INSUFFICIENT_DATA_KEY] = True
    details[vocabulary.REASON_KEY] = reason
    return details


def finite_or_none(value: float) -> float | None:
    """An empty window's min/max are infinite; details carry None instead."""
    return value if math.isfinite(value) else None
