"""The `embeddings` field of an inference event: name -> list of finite numbers, checked and bounded.

An event may carry named vectors (`{"prompt": [...384 floats]}`): the model's input or output
embeddings, or its own penultimate-layer activations. This module checks the field alone
(names in the safe alphabet, at most `EMBEDDING_MAX_NAMES` of them, non-empty lists of finite numbers
within their bound in `driftline.value_bounds`, up to `EMBEDDING_MAX_DIMENSION` long); the dimension a
model version fixes for a name is checked against its baseline (`check_dimensions`) where the collector
knows the baseline.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from driftline import defaults
from driftline.json_types import json_type_name
from driftline.names import is_safe_name, name_problem
from driftline.value_bounds import bound

FIELD = "embeddings"
_NUMBERS = frozenset((float, int))
_VALUE = bound("embeddings.*[]")


class EmbeddingError(ValueError):
    """Why an event's embeddings are refused: `reason` in words, `field` the JSON path."""

    def __init__(self, reason: str, field: str):
        super().__init__(f"{field}: {reason}")
        self.reason = reason
        self.field = field


def check_embeddings(value: Any, decoded: bool = False) -> dict[str, list[float]]:
    """The event's `embeddings` object as it is, or EmbeddingError naming the first problem.

    `decoded`: the object came from orjson, which never yields NaN or infinities.
    """
    if type(value) is not dict:
        raise EmbeddingError(f"expected an object of named vectors, got {json_type_name(value)}", FIELD)
    if len(value) > defaults.EMBEDDING_MAX_NAMES:
        raise EmbeddingError(f"{len(value)} vectors, above the limit of {defaults.EMBEDDING_MAX_NAMES}", FIELD)
    for name, vector in value.items():
        if not is_safe_name(name):
            raise EmbeddingError(f"bad name {str(name)[:64]!r}: {name_problem(name)}", FIELD)
        where = f"{FIELD}.{name}"
        if type(vector) is not list:
            raise EmbeddingError(f"expected a list of numbers, got {json_type_name(vector)}", where)
        if not vector:
            raise EmbeddingError("must not be empty", where)
        if len(vector) > defaults.EMBEDDING_MAX_DIMENSION:
            raise EmbeddingError(f"{len(vector)} dimensions, above the limit of {defaults.EMBEDDING_MAX_DIMENSION}",
                                 where)
        if not _NUMBERS.issuperset(map(type, vector)):
            bad = next(i for i, v in enumerate(vector) if type(v) not in _NUMBERS)
            raise EmbeddingError(f"expected a number, got {json_type_name(vector[bad])}", f"{where}[{bad}]")
        if not decoded and not all(map(math.isfinite, vector)):
            bad = next(i for i, v in enumerate(vector) if not math.isfinite(v))
            raise EmbeddingError("must be a finite number", f"{where}[{bad}]")
        if min(vector) < _VALUE.low or max(vector) > _VALUE.high:  # two passes in C; the loop only on failure
            bad = next(i for i, v in enumerate(vector) if not _VALUE.holds(v))
            raise EmbeddingError(_VALUE.refusal(vector[bad]), f"{where}[{bad}]")
    return value


def check_dimensions(embeddings: Mapping[str, list[float]], dimensions: Mapping[str, int]) -> None:
    """Each vector named in `dimensions` (a model version's, from its baseline) has that length."""
    for name, vector in embeddings.items():
        expected = dimensions.get(name)
        if expected is not None and len(vector) != expected:
            raise EmbeddingError(f"{len(vector)} dimensions; this model version's baseline has {expected}",
                                 f"{FIELD}.{name}")


def as_lists(embeddings: Mapping[str, Any]) -> dict[str, list[float]]:
    """Named vectors (numpy arrays of any float or int dtype, lists, tuples) as lists of floats for an event.

    A vector that is not one-dimensional raises ValueError here, at the caller; non-finite values
    are sent as they are and dead-lettered by the collector, which names them.
    """
    out = {}
    for name, vector in embeddings.items():
        array = np.asarray(vector, dtype=np.float64)
        if array.ndim != 1:
            raise ValueError(f"embedding {name!r} must be one-dimensional, got shape {array.shape}")
        out[str(name)] = array.tolist()
    return out
