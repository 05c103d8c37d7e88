"""The OpenTelemetry door (`POST /v1/traces`) handed the hostile corpus's OTLP cases (tests/support/hostile_corpus.py):
each is refused naming its problem, dead-lettered in the store with a reason and field, or counted as an event
whose value was bounded; the ordinary traces between them all become events."""
from __future__ import annotations

import uuid

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlalchemy import select

from driftline.llm_settings import LlmSettings
from driftline.receiver.otlp import OtlpConfig, OtlpIntake
from driftline.store import db as store_db
from driftline.store.models import DeadLetter
from tests.receiver.conftest import events_of
from tests.support.hostile_corpus import OTLP, OTLP_CORPUS, Context, Counted, DeadLettered, Refused, _otlp_call, \
    _otlp_trace
from tests.support.waiting import wait_until


def test_every_otlp_case_has_its_outcome(receiver_factory, broker, sqlite_url):
    from fastapi.testclient import TestClient

    from driftline.receiver.app import create_app

    model = f"otlp-hostile-{uuid.uuid4().hex[:8]}"
    service, _ = receiver_factory()
    intake = OtlpIntake(service, OtlpConfig(llm=LlmSettings(models={"gpt-4o-mini": {"model": model}})))
    client = TestClient(create_app(service, otlp=intake), base_url="http://127.0.0.1")
    import time
    now_ms = int(time.time() * 1000) - 60_000
    answers, markers, clean = {}, {}, 0
    for i, case in enumerate(OTLP_CORPUS):
        ordinary = Context(OTLP, model, f"clean-{i}-{uuid.uuid4().hex[:6]}", now_ms, now_ms)
        assert client.post("/v1/traces", content=_otlp_call(_otlp_trace(ordinary)).body,
                           headers={"content-type": "application/x-protobuf"}).status_code == 200
        clean += 1
        marker = f"{case.name}-{uuid.uuid4().hex[:6]}"
        call = case.build(Context(OTLP, model, marker, now_ms + i, now_ms))
        answers[case.name] = client.post(call.path, content=call.body, headers=dict(call.headers))
        markers[case.name] = marker
    counted = [case for case in OTLP_CORPUS if isinstance(case.expect, Counted)]
    events = events_of(broker, model, clean + len(counted))
    assert len(events) == clean + len(counted)
    service.flush()
    for case in OTLP_CORPUS:
        answer, marker = answers[case.name], markers[case.name]
        if isinstance(case.expect, Refused):
            assert answer.status_code == case.expect.status, (case.name, answer.text)
            assert all(word in answer.text for word in case.expect.words), (case.name, answer.text)
        elif isinstance(case.expect, DeadLettered):
            partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
            assert answer.status_code == case.expect.status and case.expect.words in partial.error_message, case.name

            def stored() -> list[DeadLetter]:
                with store_db.session_scope(sqlite_url) as session:
                    return [d for d in session.scalars(select(DeadLetter)) if marker.encode() in (d.raw or b"")]

            wait_until(lambda: stored(), timeout=30, message=f"{case.name}'s dead letter in the store")
            (letter,) = stored()
            assert case.expect.words in letter.reason and letter.field == case.expect.field, (case.name, letter.reason)
        else:
            assert answer.status_code == 200, (case.name, answer.text)
            mine = [e for e in events if e.get("entity_id") == marker]
            assert len(mine) == 1 and case.expect.check(mine), case.name
