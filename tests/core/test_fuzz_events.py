"""Property tests: every event decoding path agrees on every generated message, valid or not.

Paths: the precise validator (`validate_inference` after `_decode`), `parse_inference` (its
fast path first), and the columnar decoder the collector tries first
(`parse_inference_columns`, which may only accept what the others accept, with the same values).
"""
from __future__ import annotations

import pytest

import math
import time

import numpy as np
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftline.collector.event_columns import parse_inference_columns
from driftline.events import EventError, _decode, _fast_inference, parse_inference, validate_inference
from driftline.value_bounds import INFERENCE_BOUNDS, REFUSE
from driftline.window_state import EventBatch

NOW_MS = int(time.time() * 1000)
LATENCY_MAX = INFERENCE_BOUNDS["latency_ms.*"].high
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e200, -1e300, 1.7976931348623157e308, 5e-324, 1e50, 1e51]),
    st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1),
)
texts = st.one_of(st.text(max_size=20), st.sampled_from(["", "NaN", "Infinity", "..", "a/b", "x\x00y", "é", "💥"]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3))
names = st.one_of(st.sampled_from(["credit", "m-1.2_x", "3", "../../x", "a b", "", "a..b", ".hidden", "x" * 129]),
                  st.text(max_size=12), st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1))
timestamps = st.one_of(st.integers(min_value=NOW_MS - 10 ** 10, max_value=NOW_MS + 10 ** 10),
                       st.sampled_from(["2026-11-30T12:00:00.123Z", "2026-11-30T12:00:00Z", "yesterday", 1.5e12,
                                        4_102_444_800_000, 946_684_799_999]),
                       values)


safe_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
wild = {"schema": st.sampled_from(["driftline.inference/v2", "x", None]), "event_id": st.one_of(texts, numbers),
        "ts": timestamps, "model": names, "version": names, "features": values,
        "prediction": st.one_of(values, st.lists(numbers, max_size=3)), "latency_ms": values,
        "status": st.sampled_from(["ok", "error", "meh"]), "error": texts, "request_id": st.one_of(texts, numbers),
        "batch_size": numbers, "cache_hit": scalars, "tags": values, "inputs": values,
        "role": st.one_of(st.sampled_from(["production", "shadow", "canary", "arm:3", "arm:", "arm:../x", "Canary"]),
                          scalars)}


@st.composite
def documents(draw) -> dict:
    """A valid event (extreme but legal values included), then sometimes one field made wild or dropped."""
    doc = {"schema": "driftline.inference/v1", "event_id": draw(st.uuids()).hex,
           "ts": draw(st.integers(min_value=NOW_MS - 10 ** 9, max_value=NOW_MS)), "model": draw(safe_names),
           "version": draw(st.sampled_from(["1", "2", "v3.1"])),
           "features": draw(st.dictionaries(st.sampled_from(["x", "y", "c", "é"]), scalars, min_size=1, max_size=4)),
           "prediction": draw(st.one_of(numbers, st.sampled_from(["yes", "no"]), st.booleans())),
           "latency_ms": {"total": draw(st.one_of(st.floats(min_value=0, max_value=LATENCY_MAX),
                                                  st.integers(min_value=0, max_value=LATENCY_MAX),
                                                  # past the bound (every path refuses those alike)
                                                  st.sampled_from([LATENCY_MAX + 1, 1e300, 2 ** 63 - 1])))}}
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(wild)))
        if draw(st.integers(0, 4)) == 0:
            doc.pop(key, None)
        else:
            doc[key] = draw(wild[key])
    return doc


# Text-level mutations JSON encoders never write but a producer can: literals orjson refuses,
# numbers beyond a double or a 64-bit integer, lone surrogates, deep nesting, invalid UTF-8.
MUTATIONS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"123456789012345678901234567890", b'"\\ud800"',
             b'"\\udfff"', b"[" * 600 + b"]" * 600, b'"\xff"', b"1e-400", b"-0", b"[]", b"{}"]


@st.composite
def messages(draw) -> bytes:
    raw = orjson.dumps(draw(documents()))
    if draw(st.integers(0, 2)) == 0:
        target = draw(st.sampled_from([b'"x":', b'"prediction":', b'"total":', b'"ts":', b'"model":']))
        at = raw.find(target)
        if at >= 0:
            start = at + len(target)
            end = start
            depth = 0
            while end < len(raw) and (depth or raw[end:end + 1] not in (b",", b"}")):
                depth += raw[end:end + 1] in (b"[", b"{")
                depth -= raw[end:end + 1] in (b"]", b"}")
                end += 1
            raw = raw[:start] + draw(st.sampled_from(MUTATIONS)) + raw[end:]
    return raw


def _precise(raw: bytes, max_ts_ms: int | None):
    try:
        return validate_inference(_decode(raw), decoded=True, max_ts_ms=max_ts_ms)
    except EventError as error:
        return (error.reason, error.field)


def _fields(event) -> tuple:
    return (event.event_id, event.ts_ms, event.model, event.version, event.features, event.prediction,
            event.latency_ms, event.status, event.request_id, event.role)


@SETTINGS
@given(messages(), st.sampled_from([None, NOW_MS + 3_600_000]))
def test_every_decoding_path_agrees_on_every_message(raw, max_ts_ms):
    precise = _precise(raw, max_ts_ms)
    try:
        parsed = parse_inference(raw, max_ts_ms)
    except EventError as error:
        parsed = (error.reason, error.field)
    if isinstance(precise, tuple):
        assert parsed == precise
    else:
        assert not isinstance(parsed, tuple), parsed
        assert _fields(parsed) == _fields(precise)
        fast = _fast_inference(orjson.loads(raw), max_ts_ms)
        assert fast is None or _fields(fast) == _fields(precise)
    columns = parse_inference_columns([raw], max_ts_ms)
    if columns is None:
        return
    assert not isinstance(precise, tuple), f"the columnar path accepted what the validator refuses: {precise}"
    assert (columns.event_ids[0], columns.models[0], columns.versions[0]) == (
        precise.event_id, precise.model, precise.version)
    assert int(columns.batch.event_time_ms[0]) == precise.ts_ms
    assert columns.request_ids[0] == precise.request_id
    assert columns.roles[0] == precise.role
    _assert_same_columns(columns.batch, EventBatch.from_events([precise]))


def _assert_same_columns(mine: EventBatch, theirs: EventBatch) -> None:
    assert mine.features.keys() == theirs.features.keys()
    for name, column in mine.features.items():
        other = theirs.features[name]
        if column.dtype == np.float64 or other.dtype == np.float64:
            np.testing.assert_array_equal(column.astype(np.float64), other.astype(np.float64))
        else:
            assert column.tolist() == other.tolist()
        assert mine.feature_types[name] == theirs.feature_types[name]
    np.testing.assert_array_equal(np.asarray(mine.prediction, dtype=object).astype(str),
                                  np.asarray(theirs.prediction, dtype=object).astype(str))
    for part in ("total", "queue", "compute"):
        np.testing.assert_array_equal(mine.latency_ms[part], theirs.latency_ms[part])


@SETTINGS
@given(st.lists(messages(), min_size=2, max_size=6))
def test_a_columnar_batch_is_accepted_only_when_every_message_is_valid(raws):
    columns = parse_inference_columns(raws, NOW_MS + 3_600_000)
    if columns is None:
        return
    events = [_precise(raw, NOW_MS + 3_600_000) for raw in raws]
    assert not any(isinstance(e, tuple) for e in events), events
    assert columns.event_ids == [e.event_id for e in events]
    assert all(math.isfinite(v) for column in columns.batch.features.values() if column.dtype == np.float64
               for v in column.tolist())


# --- Cases generated from the shipped JSON Schema (driftline/schemas) ------------------------------
# What the schema accepts, every path accepts with the same fields; what it refuses, every path refuses.

def _legacy_many_for_hypothesis_jsonschema() -> None:
    """hypothesis-jsonschema 0.23 drives Hypothesis's private `many` as `while elements.more()`,
    which current Hypothesis replaced by iteration; give it the old calls over the new object."""
    import types

    import hypothesis_jsonschema._from_schema as from_schema_module
    from hypothesis.internal.conjecture import utils as conjecture_utils

    if hasattr(conjecture_utils.many, "more"):
        return

    class LegacyMany:
        def __init__(self, *args, **kwargs):
            self._many = conjecture_utils.many(*args, **kwargs)
            self._many.__enter__()
            self._steps = iter(self._many)

        def more(self) -> bool:
            if next(self._steps, False) is None:
                return True
            self._many.__exit__(None, None, None)
            return False

        def reject(self, why=None) -> None:
            self._many.reject(why)

    from_schema_module.cu = types.SimpleNamespace(many=LegacyMany)


_legacy_many_for_hypothesis_jsonschema()

import copy  # noqa: E402
from datetime import datetime  # noqa: E402

import jsonschema  # noqa: E402
from hypothesis import assume  # noqa: E402
from hypothesis_jsonschema import from_schema  # noqa: E402

from driftline.events import (INFERENCE_SCHEMA, LABEL_SCHEMA, MAX_ID_CHARS, MAX_TS_MS, MIN_TS_MS,  # noqa: E402
                              json_schema, parse_label)
from driftline.names import NAME_PATTERN  # noqa: E402

INFERENCE_JSON_SCHEMA = json_schema("inference")
LABEL_JSON_SCHEMA = json_schema("label")
SCHEMA_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
_inference_validator = jsonschema.Draft202012Validator(INFERENCE_JSON_SCHEMA)
_label_validator = jsonschema.Draft202012Validator(LABEL_JSON_SCHEMA)


def _common_shape() -> dict:
    """The inference schema narrowed to the shape the fast and columnar paths take (status "ok", a scalar
    prediction, no tags, integer or ".mmmZ" times); the full schema alone almost never reaches them."""
    schema = copy.deepcopy(INFERENCE_JSON_SCHEMA)
    for key in ("if", "then", "else"):  # implied by status "ok" and a required, non-null prediction
        del schema[key]
    ms_z = r"^20(0[1-9]|[1-8][0-9]|9[0-8])-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9][.][0-9]{3}Z$"
    schema["properties"].update(
        status={"const": "ok"}, prediction={"type": ["number", "string", "boolean"]}, tags={"type": "null"},
        ts={"anyOf": [{"type": "integer", "minimum": MIN_TS_MS, "exclusiveMaximum": MAX_TS_MS},
                      {"type": "string", "pattern": ms_z}]})
    schema["required"] = [*schema["required"], "status", "prediction"]
    return schema


# Built once: turning a schema into a strategy is the slow part.
inference_events = from_schema(INFERENCE_JSON_SCHEMA, codec="utf-8")
common_inference_events = from_schema(_common_shape(), codec="utf-8")
label_events = from_schema(LABEL_JSON_SCHEMA, codec="utf-8")


def test_the_schemas_state_the_decoders_constants():
    for schema, title in ((INFERENCE_JSON_SCHEMA, INFERENCE_SCHEMA), (LABEL_JSON_SCHEMA, LABEL_SCHEMA)):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["title"] == schema["properties"]["schema"]["const"] == title
        defs = schema["$defs"]
        assert defs["id"]["maxLength"] == MAX_ID_CHARS
        assert defs["name"]["pattern"] == f"^{NAME_PATTERN}$"
        number = defs["timestamp"]["anyOf"][1]
        assert (number["minimum"], number["exclusiveMaximum"]) == (MIN_TS_MS, MAX_TS_MS)
    # the label schema carries its own copy of the shared definitions: they must not drift apart
    assert LABEL_JSON_SCHEMA["$defs"] == {k: INFERENCE_JSON_SCHEMA["$defs"][k] for k in LABEL_JSON_SCHEMA["$defs"]}
    assert sorted(INFERENCE_JSON_SCHEMA["required"]) == sorted(
        ["schema", "event_id", "ts", "model", "version", "features", "latency_ms"])


def _encodable(doc: dict) -> bytes:
    """The generated event as bytes; rules the schema cannot state (docs/contract.md) are assumed away."""
    try:
        raw = orjson.dumps(doc)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: not a JSON number orjson reads
        assume(False)
    ts = doc.get("ts")
    if isinstance(ts, str) and ts.startswith("20"):  # a calendar date (no 31 April): datetime decides
        try:
            datetime.fromisoformat(ts)
        except ValueError:
            assume(False)
    return raw


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
@SCHEMA_SETTINGS
@given(st.one_of(inference_events, common_inference_events))
def test_every_schema_valid_inference_event_is_accepted_by_every_path(doc):
    raw = _encodable(doc)
    _inference_validator.validate(doc)  # the shipped schema, also for the narrowed cases
    precise = _precise(raw, None)
    assert not isinstance(precise, tuple), precise
    assert precise.raw == orjson.loads(raw)  # unknown fields kept
    assert _fields(parse_inference(raw)) == _fields(precise)
    fast = _fast_inference(orjson.loads(raw))
    assert fast is None or _fields(fast) == _fields(precise)
    columns = parse_inference_columns([raw], None)
    if columns is not None:
        assert (columns.event_ids[0], columns.models[0], columns.versions[0], columns.request_ids[0],
                columns.roles[0]) == (precise.event_id, precise.model, precise.version, precise.request_id,
                                      precise.role)
        assert int(columns.batch.event_time_ms[0]) == precise.ts_ms
        _assert_same_columns(columns.batch, EventBatch.from_events([precise]))


@SCHEMA_SETTINGS
@given(label_events)
def test_every_schema_valid_label_event_is_accepted(doc):
    raw = _encodable(doc)
    _label_validator.validate(doc)
    label = parse_label(raw)
    assert (label.request_id, label.model, label.label) == (doc["request_id"], doc["model"], doc["label"])
    assert label.raw == orjson.loads(raw)


UNSAFE_NAMES = ["", "../x", "a/b", "a b", ".hidden", "a..b", "x" * 129, "é", "tab\t", 7]
OUT_OF_RANGE_TS = [1_700_000_000, MIN_TS_MS - 1, MAX_TS_MS, 1e300, "1999-12-31T23:59:59Z",
                   "2026-11-30T12:00:00", "2026-11-30", "yesterday", True, None]
WRONG_TYPES = {"event_id": [5, "", "x" * (MAX_ID_CHARS + 1), None], "features": [[1.0], "x", {"a": [1]}, {"a": {}}],
               "latency_ms": [5, {}, {"total": -1}, {"total": "5"}], "prediction": [{"p": 1}, [], ["a"]],
               "status": ["meh", None], "batch_size": [0, "2", 1.5], "cache_hit": ["yes", 1],
               "tags": [{"a": 1}, ["a"]], "inputs": [[1], {"a": [1]}], "request_id": [5],
               "entity_id": [5], "device": [False], "role": [5, "", "Production", "arm:", "arm:a/b"], "schema": ["driftline.inference/v2", LABEL_SCHEMA, None]}


# A value past a dead-letter bound of the bounds table (driftline/value_bounds.py), by its path.
def _past(bound) -> list:
    return [bound.high + 1, bound.high * 10, -1, bound.low - 1] if bound.low >= 0 else [bound.high * 2, bound.low * 2]


PAST_BOUNDS = {
    "latency_ms.*": lambda v: {"latency_ms": {"total": v}}, "tokens_in": lambda v: {"tokens_in": int(v)},
    "tokens_out": lambda v: {"tokens_out": int(v)}, "batch_size": lambda v: {"batch_size": int(v)},
    "feature_age_ms.*": lambda v: {"feature_age_ms": {"x": v}}, "feature_ts.*": lambda v: {"feature_ts": {"x": int(v)}},
    "embeddings.*[]": lambda v: {"embeddings": {"e": [0.5, v]}}, "ts": lambda v: {"ts": int(v)},
}
assert set(PAST_BOUNDS) == {path for path, b in INFERENCE_BOUNDS.items() if b.beyond == REFUSE}


@st.composite
def invalid_inference_events(draw) -> dict:
    """A schema-valid event with one mutation: a required field dropped, a wrong type, a bad ts or name, a value past
    its bound."""
    doc = dict(draw(st.one_of(inference_events, common_inference_events)))
    kind = draw(st.sampled_from(["drop", "type", "ts", "name", "bound"]))
    if kind == "drop":
        required = list(INFERENCE_JSON_SCHEMA["required"])
        required.append("error" if doc.get("status") == "error" else "prediction")
        doc.pop(draw(st.sampled_from(required)))
    elif kind == "type":
        field = draw(st.sampled_from(sorted(WRONG_TYPES)))
        doc[field] = draw(st.sampled_from(WRONG_TYPES[field]))
    elif kind == "ts":
        doc["ts"] = draw(st.sampled_from(OUT_OF_RANGE_TS))
    elif kind == "bound":
        path = draw(st.sampled_from(sorted(PAST_BOUNDS)))
        bound = INFERENCE_BOUNDS[path]
        doc.update(PAST_BOUNDS[path](draw(st.sampled_from(_past(bound) if not bound.high_open else
                                                          [bound.high, bound.low - 1]))))
    else:
        doc[draw(st.sampled_from(["model", "version"]))] = draw(st.sampled_from(UNSAFE_NAMES))
    return doc


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
@SCHEMA_SETTINGS
@given(invalid_inference_events())
def test_every_mutated_inference_event_is_refused_by_the_schema_and_every_path(doc):
    raw = _encodable(doc)
    assert not _inference_validator.is_valid(doc)
    assert isinstance(_precise(raw, None), tuple)
    try:
        parse_inference(raw)
    except EventError:
        pass
    else:
        raise AssertionError(f"parse_inference accepted {doc}")
    assert _fast_inference(orjson.loads(raw)) is None
    assert parse_inference_columns([raw], None) is None


@SCHEMA_SETTINGS
@given(label_events, st.data())
def test_every_mutated_label_event_is_refused_by_the_schema_and_the_decoder(doc, data):
    doc = dict(doc)
    kind = data.draw(st.sampled_from(["drop", "label", "ts", "name", "request_id"]))
    if kind == "drop":
        doc.pop(data.draw(st.sampled_from(LABEL_JSON_SCHEMA["required"])))
    elif kind == "label":
        doc["label"] = data.draw(st.sampled_from([None, [1], {"a": 1}]))
    elif kind == "ts":
        doc["ts"] = data.draw(st.sampled_from(OUT_OF_RANGE_TS))
    elif kind == "name":
        doc["model"] = data.draw(st.sampled_from(UNSAFE_NAMES))
    else:
        doc["request_id"] = data.draw(st.sampled_from(WRONG_TYPES["event_id"]))
    assert not _label_validator.is_valid(doc)
    try:
        parse_label(_encodable(doc))
    except EventError:
        pass
    else:
        raise AssertionError(f"parse_label accepted {doc}")
