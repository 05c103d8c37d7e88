"""`prediction_values`: a model's predictions as one number or one class each, for baseline and window alike."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from driftline.baseline.values import category_key, is_null, json_type

# How a prediction became a number or a class (Baseline.prediction_source).
SCORE = "score"
PROBABILITY = "probability"
CLASS = "class"


def prediction_values(predictions: Any) -> tuple[str, np.ndarray]:
    """``(source, values)``: predictions as one number or one class per row.

    * numbers (bools excluded) -> ``("score", float64)``;
    * lists of class probabilities -> ``("probability", float64)``: ``p[1]`` for two
      classes (the positive class), ``max(p)`` for more (the winning class's probability);
    * anything else (strings, booleans) -> ``("class", object array of category keys)``.

    Nulls (an error event has no prediction) are NaN / None.
    """
    if isinstance(predictions, pd.Series):
        predictions = predictions.to_numpy()
    array = np.asarray(predictions) if not isinstance(predictions, list) else None
    if array is not None and array.dtype.kind in "fiu" and array.ndim == 1:
        return SCORE, array.astype(np.float64)
    if array is not None and array.dtype.kind == "f" and array.ndim == 2:
        return PROBABILITY, _probability_score(array)
    values = list(predictions) if array is None or array.ndim else [predictions]
    non_null = [v for v in values if not is_null(v)]
    if non_null and all(isinstance(v, (list, tuple, np.ndarray)) for v in non_null):
        scores = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            if not is_null(v) and len(v):
                p = np.asarray(v, dtype=np.float64)
                scores[i] = p[1] if p.size == 2 else p.max()
        return PROBABILITY, scores
    if non_null and all(json_type(v) == "number" for v in non_null):
        return SCORE, np.array([np.nan if is_null(v) else float(v) for v in values], dtype=np.float64)
    return CLASS, np.array([None if is_null(v) else category_key(v) for v in values], dtype=object)


def _probability_score(matrix: np.ndarray) -> np.ndarray:
    return matrix[:, 1].astype(np.float64) if matrix.shape[1] == 2 else matrix.max(axis=1).astype(np.float64)
