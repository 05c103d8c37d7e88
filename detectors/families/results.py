"""What every detector family returns: one `WindowResult` per (detector, feature, metric)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from driftline import vocabulary
from driftline.baseline.values import finite_or_none

__all__ = ["WindowResult", "insufficient", "json_safe"]


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
        return bool(self.details.get(vocabulary.INSUFFICIENT_DATA))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and infinities become None); "segment" only on a segment's result."""
        out = {"detector": self.detector, "feature": self.feature, "metric": self.metric,
               "value": finite_or_none(self.value), "threshold": finite_or_none(self.threshold),
               "breached": self.breached, "details": json_safe(self.details)}
        if self.segment:
            out["segment"] = self.segment
        return out


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
        return finite_or_none(value)
    return value


def insufficient(details: dict[str, Any], reason: str) -> dict[str, Any]:
    """Mark `details` as a verdict that had too little data behind it (in place; also returned)."""
    details[vocabulary.INSUFFICIENT_DATA] = True
    details[vocabulary.REASON_KEY] = reason
    return details

