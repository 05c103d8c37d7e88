"""A poll's inference events decoded straight into columns, for the collector's hot path.

`driftline.events` decodes one message at a time into Python dicts (orjson) and checks
each field in Python: ~25 us an event on the development machine, most of the
collector's work. pyarrow's JSON reader turns the same messages, joined by newlines,
into typed columns in C (~7 us an event), and the checks below run once per column.

This path only ever *accepts*. It takes a batch when every message is one the
per-event fast path (`events._fast_inference`) would accept as it is, and returns
None otherwise, so the caller runs the per-event path, which names each problem and
dead-letters it. Both read their limits from one table (`driftline.value_bounds`): a value
past a bound sends the batch there. The batch is all or nothing so that events keep their partition order
(lateness and de-duplication depend on it).

Where pyarrow is more lenient than JSON, the batch is refused: invalid UTF-8 (pyarrow
does not check it), several objects on one line, blank messages (all checked on the
bytes), NaN and Infinity literals (checked on the columns). Where it cannot tell apart
two things the contract treats differently (a missing key and an explicit null: an
absent feature is counted as absent, a null latency part is invalid), any null there
sends the batch to the per-event path, so batches with null features (a data-quality
incident) are slower but counted the same.

Numbers are read as pyarrow reads them: a batch whose predictions mix 1 and 0.5 gives
1.0 for the first, the same JSON number.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from driftline import defaults
from driftline.events import (FEATURE_AGE_MS, FEATURE_TS, INFERENCE_SCHEMA, MAX_EVENT_BYTES, MAX_ID_CHARS, MAX_TS_MS, MIN_TS_MS, MODEL_CHARS,
                              REQUEST_ID_CHARS, TOKENS_IN, TOKENS_OUT, VERSION_CHARS, minute_start_ms)
from driftline.names import NAME_PATTERN
from driftline.rollouts import is_role
from driftline.value_bounds import bound
from driftline.baseline.decisions import decision_values
from driftline.vocabulary import PREDICTED_CLASS
from driftline.window_state import EventBatch, prediction_column

# Whole blocks in one thread: a poll is a few MB at most, and a decoder process has one core to itself.
_READ_OPTIONS = pa_json.ReadOptions(use_threads=False, block_size=1 << 26)
_SCALAR_TYPES = (pa.float64(), pa.int64(), pa.string(), pa.bool_())
_NUMBER_TYPES = (pa.float64(), pa.int64())
_JSON_TYPE_NAMES = {pa.float64(): "number", pa.int64(): "number", pa.string(): "string", pa.bool_(): "boolean"}
_WHOLE_NAME = f"^{NAME_PATTERN}$"  # driftline.names.is_safe_name, as an RE2 pattern for pyarrow
_FLOAT_OBJECTS = frozenset(("features", "inputs", "latency_ms"))
# Colons in the first message (every key has one): the features an event may carry, and room for the rest.
_FIRST_MAX_COLONS = defaults.EVENT_MAX_FEATURES + 256
# The bounds table (driftline.value_bounds), as the per-event path reads it: a batch with a value outside goes there.
_LATENCY, _BATCH_SIZE, _AGE = bound("latency_ms.*"), bound("batch_size"), bound("feature_age_ms.*")
_TIMES = bound("feature_ts.*")
_TOKENS = {name: bound(name) for name in (TOKENS_IN, TOKENS_OUT)}


class RawRecords(Sequence):
    """Events still as JSON messages, decoded one by one when read: the window sample reads a few."""

    __slots__ = ("messages", "positions")
    # The columnar decoder takes no batch with tags or embeddings (they go event by event), so none is read for
    # segments or embedding summaries (`EventBatch.embedding_columns`).
    without_tags = True

    def __init__(self, messages: Sequence[bytes], positions: Sequence[int] | None = None):
        self.messages = messages
        self.positions = positions

    def __len__(self) -> int:
        return len(self.messages) if self.positions is None else len(self.positions)

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        return orjson.loads(self.messages[i if self.positions is None else self.positions[i]])

    def subset(self, positions: Sequence[int]) -> "RawRecords":
        if self.positions is not None:
            positions = [self.positions[i] for i in positions]
        return RawRecords(self.messages, list(positions))


@dataclass
class InferenceColumns:
    """A batch of valid inference events, in partition order."""

    batch: EventBatch
    event_ids: list[str]
    models: list[str]
    versions: list[str]
    request_ids: list[str | None]
    predictions: list[Any]
    roles: list[str | None]  # driftline.rollouts roles; None where the event names none

    @property
    def n(self) -> int:
        return self.batch.n


def parse_inference_columns(messages: Sequence[bytes], max_ts_ms: int | None = None) -> InferenceColumns | None:
    """All of `messages` as columns, or None when any of them needs the per-event path.

    `max_ts_ms`: the latest event time accepted (as `driftline.events.parse_inference`).
    """
    n = len(messages)
    if n == 0:
        return None
    # Every message bytes of 2 .. MAX_EVENT_BYTES, from "{" to "}": checked on the joined
    # buffer at the message bounds (numpy), not message by message in Python.
    if set(map(type, messages)) != {bytes}:
        return None
    lengths = np.fromiter(map(len, messages), dtype=np.int64, count=n)
    if lengths.min() < 2 or lengths.max() > MAX_EVENT_BYTES:
        return None
    joined = b"\n".join(messages)
    if joined.count(b"\n") != n - 1:  # a message of several lines
        return None
    ends = np.cumsum(lengths + 1) - 1  # one past each message's last byte (its newline, or the end)
    buffer = np.frombuffer(joined, dtype=np.uint8)
    if not ((buffer[ends - lengths] == 0x7B).all() and (buffer[ends - 1] == 0x7D).all()):  # "{" ... "}"
        return None
    if not joined.isascii():  # pyarrow does not check UTF-8 (orjson does): strict decode, surrogates refused
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return None
    schema = _first_schema(messages[0])
    if schema is None:
        return None
    try:
        table = pa_json.read_json(pa.py_buffer(joined), read_options=_READ_OPTIONS,
                                  parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                                                     unexpected_field_behavior="error"))
    except (pa.ArrowException, UnicodeDecodeError, ValueError):
        return None  # not JSON, a key twice, a key or type the first message lacks: the per-event path says which
    if table.num_rows != n:
        return None
    names = set(table.column_names)
    if not {"schema", "event_id", "ts", "model", "version", "features", "latency_ms", "prediction"} <= names:
        return None
    if "embeddings" in names:  # vectors are checked, and their dimensions held to the baseline, event by event
        return None
    try:
        column = {name: table.column(name).combine_chunks() for name in table.column_names}
    except pa.ArrowException:  # e.g. a list of nulls where an object belongs: pyarrow cannot join its chunks
        return None
    if not all(map(_finite, column.values())):
        return None  # NaN or Infinity literals, which pyarrow reads and JSON does not allow

    if not (_strings(column["schema"]) and pc.all(pc.equal(column["schema"], INFERENCE_SCHEMA)).as_py()):
        return None
    for name, limit in (("event_id", MAX_ID_CHARS), ("model", MODEL_CHARS), ("version", VERSION_CHARS)):
        if not _strings(column[name], max_chars=limit):  # the store's widths are below the contract's
            return None
    for name in ("model", "version"):
        if not (pc.all(pc.match_substring_regex(column[name], _WHOLE_NAME)).as_py()
                and not pc.any(pc.match_substring(column[name], "..")).as_py()):
            return None
    for name in ("model", "version", "request_id"):  # the store (PostgreSQL) refuses NUL
        if name in column and column[name].type == pa.string() and pc.any(
                pc.match_substring(column[name], "\x00")).as_py():
            return None
    event_time_ms = _event_times(column["ts"])
    if event_time_ms is None or (max_ts_ms is not None and event_time_ms.max() > max_ts_ms):
        return None
    features = _features(column["features"])
    latency = _latency(column["latency_ms"])
    prediction = column["prediction"]
    if features is None or latency is None or prediction.null_count or prediction.type not in _SCALAR_TYPES:
        return None
    status = column.get("status")
    if status is not None and not (_strings(status) and pc.all(pc.equal(status, "ok")).as_py()):
        return None
    request_ids = column.get("request_id")
    if not _optional(request_ids, (pa.string(),), max_chars=REQUEST_ID_CHARS):
        return None
    for name in ("entity_id", "device"):
        if not _optional(column.get(name), (pa.string(),)):
            return None
    roles = column.get("role")
    if not _optional(roles, (pa.string(),)):
        return None
    role_list = roles.to_pylist() if roles is not None and roles.type == pa.string() else [None] * n
    if not all(is_role(role) for role in set(role_list) if role is not None):  # a few distinct roles per poll
        return None
    tags = column.get("tags")
    if tags is not None and tags.null_count != n:
        return None
    inputs = column.get("inputs")
    if inputs is not None and inputs.type != pa.null() and not (
            pa.types.is_struct(inputs.type) and all(child.type in _SCALAR_TYPES or child.type == pa.null()
                                                    for child in inputs.type)):
        return None
    batch_size, cache_hit = column.get("batch_size"), column.get("cache_hit")
    if not _optional(batch_size, (pa.int64(),)) or not _optional(cache_hit, (pa.bool_(),)):
        return None
    if batch_size is not None and batch_size.type == pa.int64():
        sizes = pc.min_max(batch_size).as_py()
        if sizes["min"] is not None and not (_BATCH_SIZE.holds(sizes["min"]) and _BATCH_SIZE.holds(sizes["max"])):
            return None

    ages = _feature_ages(column.get(FEATURE_TS), column.get(FEATURE_AGE_MS), event_time_ms, features[0])
    if ages is False:
        return None
    tokens = _tokens(column, n)
    if tokens is False:
        return None
    decided = column.get(PREDICTED_CLASS)  # the model's decisions: numbers and booleans here, labels event by event
    if not _optional(decided, (pa.bool_(), pa.int64(), pa.float64())):
        return None
    feature_columns, feature_types = features
    predictions = prediction.to_pylist()
    source, prediction_values = prediction_column(predictions)
    event_ids = column["event_id"].to_pylist()
    request_id_list = request_ids.to_pylist() if request_ids is not None else [None] * n
    batch = EventBatch(n=n, features=feature_columns, feature_types=feature_types, absent={},
                       prediction=prediction_values, prediction_source=source, latency_ms=latency,
                       status=np.full(n, "ok", dtype=object), cache_hit=_floats(cache_hit, n),
                       batch_size=_floats(batch_size, n), event_time_ms=event_time_ms,
                       event_ids=np.array(event_ids, dtype=object), events=RawRecords(messages),
                       request_ids=None if request_ids is None else np.array(request_id_list, dtype=object),
                       feature_age_ms=ages, tokens=tokens,
                       decisions=None if decided is None or decided.null_count == n else decision_values(
                           decided.to_pylist()))
    return InferenceColumns(batch=batch, event_ids=event_ids, models=column["model"].to_pylist(),
                            versions=column["version"].to_pylist(), request_ids=request_id_list,
                            predictions=predictions, roles=role_list)


def _first_schema(first: bytes) -> pa.Schema | None:
    """The batch's schema: the first message's, numbers in features, inputs and latency read as float64.

    Read with it, a message with a key the first one lacks is an error at once: inferred,
    a batch whose events each carry new feature names became a struct as wide as all their
    names, with a null for every other event (400 events of 50 unique names: 1.2 s, 340 MB).
    Such a batch goes to the per-event path, which bounds the names (`driftline.window_state`).
    Numbers widen to float64 where both paths count them as floats anyway.
    """
    if first.count(b":") > _FIRST_MAX_COLONS:  # a message of thousands of keys is no columnar batch (nor valid)
        return None
    try:
        schema = pa_json.read_json(pa.py_buffer(first), read_options=_READ_OPTIONS).schema
    except (pa.ArrowException, UnicodeDecodeError, ValueError):
        return None
    return pa.schema([pa.field(f.name, _widened(f.type)) if f.name in _FLOAT_OBJECTS else f for f in schema])


def _widened(kind: pa.DataType) -> pa.DataType:
    if not pa.types.is_struct(kind):
        return kind
    return pa.struct([pa.field(f.name, pa.float64() if f.type == pa.int64() else f.type) for f in kind])


def _finite(array: pa.Array) -> bool:
    """No NaN or infinity in any float column, however deep in structs and lists."""
    kind = array.type
    if pa.types.is_floating(kind):
        return len(array) == array.null_count or pc.all(pc.is_finite(array)).as_py() is not False
    if pa.types.is_struct(kind):
        return all(map(_finite, array.flatten()))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _finite(array.flatten())
    return True


def _strings(array: pa.Array, max_chars: int | None = None) -> bool:
    """Non-null strings, not empty, at most `max_chars` characters."""
    if array.type != pa.string() or array.null_count:
        return False
    if max_chars is None:
        return True
    lengths = pc.utf8_length(array)
    return pc.min(lengths).as_py() >= 1 and pc.max(lengths).as_py() <= max_chars


def _optional(array: pa.Array | None, types: tuple[pa.DataType, ...], max_chars: int | None = None) -> bool:
    """Absent, all null, or of one of `types` (nulls allowed: a null is the same as absent here)."""
    if array is None or array.type == pa.null():
        return True
    if array.type not in types:
        return False
    if max_chars is not None and len(array) > array.null_count:
        return pc.max(pc.utf8_length(array)).as_py() <= max_chars
    return True


def _event_times(ts: pa.Array) -> np.ndarray | None:
    """Epoch ms from "YYYY-MM-DDTHH:MM:SS.mmmZ" strings or epoch-ms integers, as the per-event path reads them."""
    if ts.null_count:
        return None
    if ts.type == pa.int64():
        times = ts.to_numpy()
    elif ts.type == pa.string():
        if not pc.all(pc.string_is_ascii(ts)).as_py() or pc.any(pc.not_equal(pc.utf8_length(ts), 24)).as_py():
            return None
        for position, char in ((16, ":"), (19, "."), (23, "Z")):
            if not pc.all(pc.equal(pc.utf8_slice_codeunits(ts, position, position + 1), char)).as_py():
                return None
        seconds, millis = pc.utf8_slice_codeunits(ts, 17, 19), pc.utf8_slice_codeunits(ts, 20, 23)
        if not (pc.all(pc.ascii_is_decimal(seconds)).as_py() and pc.all(pc.ascii_is_decimal(millis)).as_py()):
            return None
        minutes = pc.dictionary_encode(pc.utf8_slice_codeunits(ts, 0, 16))
        starts = [minute_start_ms(minute) for minute in minutes.dictionary.to_pylist()]
        if None in starts:
            return None
        seconds = pc.cast(seconds, pa.int64()).to_numpy()
        if seconds.max() > 60:
            return None
        times = (np.asarray(starts, dtype=np.int64)[minutes.indices.to_numpy()] + seconds * 1000
                 + pc.cast(millis, pa.int64()).to_numpy())
    else:
        return None
    if times.min() < MIN_TS_MS or times.max() >= MAX_TS_MS:
        return None
    return np.ascontiguousarray(times, dtype=np.int64)


def _features(features: pa.Array) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]] | None:
    """Columns and value types; None for a missing or null feature (absent or null: the per-event path counts which)."""
    if (not pa.types.is_struct(features.type) or features.null_count or features.type.num_fields == 0
            or features.type.num_fields > defaults.EVENT_MAX_FEATURES):
        return None
    n = len(features)
    columns, types = {}, {}
    for field, child in zip(features.type, features.flatten()):
        if child.null_count or child.type not in _SCALAR_TYPES:
            return None
        if child.type in _NUMBER_TYPES:
            columns[field.name] = child.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        else:
            columns[field.name] = child.to_numpy(zero_copy_only=False).astype(object, copy=False)
        types[field.name] = {_JSON_TYPE_NAMES[child.type]: n}
    return columns, types


def _latency(latency: pa.Array) -> dict[str, np.ndarray] | None:
    """Float64 ms per part, "total", "queue" and "compute" always (NaN: not sent)."""
    if not pa.types.is_struct(latency.type) or latency.null_count:
        return None
    n = len(latency)
    parts = {}
    for field, child in zip(latency.type, latency.flatten()):
        if child.null_count or child.type not in _NUMBER_TYPES:
            return None  # a null part is invalid, a missing one is not: only the per-event path tells them apart
        values = child.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if not (_LATENCY.holds(values.min()) and _LATENCY.holds(values.max())):
            return None
        parts[field.name] = values
    if "total" not in parts:
        return None
    out = {part: parts.pop(part, None) for part in ("total", "queue", "compute")}
    out = {part: values if values is not None else np.full(n, np.nan) for part, values in out.items()}
    out.update(parts)
    return out


def _feature_ages(stamps: pa.Array | None, ages: pa.Array | None, event_time_ms: np.ndarray,
                  names: Mapping[str, Any]) -> dict[str, np.ndarray] | None | bool:
    """Ages in ms per feature of `names` (the batch's features) from `feature_ts` (epoch-ms integers) and
    `feature_age_ms` (numbers), as `driftline.window_state.freshness.age_columns` reads them; False sends the
    batch to the per-event path (RFC 3339 strings, a value out of bounds, whatever its name)."""
    out: dict[str, np.ndarray] = {}
    for array, is_time in ((stamps, True), (ages, False)):
        if array is None or array.type == pa.null():
            continue
        if not pa.types.is_struct(array.type) or array.null_count:
            return False
        for field, child in zip(array.type, array.flatten()):
            if child.type == pa.null():
                continue
            if child.type not in ((pa.int64(),) if is_time else _NUMBER_TYPES):
                return False
            given = pc.min_max(child).as_py()  # nulls (messages without the name) skipped
            if given["min"] is not None and not all((_TIMES if is_time else _AGE).holds(given[end])
                                                    for end in ("min", "max")):
                return False
            if field.name not in names:  # checked as the per-event path checks it, then dropped as it drops it
                continue
            values = child.to_numpy(zero_copy_only=False).astype(np.float64)  # NaN where a message lacks it
            if is_time:
                values = np.maximum(event_time_ms - values, 0.0)  # NaN stays NaN
            if is_time or field.name not in out:
                out[field.name] = values
            else:
                out[field.name] = np.where(np.isnan(values), out[field.name], values)
    return out or None


def _tokens(column: dict[str, pa.Array], n: int) -> dict[str, np.ndarray] | None | bool:
    """`tokens_in` / `tokens_out` as float64 counts (NaN where absent), as `driftline.window_state.columns.token_columns`
    reads them; False sends the batch to the per-event path (a count that is no integer or out of bounds)."""
    out = {}
    for name in (TOKENS_IN, TOKENS_OUT):
        array = column.get(name)
        if not _optional(array, (pa.int64(),)):
            return False
        if array is None or array.type == pa.null() or array.null_count == n:
            continue
        low, high = pc.min(array).as_py(), pc.max(array).as_py()
        if not (_TOKENS[name].holds(low) and _TOKENS[name].holds(high)):
            return False
        out[name] = _floats(array, n)
    return out or None


def _floats(array: pa.Array | None, n: int) -> np.ndarray:
    """An optional numeric or boolean column as float64, NaN where absent."""
    if array is None or array.type == pa.null():
        return np.full(n, np.nan)
    # unsafe: an integer past 2**53 rounds to the nearest float, as Python's float() does on the other paths
    return pc.cast(array, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
