"""Feature freshness for the model page: age percentiles per feature and window, from the window states."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

# The percentiles drawn per feature, and the columns of `age_frame`.
AGE_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
COLUMNS = ["time", "feature", "series", "age_s"]


def age_frame(states: Sequence[tuple[int, int, Any]]) -> pd.DataFrame:
    """From (start, end, state) per partition state: the age percentiles (seconds) of each feature per window.

    Partitions of one window are merged first (the sketches merge exactly, so the percentiles are the window's).
    """
    merged: dict[int, dict[str, Any]] = {}
    for start, _end, state in states:
        sketches = merged.setdefault(start, {})
        for name, sketch in getattr(state, "feature_age", {}).items():
            sketches[name] = sketch if name not in sketches else sketches[name].merged(sketch)
    rows = []
    for start, sketches in sorted(merged.items()):
        for name, sketch in sorted(sketches.items()):
            for label, q in AGE_QUANTILES.items():
                value = sketch.quantile(q)
                if value is not None:
                    rows.append((pd.Timestamp(start, unit="ms", tz="UTC"), name, f"{name} {label}", value / 1000.0))
    return pd.DataFrame(rows, columns=COLUMNS)
