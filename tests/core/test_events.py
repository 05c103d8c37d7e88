"""The event contract validator: valid events pass with their fields; each malformed kind names its reason."""
from __future__ import annotations

import math

import orjson
import pytest

from driftline.events import (INFERENCE_SCHEMA, LABEL_SCHEMA, MAX_EVENT_BYTES, EventError, encode_event,
                              parse_inference, parse_label, rfc3339)


def valid_event(**overrides):
    event = {
        "schema": INFERENCE_SCHEMA, "event_id": "e-1", "request_id": "r-1", "ts": "2026-11-30T12:00:00.123Z",
        "model": "credit-default", "version": "3",
        "features": {"income": 5300.0, "region": "north", "age": None, "n": 3, "flag": True},
        "prediction": 0.83, "latency_ms": {"total": 12.3, "queue": 4.1, "compute": 7.9}, "status": "ok",
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not _DROP}


_DROP = object()


def test_valid_event_is_parsed_with_its_fields():
    event = parse_inference(encode_event(valid_event()))
    assert event.event_id == "e-1"
    assert event.request_id == "r-1"
    assert event.ts_ms == 1796040000123
    assert (event.model, event.version) == ("credit-default", "3")
    assert event.features["region"] == "north" and event.features["age"] is None
    assert event.prediction == 0.83
    assert event.latency_total == 12.3
    assert event.status == "ok"


def test_epoch_milliseconds_and_offsets_are_the_same_instant():
    a = parse_inference(encode_event(valid_event(ts=1796040000123)))
    b = parse_inference(encode_event(valid_event(ts="2026-11-30T13:00:00.123+01:00")))
    assert a.ts_ms == b.ts_ms == 1796040000123


@pytest.mark.parametrize("prediction", [1, "approve", True, [0.2, 0.8], 0.0])
def test_prediction_kinds(prediction):
    assert parse_inference(encode_event(valid_event(prediction=prediction))).prediction == prediction


def test_unknown_fields_are_kept_and_optional_fields_accepted():
    raw = encode_event(valid_event(extra={"nested": [1, 2]}, entity_id="c-9", inputs={"income_k": 5.3},
                                   batch_size=8, cache_hit=False, device="cpu", tags={"region": "eu"}))
    event = parse_inference(raw)
    assert event.raw["extra"] == {"nested": [1, 2]}
    assert event.raw["inputs"] == {"income_k": 5.3}


def test_error_status_needs_no_prediction():
    event = parse_inference(encode_event(valid_event(status="error", error="CUDA OOM", prediction=_DROP)))
    assert event.status == "error" and event.prediction is None


def test_rfc3339_round_trip():
    assert parse_inference(encode_event(valid_event(ts=rfc3339(1796040000123)))).ts_ms == 1796040000123


MALFORMED = [
    # (id, raw bytes, expected field, a fragment of the reason)
    ("empty", b"", None, "empty"),
    ("broken-json", b'{"schema": "driftline.inference/v1", ', None, "JSON"),
    ("binary-garbage", bytes(range(256)) * 4, None, "JSON"),
    ("json-array", b"[1, 2, 3]", None, "object"),
    ("json-string", b'"hello"', None, "object"),
    ("nan-literal", b'{"prediction": NaN}', None, "JSON"),
    ("huge-payload", b'{"x": "' + b"a" * (MAX_EVENT_BYTES + 10) + b'"}', None, "limit"),
    ("missing-schema", valid_event(schema=_DROP), "schema", "missing"),
    ("unknown-schema-version", valid_event(schema="driftline.inference/v9"), "schema", "unsupported schema version"),
    ("foreign-schema", valid_event(schema="something/else"), "schema", "expected"),
    ("missing-event-id", valid_event(event_id=_DROP), "event_id", "missing"),
    ("event-id-number", valid_event(event_id=123), "event_id", "string"),
    ("empty-event-id", valid_event(event_id=""), "event_id", "empty"),
    ("missing-ts", valid_event(ts=_DROP), "ts", "missing"),
    ("ts-garbage", valid_event(ts="yesterday"), "ts", "RFC 3339"),
    ("ts-naive", valid_event(ts="2026-11-30T12:00:00"), "ts", "time zone"),
    ("ts-in-seconds", valid_event(ts=1796040000), "ts", "2000-2100"),
    ("ts-bool", valid_event(ts=True), "ts", "boolean"),
    ("missing-model", valid_event(model=_DROP), "model", "missing"),
    ("model-number", valid_event(model=7), "model", "string"),
    ("version-int", valid_event(version=3), "version", "string"),
    ("missing-features", valid_event(features=_DROP), "features", "missing"),
    ("features-list", valid_event(features=[1, 2]), "features", "object"),
    ("feature-nested", valid_event(features={"income": {"v": 1}}), "features.income", "got object"),
    ("feature-list", valid_event(features={"income": [1]}), "features.income", "got array"),
    ("feature-infinite-literal", b'{"schema": "driftline.inference/v1", "features": {"x": 1e999}}', None, "infinity"),
    ("feature-bool-list", valid_event(features={"flags": [True]}), "features.flags", "got array"),
    ("missing-latency", valid_event(latency_ms=_DROP), "latency_ms", "missing"),
    ("latency-number", valid_event(latency_ms=12.0), "latency_ms", "object"),
    ("latency-no-total", valid_event(latency_ms={"queue": 1.0}), "latency_ms.total", "missing"),
    ("latency-negative", valid_event(latency_ms={"total": -1.0}), "latency_ms.total", "non-negative"),
    ("latency-string", valid_event(latency_ms={"total": "12ms"}), "latency_ms.total", "number"),
    ("missing-prediction", valid_event(prediction=_DROP), "prediction", "required"),
    ("prediction-object", valid_event(prediction={"p": 1}), "prediction", "got object"),
    ("prediction-empty-list", valid_event(prediction=[]), "prediction", "empty"),
    ("prediction-bad-proba", valid_event(prediction=[0.5, "x"]), "prediction[1]", "finite numbers"),
    ("bad-status", valid_event(status="maybe"), "status", "ok"),
    ("error-without-message", valid_event(status="error"), "error", "error message"),
    ("batch-size-zero", valid_event(batch_size=0), "batch_size", "positive integer"),
    ("cache-hit-string", valid_event(cache_hit="yes"), "cache_hit", "boolean"),
    ("tags-non-string", valid_event(tags={"a": 1}), "tags.a", "string"),
    ("inputs-nested", valid_event(inputs={"a": {"b": 1}}), "inputs.a", "got object"),
    ("request-id-number", valid_event(request_id=5), "request_id", "string"),
]


@pytest.mark.parametrize("raw,field,fragment", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_events_name_their_reason(raw, field, fragment):
    data = raw if isinstance(raw, bytes) else orjson.dumps(raw)
    with pytest.raises(EventError) as info:
        parse_inference(data)
    assert info.value.field == field
    assert fragment.lower() in info.value.reason.lower()


def test_there_are_at_least_twenty_kinds_of_malformed_events():
    assert len({m[0] for m in MALFORMED}) >= 20


def test_infinity_in_features_is_rejected_even_when_passed_as_python_float():
    doc = valid_event(features={"x": math.inf})
    from driftline.events import validate_inference
    with pytest.raises(EventError, match="finite"):
        validate_inference(doc)


def test_label_event():
    raw = orjson.dumps({"schema": LABEL_SCHEMA, "request_id": "r-1", "ts": 1796040000123, "model": "m", "label": 1})
    label = parse_label(raw)
    assert (label.request_id, label.model, label.label, label.ts_ms) == ("r-1", "m", 1, 1796040000123)


@pytest.mark.parametrize("doc,field", [
    ({"schema": LABEL_SCHEMA, "ts": 1796040000123, "model": "m", "label": 1}, "request_id"),
    ({"schema": LABEL_SCHEMA, "request_id": "r", "ts": 1796040000123, "model": "m"}, "label"),
    ({"schema": LABEL_SCHEMA, "request_id": "r", "ts": 1796040000123, "model": "m", "label": [1]}, "label"),
    ({"schema": INFERENCE_SCHEMA, "request_id": "r", "ts": 1796040000123, "model": "m", "label": 1}, "schema"),
])
def test_malformed_labels(doc, field):
    with pytest.raises(EventError) as info:
        parse_label(orjson.dumps(doc))
    assert info.value.field == field


@pytest.mark.parametrize("overrides", [
    {}, {"ts": 1796040000123}, {"prediction": [0.1, 0.9]}, {"status": "error", "error": "x", "prediction": _DROP},
    {"inputs": {"a": 1.0}, "batch_size": 4, "cache_hit": True, "device": "cpu"}, {"tags": {"a": "b"}},
    {"request_id": _DROP}, {"ts": "2026-11-30T12:00:59.999Z"}, {"ts": "2026-11-30T12:00:00Z"},
])
def test_fast_path_and_precise_checks_agree_on_valid_events(overrides):
    from driftline.events import _fast_inference, validate_inference
    doc = orjson.loads(orjson.dumps(valid_event(**overrides)))
    precise = validate_inference(doc)
    fast = _fast_inference(doc)
    assert fast is None or fast == precise
    assert parse_inference(orjson.dumps(doc)) == precise
