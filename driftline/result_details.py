"""A detector result's details as stored: floats cut to the digits anyone reads (pure).

A result's details (driftline.store.models.DetectorResult.details) repeat its statistics for the
dashboard, the alerts and /metrics; their floats come out of the statistics with 17 significant
digits, most of them noise of the arithmetic. Stored with `DETAIL_DIGITS`, a window's details are
about a third smaller and every value is still within 1e-6 of its own (relative).

>>> compact_details({"p_value": 0.25132921857446977, "rows": 1000, "since": 1795996800000.0, "tests": [0.1 + 0.2]})
{'p_value': 0.2513292, 'rows': 1000, 'since': 1795996800000.0, 'tests': [0.3]}
"""
from __future__ import annotations

import math
from typing import Any

# Significant digits a stored detail keeps: a relative error under 5e-7, below anything displayed or compared.
DETAIL_DIGITS = 7
# Floats from here up (event times in milliseconds, counts) are kept whole.
_KEPT_FROM = 1e6


def compact_details(value: Any) -> Any:
    """`value` with every float rounded to DETAIL_DIGITS significant digits (whole and large floats kept)."""
    if isinstance(value, float):
        if not math.isfinite(value) or value.is_integer() or abs(value) >= _KEPT_FROM:
            return value
        return float(f"{value:.{DETAIL_DIGITS}g}")
    if isinstance(value, dict):
        return {k: compact_details(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [compact_details(v) for v in value]
    return value
