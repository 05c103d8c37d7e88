"""`POST /events` on the receiver reuses the event contract: a generated answer's ttft/tpot and token counts pass,
a bad count is dead-lettered with its field and reason."""
from __future__ import annotations

import uuid

import orjson

from tests.receiver.conftest import dead_letters_of, events_of


def test_token_counts_through_post_events(broker, receiver_factory, model):
    _, client = receiver_factory()
    good = {"schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "ts": "2026-01-02T03:04:05Z",
            "model": model, "version": "7", "features": {"prompt_chars": 40}, "prediction": "stop",
            "latency_ms": {"total": 900.0, "ttft": 150.0, "tpot": 12.5}, "tokens_in": 12, "tokens_out": 61}
    bad = {**good, "event_id": uuid.uuid4().hex, "tokens_out": -3}
    answer = client.post("/events", content=orjson.dumps(good) + b"\n" + orjson.dumps(bad) + b"\n")
    assert answer.status_code == 200
    result = answer.json()
    assert result["events"] == 1 and result["dead_lettered"] == 1
    assert result["errors"][0]["field"] == "tokens_out" and "outside 0" in result["errors"][0]["reason"]
    (event,) = events_of(broker, model, 1)
    assert event["tokens_out"] == 61 and event["latency_ms"]["ttft"] == 150.0
    (headers, _body), = dead_letters_of(broker, bad["event_id"], 1)
    assert headers["driftline.field"] == "tokens_out"
