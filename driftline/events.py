"""The inference and label event contract (docs/contract.md): bytes in, a typed event or a precise reason out.

This sits on the collector's hot path, so it is hand-written over orjson rather
than built on a general schema library: one dict look-up and one type check per
field, no intermediate model objects (see bench/events.py for the rate).
Unknown fields are kept in `InferenceEvent.raw`, never fatal. The same rules, as JSON
Schema for producers, ship in driftline/schemas/ (`json_schema`); tests check the two agree.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import orjson

from driftline import defaults
from driftline.embeddings.contract import EmbeddingError, check_embeddings
from driftline.json_types import json_type_name
from driftline.names import is_safe_name, name_problem
from driftline.rollouts import is_role
from driftline.value_bounds import MAX_TS_MS, MIN_TS_MS, bound
from driftline.vocabulary import PREDICTED_CLASS

INFERENCE_SCHEMA = "driftline.inference/v1"
LABEL_SCHEMA = "driftline.label/v1"
# A message above this size is dead-lettered unread: a 20-feature event is ~1 KB,
# so 1 MiB leaves room for big raw `inputs` while stopping runaway payloads.
MAX_EVENT_BYTES = 1 << 20
MAX_ID_CHARS = 256
# Widths of the store's model, version, segment and request id columns (migration 0001), part of the
# contract: longer values cannot be stored, so the collector dead-letters them (`collector.folding`).
MODEL_CHARS = 200
VERSION_CHARS = 100
SEGMENT_CHARS = 300  # "column=value": a feature or tag name and one of its values
REQUEST_ID_CHARS = 256
# MIN_TS_MS, MAX_TS_MS: the event-time range, in the bounds table (driftline.value_bounds) with every other bound.
_STATUSES = ("ok", "error")
_SCHEMA_FILES = {"inference": "inference.v1.json", "label": "label.v1.json"}


def json_schema(event: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the "inference" or "label" event, as shipped in the package."""
    if event not in _SCHEMA_FILES:
        raise ValueError(f"no schema for {event!r}; expected one of {', '.join(_SCHEMA_FILES)}")
    return json.loads(resources.files("driftline").joinpath("schemas", _SCHEMA_FILES[event]).read_text("utf-8"))


class EventError(ValueError):
    """Why a message is not a valid event: `reason` in words, `field` the JSON path (None: whole message)."""

    def __init__(self, reason: str, field: str | None = None):
        super().__init__(f"{field}: {reason}" if field else reason)
        self.reason = reason
        self.field = field


@dataclass(slots=True)
class InferenceEvent:
    event_id: str
    ts_ms: int
    model: str
    version: str
    features: dict[str, Any]
    prediction: Any
    latency_ms: dict[str, float]
    status: str
    request_id: str | None
    raw: dict[str, Any]  # the whole decoded message, unknown fields included
    # which part of a rollout answered: production, shadow, canary, arm:<version> (None: not said)
    role: str | None = None

    @property
    def latency_total(self) -> float:
        return self.latency_ms["total"]


@dataclass(slots=True)
class LabelEvent:
    request_id: str
    ts_ms: int
    model: str
    label: Any
    raw: dict[str, Any]


def _decode(raw: bytes | bytearray | memoryview | str) -> dict[str, Any]:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if raw is None or len(raw) == 0:
        raise EventError("empty message")
    if len(raw) > MAX_EVENT_BYTES:
        raise EventError(f"message is {len(raw)} bytes, above the limit of {MAX_EVENT_BYTES}")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EventError(f"not valid UTF-8 JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise EventError(f"expected a JSON object, got {type(doc).__name__}")
    return doc


def _required_str(doc: dict[str, Any], field: str) -> str:
    value = doc.get(field)
    if type(value) is str and 0 < len(value) <= MAX_ID_CHARS:
        return value
    if value is None:
        raise EventError("required field is missing", field)
    if not isinstance(value, str):
        raise EventError(f"expected a string, got {json_type_name(value)}", field)
    if not value:
        raise EventError("must not be empty", field)
    if len(value) > MAX_ID_CHARS:
        raise EventError(f"longer than {MAX_ID_CHARS} characters", field)
    return value


def _optional_str(doc: dict[str, Any], field: str) -> str | None:
    value = doc.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise EventError(f"expected a string, got {json_type_name(value)}", field)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_minute_ms: dict[str, int] = {}


def minute_start_ms(minute: str) -> int | None:
    """Epoch milliseconds of "YYYY-MM-DDTHH:MM" (UTC), cached: the events of one minute share it."""
    start = _minute_ms.get(minute)
    if start is None:
        try:
            start = int(datetime.fromisoformat(minute + ":00+00:00").timestamp()) * 1000
        except ValueError:
            return None
        if len(_minute_ms) > 10_000:  # bounded: a long replay of old data must not grow it forever
            _minute_ms.clear()
        _minute_ms[minute] = start
    return start


def _fast_rfc3339_ms(value: str) -> int | None:
    """"2026-11-30T12:00:00.123Z" without datetime: events of one minute share the cached minute start."""
    if len(value) != 24 or value[23] != "Z" or value[19] != "." or value[16] != ":":
        return None
    start = minute_start_ms(value[:16])
    if start is None:
        return None
    seconds, millis = value[17:19], value[20:23]
    if not (seconds.isdigit() and millis.isdigit()) or seconds > "60":
        return None
    return start + int(seconds) * 1000 + int(millis)


def parse_timestamp(value: Any, field: str = "ts") -> int:
    """Event time as epoch milliseconds, from an RFC 3339 string or epoch milliseconds."""
    if type(value) is str:
        ts_ms = _fast_rfc3339_ms(value)
        if ts_ms is not None and MIN_TS_MS <= ts_ms < MAX_TS_MS:
            return ts_ms
    if value is None:
        raise EventError("required field is missing", field)
    if _is_number(value):
        if not math.isfinite(value):
            raise EventError("must be a finite number of epoch milliseconds", field)
        ts_ms = int(value)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise EventError(f"not an RFC 3339 timestamp: {value[:64]!r}", field) from None
        if parsed.tzinfo is None:
            raise EventError("RFC 3339 timestamp needs a time zone offset or Z", field)
        ts_ms = int(parsed.timestamp() * 1000)
    else:
        raise EventError(f"expected an RFC 3339 string or epoch milliseconds, got {json_type_name(value)}", field)
    if not MIN_TS_MS <= ts_ms < MAX_TS_MS:
        raise EventError(f"{value!r} is outside 2000-2100 (epoch seconds instead of milliseconds?)", field)
    return ts_ms


def _check_schema(doc: dict[str, Any], expected: str) -> None:
    schema = doc.get("schema")
    if schema is None:
        raise EventError("required field is missing", "schema")
    if schema != expected:
        family = expected.split("/")[0]
        if isinstance(schema, str) and schema.startswith(family + "/"):
            raise EventError(f"unsupported schema version {schema!r}; this collector reads {expected!r}", "schema")
        raise EventError(f"expected {expected!r}, got {schema!r}", "schema")


_SCALAR_TYPES = frozenset((float, int, str, bool, type(None)))


def _check_features(features: Any, field: str, decoded: bool = False) -> dict[str, Any]:
    """`decoded`: the dict came from orjson, which never yields NaN or ±inf, so only types need checking."""
    if type(features) is not dict:
        if features is None:
            raise EventError("required field is missing", field)
        raise EventError(f"expected an object of feature values, got {json_type_name(features)}", field)
    # This runs once per event on the hot path: type check in C (set of types), the loop only on failure.
    if _SCALAR_TYPES.issuperset(map(type, features.values())) and (
            decoded or all(math.isfinite(v) for v in features.values() if type(v) is float)):
        return features
    for name, value in features.items():  # slow path: find and name the offending feature
        if value is None or isinstance(value, (str, bool)):
            continue
        if isinstance(value, (int, float)):
            if not math.isfinite(value):
                raise EventError("must be a finite number", f"{field}.{name}")
            continue
        raise EventError(f"expected a number, string, boolean or null, got {json_type_name(value)}", f"{field}.{name}")
    return features


def _check_prediction(value: Any) -> Any:
    if value is None:
        raise EventError("required unless status is \"error\"", "prediction")
    if isinstance(value, (str, bool)):
        return value
    kind = type(value)
    if kind is float or kind is int:
        if value - value != 0:
            raise EventError("must be a finite number", "prediction")
        return value
    if isinstance(value, list):
        if not value:
            raise EventError("class probabilities must not be empty", "prediction")
        for i, p in enumerate(value):
            if not _is_number(p) or not math.isfinite(p):
                raise EventError(f"class probabilities must be finite numbers, got {json_type_name(p)}", f"prediction[{i}]")
        return value
    raise EventError(f"expected a number, class label or list of probabilities, got {json_type_name(value)}", "prediction")


_NUMBER_TYPES = frozenset((float, int))
_LATENCY = bound("latency_ms.*")
_LATENCY_MAX = _LATENCY.high
_BATCH_SIZE = bound("batch_size")
_AGE = bound("feature_age_ms.*")


def _check_latency(value: Any) -> dict[str, float]:
    if type(value) is not dict:
        if value is None:
            raise EventError("required field is missing", "latency_ms")
        raise EventError(f"expected an object with at least \"total\", got {json_type_name(value)}", "latency_ms")
    if "total" not in value:
        raise EventError("required field is missing", "latency_ms.total")
    # the sum is NaN when any part is (min and max step over a NaN that is not first), inf when any is
    if (_NUMBER_TYPES.issuperset(map(type, value.values())) and 0 <= min(value.values())
            and max(value.values()) <= _LATENCY_MAX and sum(value.values()) < math.inf):
        return value
    for part, ms in value.items():
        if not _is_number(ms):
            raise EventError(f"expected a number of milliseconds, got {json_type_name(ms)}", f"latency_ms.{part}")
        if not (0 <= ms < math.inf):
            raise EventError("must be a finite, non-negative number", f"latency_ms.{part}")
        if not _LATENCY.holds(ms):
            raise EventError(_LATENCY.refusal(ms), f"latency_ms.{part}")
    return value


TOKENS_IN = "tokens_in"
TOKENS_OUT = "tokens_out"
_OPTIONAL_FIELDS = frozenset(("entity_id", "device", "inputs", "batch_size", "cache_hit", "tags", "role", "embeddings",
                              TOKENS_IN, TOKENS_OUT, PREDICTED_CLASS))
# `predicted_class`, the model's own decision: a class label as a label is one (a binary model's 1/0 or true/false)
_DECISION_TYPES = frozenset((bool, int, float, str))


def _check_decision(value: Any) -> None:
    if value is None:
        return
    if type(value) not in _DECISION_TYPES:
        raise EventError(f"expected the model's decision (a number, boolean or class label string), got "
                         f"{json_type_name(value)}", PREDICTED_CLASS)
    if type(value) is float and not math.isfinite(value):
        raise EventError("must be a finite number", PREDICTED_CLASS)
    if type(value) is str and not 0 < len(value) <= MAX_ID_CHARS:
        raise EventError(f"a class label of 1 to {MAX_ID_CHARS} characters, got {len(value)}", PREDICTED_CLASS)


_TOKENS = bound(TOKENS_IN)


def is_token_count(value: Any) -> bool:
    """A valid `tokens_in` / `tokens_out`: an integer within their bound, 0 .. `defaults.TOKENS_MAX` (a boolean
    is no count)."""
    return type(value) is int and _TOKENS.low <= value <= _TOKENS.high


def _check_tokens(doc: dict[str, Any]) -> None:
    for field in (TOKENS_IN, TOKENS_OUT):
        value = doc.get(field)
        if value is None or is_token_count(value):
            continue
        if type(value) is not int:
            raise EventError(f"expected a whole number of tokens, got {json_type_name(value)} {str(value)[:32]}",
                             field)
        raise EventError(bound(field).refusal(value), field)


def _check_optional(doc: dict[str, Any], decoded: bool) -> None:
    if _OPTIONAL_FIELDS.isdisjoint(doc):
        return
    for field in ("entity_id", "device"):
        _optional_str(doc, field)
    inputs = doc.get("inputs")
    if inputs is not None:
        _check_features(inputs, "inputs", decoded)
    batch_size = doc.get("batch_size")
    if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
        raise EventError("expected a positive integer", "batch_size")
    if batch_size is not None and batch_size > _BATCH_SIZE.high:
        raise EventError(_BATCH_SIZE.refusal(batch_size), "batch_size")
    _check_tokens(doc)
    cache_hit = doc.get("cache_hit")
    if cache_hit is not None and type(cache_hit) is not bool:
        raise EventError(f"expected a boolean, got {json_type_name(cache_hit)}", "cache_hit")
    _check_decision(doc.get(PREDICTED_CLASS))
    role = _optional_str(doc, "role")
    if role is not None and not is_role(role):
        raise EventError(f"expected production, shadow, canary or arm:<version>, got {role[:64]!r}", "role")
    embeddings = doc.get("embeddings")
    if embeddings is not None:
        try:
            check_embeddings(embeddings, decoded)
        except EmbeddingError as exc:
            raise EventError(exc.reason, exc.field) from None
    tags = doc.get("tags")
    if tags is not None:
        if type(tags) is not dict:
            raise EventError(f"expected an object of strings, got {json_type_name(tags)}", "tags")
        for key, val in tags.items():
            if type(val) is not str:
                raise EventError(f"expected a string, got {json_type_name(val)}", f"tags.{key}")


def _name(doc: dict[str, Any], field: str) -> str:
    """A model or version name in the safe alphabet (driftline.names): it becomes a store key and a label."""
    value = _required_str(doc, field)
    problem = name_problem(value)
    if problem is not None:
        raise EventError(problem, field)
    return value


def check_not_future(ts_ms: int, max_ts_ms: int | None, field: str = "ts") -> None:
    """`max_ts_ms`: the reader's clock plus the skew it allows (None: no bound beyond MAX_TS_MS)."""
    if max_ts_ms is not None and ts_ms > max_ts_ms:
        raise EventError(f"{rfc3339(ts_ms)} is in the future: later than {rfc3339(max_ts_ms)}, the collector's "
                         "clock plus the allowed skew", field)


def validate_inference(doc: dict[str, Any], decoded: bool = False, max_ts_ms: int | None = None) -> InferenceEvent:
    """Check a message against the inference event contract (`decoded`: `doc` came straight from orjson;
    `max_ts_ms`: the latest event time accepted, see `check_not_future`)."""
    _check_schema(doc, INFERENCE_SCHEMA)
    event_id = _required_str(doc, "event_id")
    ts_ms = parse_timestamp(doc.get("ts"))
    check_not_future(ts_ms, max_ts_ms)
    model = _name(doc, "model")
    version = _name(doc, "version")
    features = _check_features(doc.get("features"), "features", decoded)
    if len(features) > defaults.EVENT_MAX_FEATURES:  # each name becomes a feature window: bounded per event
        raise EventError(f"{len(features)} features, above the limit of {defaults.EVENT_MAX_FEATURES}", "features")
    latency = _check_latency(doc.get("latency_ms"))
    status = doc.get("status", "ok")
    if status not in _STATUSES:
        raise EventError(f"expected \"ok\" or \"error\", got {status!r}", "status")
    if status == "error":
        error = doc.get("error")
        if not isinstance(error, str) or not error:
            raise EventError("an event with status \"error\" needs an error message string", "error")
        prediction = doc.get("prediction")
        if prediction is not None:
            _check_prediction(prediction)
    else:
        prediction = _check_prediction(doc.get("prediction"))
    request_id = _optional_str(doc, "request_id")
    _check_optional(doc, decoded)
    check_freshness(doc)
    return InferenceEvent(event_id, ts_ms, model, version, features, prediction, latency, status, request_id, doc,
                          doc.get("role"))


_STR_OR_NONE = frozenset((str, type(None)))
_FAST_PREDICTION_TYPES = frozenset((float, int, str, bool))


def _fast_inference(doc: dict[str, Any], max_ts_ms: int | None = None) -> InferenceEvent | None:
    """The common valid event in one function, no per-field calls; None sends it to the precise checks.

    Every condition here is also checked by validate_inference, which names the failure;
    this path only decides faster that there is none (orjson never yields NaN or ±inf).
    """
    get = doc.get
    event_id, model, version = get("event_id"), get("model"), get("version")
    if (type(event_id) is not str or type(model) is not str or type(version) is not str
            or get("schema") != INFERENCE_SCHEMA or not event_id or not model or not version
            or len(event_id) > MAX_ID_CHARS or not is_safe_name(model) or not is_safe_name(version)):
        return None
    ts = get("ts")
    kind = type(ts)
    if kind is str:
        ts_ms = _fast_rfc3339_ms(ts)
        if ts_ms is None:
            return None
    elif kind is int:
        ts_ms = ts
    else:
        return None
    if not MIN_TS_MS <= ts_ms < MAX_TS_MS or (max_ts_ms is not None and ts_ms > max_ts_ms):
        return None
    features, latency, prediction = get("features"), get("latency_ms"), get("prediction")
    if (type(features) is not dict or len(features) > defaults.EVENT_MAX_FEATURES
            or not _SCALAR_TYPES.issuperset(map(type, features.values()))
            or type(latency) is not dict or "total" not in latency
            or not _NUMBER_TYPES.issuperset(map(type, latency.values())) or min(latency.values()) < 0
            or max(latency.values()) > _LATENCY_MAX
            or type(prediction) not in _FAST_PREDICTION_TYPES or get("status", "ok") != "ok"):
        return None
    request_id, inputs, batch_size, cache_hit = get("request_id"), get("inputs"), get("batch_size"), get("cache_hit")
    if ((type(request_id) not in _STR_OR_NONE) or (type(get("entity_id")) not in _STR_OR_NONE)
            or (type(get("device")) not in _STR_OR_NONE) or get("tags") is not None
            or (inputs is not None and (type(inputs) is not dict
                                        or not _SCALAR_TYPES.issuperset(map(type, inputs.values()))))
            or (batch_size is not None and (type(batch_size) is not int or not 1 <= batch_size <= _BATCH_SIZE.high))
            or (cache_hit is not None and type(cache_hit) is not bool) or get("embeddings") is not None):
        return None
    role, decision = get("role"), get(PREDICTED_CLASS)
    if role is not None and (type(role) is not str or not is_role(role)):
        return None
    if decision is not None and (type(decision) not in _DECISION_TYPES
                                 or (type(decision) is str and not 0 < len(decision) <= MAX_ID_CHARS)):
        return None
    tokens_in, tokens_out = get(TOKENS_IN), get(TOKENS_OUT)
    if (tokens_in is not None and not is_token_count(tokens_in)) or (
            tokens_out is not None and not is_token_count(tokens_out)):
        return None
    if get(FEATURE_TS) is not None or get(FEATURE_AGE_MS) is not None:
        try:
            check_freshness(doc)
        except EventError:
            return None
    return InferenceEvent(event_id, ts_ms, model, version, features, prediction, latency, "ok", request_id, doc, role)


FEATURE_TS = "feature_ts"
FEATURE_AGE_MS = "feature_age_ms"


def check_freshness(doc: dict[str, Any]) -> None:
    """The optional feature-freshness fields: `feature_ts` (feature -> event time of its value, RFC 3339 or
    epoch ms) and `feature_age_ms` (feature -> age in ms within its bound, `driftline.value_bounds`), at most
    EVENT_MAX_FEATURES each."""
    stamps, ages = doc.get(FEATURE_TS), doc.get(FEATURE_AGE_MS)
    for field, values in ((FEATURE_TS, stamps), (FEATURE_AGE_MS, ages)):
        if values is None:
            continue
        if type(values) is not dict:
            raise EventError(f"expected an object of feature names, got {json_type_name(values)}", field)
        if len(values) > defaults.EVENT_MAX_FEATURES:
            raise EventError(f"{len(values)} features, above the limit of {defaults.EVENT_MAX_FEATURES}", field)
    for name, value in (stamps or {}).items():
        parse_timestamp(value, f"{FEATURE_TS}.{name}")
    for name, value in (ages or {}).items():
        if not _is_number(value) or not 0 <= value < math.inf:
            raise EventError(f"expected a finite, non-negative number of milliseconds, got {json_type_name(value)} "
                             f"{str(value)[:32]}", f"{FEATURE_AGE_MS}.{name}")
        if not _AGE.holds(value):
            raise EventError(_AGE.refusal(value), f"{FEATURE_AGE_MS}.{name}")


def parse_inference(raw: bytes | bytearray | memoryview | str, max_ts_ms: int | None = None) -> InferenceEvent:
    """Decode and validate one inference event; raises EventError with the reason and field.

    `max_ts_ms`: the latest event time accepted (the collector's clock plus its allowed skew).
    """
    if type(raw) is bytes and 0 < len(raw) <= MAX_EVENT_BYTES:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if type(doc) is dict:
            event = _fast_inference(doc, max_ts_ms)
            if event is not None:
                return event
            return validate_inference(doc, decoded=True, max_ts_ms=max_ts_ms)
    return validate_inference(_decode(raw), decoded=True, max_ts_ms=max_ts_ms)


def parse_label(raw: bytes | bytearray | memoryview | str) -> LabelEvent:
    """Decode and validate one label event."""
    doc = _decode(raw)
    _check_schema(doc, LABEL_SCHEMA)
    request_id = _required_str(doc, "request_id")
    ts_ms = parse_timestamp(doc.get("ts"))
    model = _name(doc, "model")
    if "label" not in doc or doc["label"] is None:
        raise EventError("required field is missing", "label")
    label = doc["label"]
    if not (isinstance(label, (str, bool)) or (_is_number(label) and math.isfinite(label))):
        raise EventError(f"expected a number, boolean or class label string, got {json_type_name(label)}", "label")
    return LabelEvent(request_id, ts_ms, model, label, doc)


def encode_event(event: dict[str, Any]) -> bytes:
    """Serialise an event for Kafka (UTF-8 JSON; numpy scalars allowed)."""
    return orjson.dumps(event, option=orjson.OPT_SERIALIZE_NUMPY)


def rfc3339(ts_ms: int | float | None = None) -> str:
    """Epoch milliseconds (default: now) as an RFC 3339 UTC string with milliseconds."""
    when = datetime.now(timezone.utc) if ts_ms is None else datetime.fromtimestamp(ts_ms / 1000, timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
