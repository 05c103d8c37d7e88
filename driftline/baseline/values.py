"""How one raw JSON value is typed, keyed and summed: the same rules for the baseline and every window."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from driftline import defaults
from driftline.json_types import json_type_of_class


def json_type(value: Any) -> str:
    """The JSON type name of a non-null feature value: number, string, boolean, array or object."""
    kind = type(value)
    if kind is float or kind is int:  # the common cases first: this runs per value
        return "number"
    if kind is str:
        return "string"
    return json_type_of_class(kind)


def category_key(value: Any) -> str:
    """The string a categorical value is counted under (also the JSON key of its count).

    Strings stay as they are; booleans become "true"/"false"; integral numbers lose
    their ".0" (so 1, 1.0 and numpy's int64(1) are one category "1"); other
    numbers use Python's shortest repr.
    """
    if isinstance(value, str):
        # Truncated (defaults.CATEGORY_MAX_CHARS) so one huge string cannot make a huge key in every window.
        return value if len(value) <= defaults.CATEGORY_MAX_CHARS else value[:defaults.CATEGORY_MAX_CHARS]
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value.is_integer():
            return str(int(value))
        return repr(value)
    return str(value)


def finite_or_none(value: float | np.floating | None) -> float | None:
    """A finite float, or None for None, NaN and the infinities (an empty window's min/max): JSON has no NaN."""
    return float(value) if value is not None and math.isfinite(value) else None


def stored_sum(value: Any) -> float:
    """A stored sum; an older version wrote an overflowed one as null: unknown, read as zero (docs/window-state.md)."""
    if value is None:
        return 0.0
    value = float(value)
    return value if math.isfinite(value) else 0.0


def is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)
