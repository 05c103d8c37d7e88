"""The JSON type name of a value, as error messages, the baseline and the window state spell it."""
from __future__ import annotations

import numbers
from typing import Any


def json_type_name(value: Any) -> str:
    """null, boolean, number, string, array or object (any other class by its name)."""
    return "null" if value is None else json_type_of_class(type(value))


def json_type_of_class(kind: type) -> str:
    """The JSON type name of values of class `kind`; numpy scalars count as the JSON types they hold."""
    # bool before number (bool is an int); numpy's bool is no `numbers.Number`, so it goes by name.
    if issubclass(kind, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")):
        return "boolean"
    if issubclass(kind, numbers.Real):
        return "number"
    if issubclass(kind, str):
        return "string"
    if issubclass(kind, (list, tuple)):
        return "array"
    if issubclass(kind, dict):
        return "object"
    return kind.__name__
