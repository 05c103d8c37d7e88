"""Column builders: a list of decoded events turned into the numpy columns `EventBatch` holds."""
from __future__ import annotations

import math
from collections import Counter
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Mapping

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from driftline import defaults
from driftline.baseline import prediction_values
from driftline.json_types import json_type_of_class
from driftline.vocabulary import TOKEN_COUNTS


# Feature columns one batch makes at most (driftline.window_state.other_features): every feature
# one event may carry, and room for the new names a window state counts apart.
MAX_COLUMNS = defaults.EVENT_MAX_FEATURES + defaults.WINDOW_MAX_NEW_FEATURES

_TYPE_NAMES = {float: "number", int: "number", str: "string", bool: "boolean", list: "array", dict: "object"}


def _type_counts(types: Counter) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, count in types.items():
        if kind is type(None):
            continue
        name = _TYPE_NAMES.get(kind) or json_type_of_class(kind)
        out[name] = out.get(name, 0) + count
    return out


MISSING = object()


def types_of(column: np.ndarray) -> dict[str, int]:
    numbers = int(column.size - np.count_nonzero(np.isnan(column)))
    return {"number": numbers} if numbers else {}


def prediction_types(values: np.ndarray) -> dict[str, int]:
    """The value-type counts of a prediction column: numbers, or the non-null class keys."""
    if values.dtype == np.float64:
        return {"number": int(np.count_nonzero(~np.isnan(values)))}
    return {"string": int(sum(v is not None for v in values))}


def dict_field(events: list[dict[str, Any]], key: str) -> list[Any]:
    return list(map(dict.get, events, repeat(key)))


def object_field(events: list[Any], key: str) -> list[Any]:
    try:
        return list(map(attrgetter(key), events))
    except AttributeError:
        return [getattr(e, key, None) for e in events]


def attr_field(events: list[Any], key: str) -> list[Any]:
    return [e.get(key) if isinstance(e, dict) else getattr(e, key, None) for e in events]


def optional_column(raws: list[Mapping[str, Any]], key: str) -> np.ndarray:
    """A float64 column of an optional numeric/boolean field (NaN where absent)."""
    # dict.get mapped over plain dicts is the fast path (checked just before; mypy sees Mappings)
    values = (list(map(dict.get, raws, repeat(key))) if all(type(r) is dict for r in raws)  # type: ignore[arg-type]
              else [r.get(key) for r in raws])
    if values.count(None) == len(values):
        return np.full(len(values), np.nan)
    return float_column(values)


def token_columns(raws: list[Mapping[str, Any]]) -> dict[str, np.ndarray] | None:
    """"tokens_in" / "tokens_out" as float64 columns (NaN where absent), those some event gave; None: none did."""
    out = {}
    for key in TOKEN_COUNTS:
        column = optional_column(raws, key)
        if not np.isnan(column).all():
            out[key] = column
    return out or None


def float_column(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_as_float(v) if type(v) in (int, float, bool) else np.nan for v in values], dtype=np.float64)


def _as_float(value: int | float | bool) -> float:
    """A Python number as a float; an integer too large for one (Python callers only) is +/-inf."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def event_times(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    # RFC 3339 strings (raw dicts that skipped the validator): one vectorised parse.
    parsed = pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601", errors="coerce")
    if parsed.isna().any():
        bad = [v for v, missing in zip(values, parsed.isna().tolist()) if missing][:3]
        raise ValueError(f"event times must be epoch milliseconds or RFC 3339 strings, got {bad!r}")
    return (parsed.astype("datetime64[ms, UTC]").astype("int64")).to_numpy(dtype=np.int64)


# pandas' infer_dtype (C speed) names the value types of an object column; these
# answers mean "numbers and nulls only", so the column becomes float64.
_NUMERIC_INFERRED = frozenset(("floating", "integer", "mixed-integer-float", "empty"))


def column_from_objects(column: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """A float64 column when every non-null value is a number (bools excluded), else objects.

    Also the JSON types of the non-null values (NaN, which only Python callers can
    send, counts as null, not as a number).
    """
    inferred = infer_dtype(column, skipna=True)
    if inferred in _NUMERIC_INFERRED:
        array = column.astype(np.float64)
        numbers = int(array.size - np.count_nonzero(np.isnan(array)))
        return array, ({"number": numbers} if numbers else {})
    if inferred in ("string", "boolean"):
        non_null = int(column.size - np.count_nonzero(pd.isna(column)))
        return column, {inferred: non_null}
    types = Counter(map(type, column.tolist()))
    counts = _type_counts(types)
    if float in types:
        nan = int(pd.isna(column).sum()) - types.get(type(None), 0)
        if nan:
            counts["number"] -= nan
            if not counts["number"]:
                del counts["number"]
    return column, counts


def _object_column(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def feature_columns(records: list[Mapping[str, Any]]) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]],
                                                                 dict[str, int], set[str]]:
    """Columns, value types and absent counts of the features, and the names left without a column
    (`column_names`; the batch keeps their values sparse)."""
    n = len(records)
    names = tuple(records[0])
    if names and len(set(map(tuple, records))) == 1:
        # One producer, one key order: pandas turns the rows into typed columns in C
        # (numbers and nulls become float64/int64, anything else stays object).
        frame = pd.DataFrame.from_records(list(map(tuple, map(dict.values, records))),  # type: ignore[arg-type]
                                          columns=range(len(names)))  # (records are dicts: the fast path)
        columns, types = {}, {}
        for name, (_, series) in zip(names, frame.items()):
            if series.dtype.kind in "fiu":
                column = series.to_numpy(dtype=np.float64, na_value=np.nan)
                numbers = int(n - np.count_nonzero(np.isnan(column)))
                columns[name], types[name] = column, ({"number": numbers} if numbers else {})
            else:
                columns[name], types[name] = column_from_objects(series.to_numpy(dtype=object))
        return columns, types, {}, set()
    all_names: dict[str, None] = {}
    for r in records:
        all_names.update(dict.fromkeys(r))
    columns, types, absent = {}, {}, {}
    kept = column_names(records, all_names)
    for name in kept:
        values = [r.get(name) for r in records]
        missing = n - sum(1 for r in records if name in r)
        if missing:
            absent[name] = missing
        columns[name], types[name] = column_from_objects(_object_column(values))
    return columns, types, absent, (set(all_names).difference(kept) if len(kept) < len(all_names) else set())


def column_names(records: list[Mapping[str, Any]], names: dict[str, None], max_columns: int | None = None) -> list[str]:
    """The names a batch makes columns of (`driftline.window_state.other_features`): those carried by more
    than one event (all, for one event), at most `max_columns`, the most carried first (ties: first seen)."""
    limit = MAX_COLUMNS if max_columns is None else max_columns
    if len(names) <= limit and (len(records) == 1 or len(names) <= limit // 2):
        return list(names)  # the usual batch: nothing to choose (a few names, however many events)
    carried = Counter(chain.from_iterable(records))
    kept = [name for name in names if carried[name] > 1] if len(records) > 1 else list(names)
    if len(kept) > limit:
        kept = sorted(kept, key=lambda name: -carried[name])[:limit]  # stable: first seen among equals
    return kept


def prediction_column(predictions: list[Any]) -> tuple[str | None, np.ndarray]:
    """The prediction as a float64 score column (NaN: none), or class keys (see `prediction_values`)."""
    kinds = set(map(type, predictions))
    if kinds <= {float, int, type(None)}:
        if kinds == {type(None)}:
            return None, np.full(len(predictions), np.nan)
        return "score", np.array(predictions, dtype=np.float64)
    return prediction_values(predictions)


def latency_columns(latencies: list[Mapping[str, float]]) -> dict[str, np.ndarray]:
    parts = dict.fromkeys(("total", "queue", "compute"))
    parts.update(dict.fromkeys(latencies[0]))
    if any(len(lat) != len(parts) for lat in latencies) or len(set(map(tuple, latencies))) > 1:
        parts.update(dict.fromkeys(set().union(*latencies)))
    out = {}
    for part in parts:
        column = float_column(list(map(dict.get, latencies, repeat(part))))  # type: ignore[arg-type]  # dicts: fast path
        if part in ("total", "queue", "compute") or not np.isnan(column).all():
            out[part] = column
    return out
