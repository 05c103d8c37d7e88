"""Generated answers in the event contract: `ttft` / `tpot` latency parts and the `tokens_in` / `tokens_out` counts,
accepted when valid, each hostile value refused with its field and reason (by the validator and the JSON Schema)."""
from __future__ import annotations

import math

import jsonschema
import orjson
import pytest

from driftline import defaults
from driftline.events import EventError, json_schema, parse_inference, validate_inference


def event(**extra) -> dict:
    doc = {"schema": "driftline.inference/v1", "event_id": "e-1", "request_id": "r-1", "ts": "2026-12-01T10:00:00.000Z",
           "model": "chat", "version": "3", "features": {"prompt_chars": 120}, "prediction": "stop",
           "latency_ms": {"total": 900.0, "ttft": 180.5, "tpot": 12.0}, "tokens_in": 37, "tokens_out": 61}
    doc.update(extra)
    return {k: v for k, v in doc.items() if v is not DROP}


DROP = object()


@pytest.mark.parametrize("extra", [{}, {"tokens_in": 0, "tokens_out": 0}, {"tokens_in": None, "tokens_out": None},
                                   {"tokens_out": defaults.TOKENS_MAX}, {"tokens_in": DROP, "tokens_out": DROP}])
def test_generated_answers_are_accepted_with_their_parts_and_counts(extra):
    doc = event(**extra)
    parsed = parse_inference(orjson.dumps(doc))  # the fast path
    assert parsed.latency_ms == {"total": 900.0, "ttft": 180.5, "tpot": 12.0}
    assert parsed.raw.get("tokens_out") == doc.get("tokens_out")
    assert validate_inference(doc).raw.get("tokens_in") == doc.get("tokens_in")  # the precise path agrees
    jsonschema.validate(doc, json_schema("inference"))


HOSTILE = [
    # (field, value, words in the reason)
    ("tokens_in", -1, "outside 0"),
    ("tokens_out", -5, "outside 0"),
    ("tokens_out", defaults.TOKENS_MAX + 1, "outside 0"),
    ("tokens_out", 2 ** 63 - 1, "outside 0"),  # the largest integer JSON carries here (docs/contract.md)
    ("tokens_in", 12.5, "whole number"),
    ("tokens_in", 12.0, "whole number"),
    ("tokens_out", "12", "got string"),
    ("tokens_out", True, "got boolean"),
    ("tokens_in", [1, 2], "got array"),
    ("tokens_out", {"n": 3}, "got object"),
]


@pytest.mark.parametrize("field, value, words", HOSTILE, ids=[f"{f}={v!r}"[:40] for f, v, _ in HOSTILE])
def test_hostile_token_counts_are_refused_with_their_field(field, value, words):
    doc = event(**{field: value})
    with pytest.raises(EventError) as refused:
        parse_inference(orjson.dumps(doc))
    assert refused.value.field == field and words in refused.value.reason
    if not (field == "tokens_in" and value == 12.0):  # JSON Schema's "integer" takes 12.0; the contract does not
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, json_schema("inference"))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_counts_and_parts_from_python_callers_are_refused(value):
    with pytest.raises(EventError) as refused:
        validate_inference(event(tokens_out=value))
    assert refused.value.field == "tokens_out"
    with pytest.raises(EventError) as refused:
        validate_inference(event(latency_ms={"total": 900.0, "ttft": value}))
    assert refused.value.field == "latency_ms.ttft" and "finite" in refused.value.reason
    with pytest.raises(EventError, match="outside 0"):
        validate_inference(event(tokens_in=10 ** 30))


@pytest.mark.parametrize("ttft, words", [(-1.0, "non-negative"), ("180ms", "number"), (None, "number"),
                                         ([180.0], "number")])
def test_bad_latency_parts_name_the_part(ttft, words):
    with pytest.raises(EventError) as refused:
        parse_inference(orjson.dumps(event(latency_ms={"total": 900.0, "ttft": ttft})))
    assert refused.value.field == "latency_ms.ttft" and words in refused.value.reason


def test_many_latency_parts_stay_valid_events():
    """The contract bounds no part count (that would be a stricter v1); a window keeps LATENCY_MAX_PARTS of them."""
    parts = {"total": 1.0, **{f"p{i}": 1.0 for i in range(3 * defaults.LATENCY_MAX_PARTS)}}
    assert len(parse_inference(orjson.dumps(event(latency_ms=parts))).latency_ms) == len(parts)
    jsonschema.validate(event(latency_ms=parts), json_schema("inference"))
