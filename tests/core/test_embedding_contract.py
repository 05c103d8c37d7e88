"""The `embeddings` field of inference events: accepted vectors, and each way a vector is refused, with its reason."""
from __future__ import annotations

import jsonschema
import numpy as np
import orjson
import pytest

from driftline import defaults
from driftline.embeddings.contract import as_lists, check_dimensions, EmbeddingError
from driftline.events import EventError, json_schema, parse_inference, validate_inference


def event(**extra) -> dict:
    doc = {"schema": "driftline.inference/v1", "event_id": "e-1", "request_id": "r-1", "ts": "2026-12-01T10:00:00.000Z",
           "model": "search", "version": "3", "features": {"q_len": 12}, "prediction": 0.4,
           "latency_ms": {"total": 8.0}}
    doc.update(extra)
    return doc


def test_named_vectors_are_accepted_and_kept_on_the_event():
    parsed = parse_inference(orjson.dumps(event(embeddings={"prompt": [0.1, -2, 3.5], "answer": [1.0]})))
    assert parsed.raw["embeddings"] == {"prompt": [0.1, -2, 3.5], "answer": [1.0]}
    jsonschema.validate(event(embeddings={"prompt": [0.1, -2, 3.5]}), json_schema("inference"))
    assert parse_inference(orjson.dumps(event(embeddings=None))).raw["embeddings"] is None


@pytest.mark.parametrize("embeddings, field, words", [
    ([0.1, 0.2], "embeddings", "expected an object"),
    ({"bad name": [0.1]}, "embeddings", "bad name"),
    ({"prompt": []}, "embeddings.prompt", "must not be empty"),
    ({"prompt": "0.1,0.2"}, "embeddings.prompt", "expected a list"),
    ({"prompt": [0.1, "x", 0.3]}, "embeddings.prompt[1]", "expected a number"),
    ({"prompt": [0.1, None]}, "embeddings.prompt[1]", "expected a number"),
    ({"prompt": [True]}, "embeddings.prompt[0]", "expected a number"),
    ({"prompt": [0.0] * (defaults.EMBEDDING_MAX_DIMENSION + 1)}, "embeddings.prompt", "above the limit"),
    ({f"v{i}": [0.0] for i in range(defaults.EMBEDDING_MAX_NAMES + 1)}, "embeddings", "above the limit"),
])
def test_bad_vectors_are_refused_with_their_field_and_reason(embeddings, field, words):
    doc = event(embeddings=embeddings)
    with pytest.raises(EventError) as refused:
        parse_inference(orjson.dumps(doc))
    assert refused.value.field == field and words in refused.value.reason
    # the shipped JSON Schema refuses them too (the item count and the name pattern included)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema("inference"))


def test_a_non_finite_number_in_a_vector_is_refused_where_json_could_not_have_carried_it():
    with pytest.raises(EventError) as refused:
        validate_inference(event(embeddings={"prompt": [0.1, float("nan")]}))
    assert refused.value.field == "embeddings.prompt[1]" and "finite" in refused.value.reason
    with pytest.raises(EventError):  # NaN is not JSON: the bytes are refused before any field is read
        parse_inference(b'{"schema": "driftline.inference/v1", "embeddings": {"p": [NaN]}}')


def test_dimensions_are_held_to_the_baseline_and_numpy_vectors_become_lists():
    check_dimensions({"prompt": [0.0] * 4, "other": [1.0]}, {"prompt": 4})
    with pytest.raises(EmbeddingError, match="3 dimensions; this model version's baseline has 4"):
        check_dimensions({"prompt": [0.0] * 3}, {"prompt": 4})
    assert as_lists({"prompt": np.array([1, 2], dtype=np.float32), "b": (0.5,)}) == {"prompt": [1.0, 2.0], "b": [0.5]}
    with pytest.raises(ValueError, match="one-dimensional"):
        as_lists({"prompt": np.zeros((2, 3))})
