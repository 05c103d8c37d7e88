"""The model's own decisions (a binary classifier's 0/1 beside its score), read as 1.0 / 0.0 / NaN per row.

A decision is given by the event field ``predicted_class`` (`driftline.vocabulary.PREDICTED_CLASS`) or by
``--prediction-class`` in `driftline detect` and `driftline baseline`. Positive: ``true``, 1 (or 1.0) and the
strings "1" and "true"; negative: ``false``, 0 and "0" and "false" (any case). Anything else, a null included,
is no binary decision (NaN): that row is decided by the threshold on its score, as without the field.

>>> decision_values([True, 0, "1", None, "cat", 1.0]).tolist()
[1.0, 0.0, 1.0, nan, nan, 1.0]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

__all__ = ["decision_values", "with_decisions", "split_decisions", "DECIDED_PREDICTION", "DECISION_KEY"]

_POSITIVE = frozenset(("1", "true"))
_NEGATIVE = frozenset(("0", "false"))
# How the collector stores a prediction that came with its decision, for the label join: {"prediction": score,
# "predicted_class": decision}; `split_decisions` reads it back.
DECIDED_PREDICTION = "prediction"
DECISION_KEY = "predicted_class"


def _one(value: Any) -> float:
    if value is None or value is pd.NA:
        return np.nan
    if isinstance(value, (bool, np.bool_)):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float, np.integer, np.floating)):
        return 1.0 if value == 1 else (0.0 if value == 0 else np.nan)
    if isinstance(value, str):
        text = value.strip().lower()
        return 1.0 if text in _POSITIVE else (0.0 if text in _NEGATIVE else np.nan)
    return np.nan


def decision_values(values: Any) -> np.ndarray:
    """float64 per row: 1.0 the model decided positive, 0.0 negative, NaN no binary decision (module docstring)."""
    if isinstance(values, pd.Series):
        values = values.to_numpy()
    array = np.asarray(values) if not isinstance(values, list) else None
    if array is not None and array.dtype.kind == "b":
        return array.astype(np.float64)
    if array is not None and array.dtype.kind in "fiu":
        floats = array.astype(np.float64)
        return np.where(floats == 1.0, 1.0, np.where(floats == 0.0, 0.0, np.nan))
    return np.fromiter((_one(v) for v in (values if array is None else array.tolist())), dtype=np.float64,
                       count=len(values))


def with_decisions(predictions: Sequence[Any], decisions: np.ndarray) -> list[Any]:
    """Each prediction with its decision beside it where the row has one (the label join's stored form)."""
    return [p if d != d or p is None else {DECIDED_PREDICTION: p, DECISION_KEY: float(d)}
            for p, d in zip(predictions, decisions.tolist())]


def split_decisions(predictions: Sequence[Any]) -> tuple[list[Any], np.ndarray | None]:
    """`with_decisions` undone: (the predictions, their decisions or None when no row carries one)."""
    if not any(isinstance(p, dict) for p in predictions):
        return list(predictions), None
    values, decided = [], np.full(len(predictions), np.nan)
    for i, p in enumerate(predictions):
        if isinstance(p, dict):
            decided[i] = _one(p.get(DECISION_KEY))
            p = p.get(DECIDED_PREDICTION)
        values.append(p)
    return values, decided
