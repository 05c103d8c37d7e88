"""One table of value bounds (driftline/value_bounds.py) for every numeric field an event can carry.

The table covers every numeric field of the shipped schemas (a field added without a bound fails here), the
schemas state each dead-letter bound, and both decoding paths (per event, the receiver's too, and columnar)
refuse a value past it, naming the field and the bound, and accept the value at it.
"""
from __future__ import annotations

from typing import Any, Iterator

import orjson
import pytest

from driftline.collector.event_columns import parse_inference_columns
from driftline.events import EventError, json_schema, parse_inference, validate_inference
from driftline.value_bounds import COUNT, INFERENCE_BOUNDS, LABEL_BOUNDS, REFUSE, SIZE_BOUNDS, Bound

T0 = 1_790_000_040_000
_NUMERIC = {"number", "integer"}


def numeric_paths(node: dict[str, Any], root: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict]]:
    """(path, schema node) of every place a number may stand: `*` any name of an object, `[]` any list item."""
    if "$ref" in node:
        node = root["$defs"][node["$ref"].removeprefix("#/$defs/")]
    kinds = node.get("type", [])
    if _NUMERIC.intersection([kinds] if isinstance(kinds, str) else kinds):
        yield path, node
    for key, child in node.get("properties", {}).items():
        yield from numeric_paths(child, root, f"{path}.{key}".lstrip("."))
    if isinstance(node.get("additionalProperties"), dict):
        yield from numeric_paths(node["additionalProperties"], root, f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from numeric_paths(node["items"], root, f"{path}[]")
    for branch in node.get("anyOf", []) + node.get("oneOf", []) + node.get("allOf", []):
        yield from numeric_paths(branch, root, path)


@pytest.mark.parametrize("event, table", [("inference", INFERENCE_BOUNDS), ("label", LABEL_BOUNDS)])
def test_every_numeric_field_of_the_schema_has_a_bound_and_the_schema_states_it(event, table):
    schema = json_schema(event)
    found = list(numeric_paths(schema, schema))
    assert {path for path, _ in found} == set(table), "a numeric field without a bound (or a bound of no field)"
    for path, node in found:
        bound = table[path]
        if bound.beyond == REFUSE:  # what the decoders dead-letter, the schema refuses
            high = node.get("exclusiveMaximum" if bound.high_open else "maximum")
            assert (node.get("minimum"), high) == (bound.low, bound.high), path
            assert bound.integer == (node["type"] == "integer" or "integer" in node["type"]), path
        else:  # accepted, and counted out of range in the window
            assert bound.beyond == COUNT and not {"minimum", "maximum"} & set(node), path
        assert bound.why and bound.low < bound.high


def test_the_inference_schema_states_the_sizes():
    schema = json_schema("inference")["properties"]
    vectors = schema["embeddings"]["anyOf"][1]
    assert vectors["maxProperties"] == SIZE_BOUNDS["embeddings"][0]
    assert vectors["additionalProperties"]["maxItems"] == SIZE_BOUNDS["embeddings.*"][0]


def event(**fields) -> dict[str, Any]:
    doc = {"schema": "driftline.inference/v1", "event_id": "e-1", "request_id": "r-1", "ts": T0, "model": "m",
           "version": "1", "features": {"x": 1.0}, "prediction": 0.5, "latency_ms": {"total": 4.0}}
    doc.update(fields)
    return doc


def _at(path: str, value: Any) -> tuple[dict[str, Any], str]:
    """An event carrying `value` at a REFUSE bound's path, and the field a refusal names."""
    if path == "ts":
        return event(ts=value), "ts"
    if path.endswith(".*"):
        field = path[:-2]
        name = "total" if field == "latency_ms" else "x"
        return event(**{field: {name: value}}), f"{field}.{name}"
    if path == "embeddings.*[]":
        return event(embeddings={"e": [0.5, value]}), "embeddings.e[1]"
    return event(**{path: value}), path


def _beyond(bound: Bound) -> tuple[Any, Any]:
    """(a value just above the bound, one just below)."""
    high = bound.high if bound.high_open else (bound.high + 1 if bound.integer else bound.high * 2)
    low = bound.low - 1 if bound.integer or bound.low > 0 else -bound.high * 2 if bound.low < 0 else -1e-9
    return high, low


REFUSED = sorted(path for path, b in INFERENCE_BOUNDS.items() if b.beyond == REFUSE)


@pytest.mark.parametrize("path", REFUSED)
def test_a_value_past_a_bound_is_refused_by_every_path_naming_the_field_and_the_bound(path):
    bound = INFERENCE_BOUNDS[path]
    high, low = _beyond(bound)
    for value in (high, low):
        doc, field = _at(path, value)
        with pytest.raises(EventError) as caught:
            parse_inference(orjson.dumps(doc))
        assert caught.value.field == field, (path, value, caught.value)
        # the bound in the reason: the table's words, or (event times, as before the table) the years
        words = "2000-2100" if path in ("ts", "feature_ts.*") else bound.text
        if value == high or bound.low < 0:  # below 0: the older "non-negative" reasons stay
            assert words in caught.value.reason, caught.value.reason
        with pytest.raises(EventError):
            validate_inference(doc)  # the receiver's check, on the dict it built
        assert parse_inference_columns([orjson.dumps(doc), orjson.dumps(event(event_id="e-2"))]) is None


@pytest.mark.parametrize("path", REFUSED)
def test_a_value_at_a_bound_is_accepted_by_every_path(path):
    bound = INFERENCE_BOUNDS[path]
    highest = bound.high - 1 if bound.high_open else bound.high
    for value in (bound.low, highest):
        value = int(value) if bound.integer or path in ("ts", "feature_ts.*") else float(value)
        doc, _ = _at(path, value)
        parsed = parse_inference(orjson.dumps(doc))
        assert parsed.raw == doc
        if path != "embeddings.*[]":  # vectors always take the per-event path
            assert parse_inference_columns([orjson.dumps(doc)]) is not None, (path, value)


def test_a_forged_response_time_in_a_cloudevent_pair_is_dead_lettered_by_the_receivers_check():
    from driftline.receiver.conversion import pair_events, parse_ce_time
    from driftline.receiver.pairing import REQUEST, RESPONSE, Half

    sent, answered = parse_ce_time("2026-09-22T12:00:00Z"), parse_ce_time("9999-12-31T23:59:59Z")
    request = Half(("ns", "isvc", "predictor", "c-1"), REQUEST, "c-1", {}, {"instances": [{"x": 1.0}]}, b"{}", sent)
    response = Half(("ns", "isvc", "predictor", "c-1"), RESPONSE, "c-1", {}, {"predictions": [0.5]}, b"{}", answered)
    (doc,) = pair_events(request, response, "m", "1")
    assert doc["latency_ms"]["total"] > 2.4e14  # what passed validation before the bound
    with pytest.raises(EventError) as caught:
        validate_inference(doc)
    assert caught.value.field == "latency_ms.total" and "86400000 ms" in caught.value.reason
