"""OpenTelemetry spans to events, pure: decoding (protobuf and OTLP/JSON), the span roles, the mapping table of
docs/llm.md, the descriptors and the pending traces' bounds."""
from __future__ import annotations

import time

import orjson
import pytest

from driftline.events import validate_inference
from driftline.llm_settings import LlmSettings
from driftline.otlp import descriptors as d
from driftline.otlp.joining import PendingTraces
from driftline.otlp.mapping import trace_event
from driftline.otlp.spans import OtlpError, decode_json, decode_protobuf
from tests.support.otlp_traces import MS, export_request, otlp_json, rag_trace, span

NOW_MS = int(time.time() * 1000) - 60_000
SETTINGS = LlmSettings(prices={"gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.6}})


def event_of(spans, settings=SETTINGS):
    decoded = decode_protobuf(export_request(spans).SerializeToString())
    assert decoded.rejected == 0
    return trace_event(decoded.spans, settings, settings.refusal())


def test_a_streamed_rag_request_is_one_valid_event_with_its_descriptors():
    event = event_of(rag_trace(NOW_MS, embedding=[0.5, -0.25], session="s-1", tokens_in=100, tokens_out=21,
                               ttft_ms=120.0, tpot_ms=20.0, scores=(0.9, 0.5)))
    validate_inference(event, max_ts_ms=int(time.time() * 1000) + 1000)
    assert (event["model"], event["version"]) == ("gpt-4o-mini", "gpt-4o-mini-2024-07-18")
    assert event["latency_ms"]["ttft"] == 120.0 and event["latency_ms"]["tpot"] == 20.0
    assert event["latency_ms"]["total"] > event["latency_ms"]["llm"] > 0
    assert (event["tokens_in"], event["tokens_out"], event["entity_id"]) == (100, 21, "s-1")
    f = event["features"]
    assert (f[d.RETRIEVAL_DOCUMENTS], f[d.RETRIEVAL_TOP_SCORE], f[d.RETRIEVAL_MEAN_SCORE]) == (2, 0.9, 0.7)
    assert f[d.FINISH_REASON] == event["prediction"] == "stop"
    assert f[d.COST_USD] == pytest.approx((100 * 0.15 + 21 * 0.6) / 1e6)
    assert f[d.ANSWER_REFUSED] is False and f[d.CACHE_HIT] is False and f[d.PROMPT_TOKENS] == 100
    assert event["embeddings"] == {"prompt": [0.5, -0.25]}
    assert event["tags"] == {"service": "rag-service", "system": "openai"}


def test_protobuf_and_otlp_json_give_the_same_event():
    request = export_request(rag_trace(NOW_MS))
    by_protobuf = decode_protobuf(request.SerializeToString())
    by_json = decode_json(orjson.dumps(otlp_json(request)))
    assert trace_event(by_json.spans, SETTINGS, SETTINGS.refusal()) == trace_event(by_protobuf.spans, SETTINGS,
                                                                                   SETTINGS.refusal())


def test_refusals_errors_cache_hits_and_a_model_mapping():
    refused = event_of(rag_trace(NOW_MS, answer="I'm sorry, but I can't help with that request.", scores=()))
    assert refused["features"][d.ANSWER_REFUSED] is True and refused["features"][d.RETRIEVAL_EMPTY] is True
    assert refused["features"][d.RETRIEVAL_TOP_SCORE] is None
    failed = event_of(rag_trace(NOW_MS, error="rate limited"))
    assert failed["status"] == "error" and failed["error"] == "rate limited" and "prediction" not in failed
    mapped = LlmSettings(models={"gpt-4o-mini": {"model": "support-bot", "version": "v2"},
                                 "rag-service": {"model": "support-bot", "version": "v2"}})
    event = event_of(rag_trace(NOW_MS), mapped)
    assert (event["model"], event["version"]) == ("support-bot", "v2")
    hit = event_of(rag_trace(NOW_MS, cache_hit=True), mapped)  # no model named: mapped by its service
    assert (hit["model"], hit["version"]) == ("support-bot", "v2") and hit["prediction"] == "cache_hit"
    assert hit["cache_hit"] is True and {k for k, v in hit["features"].items() if v is not None} == {d.CACHE_HIT}
    assert set(hit["features"]) == set(d.DESCRIPTORS)  # null where the request has nothing: no lacking feature
    assert (event_of(rag_trace(NOW_MS, cache_hit=True))["model"], "unversioned") == ("rag-service", "unversioned")


def test_openinference_names_the_requested_model_in_its_parameters_and_the_contrib_its_finish_in_the_messages():
    trace_id, ids = b"\x01" * 16, [bytes([i]) * 8 for i in (1, 2)]
    t0 = NOW_MS * MS
    openinference = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini-2024-07-18",
                     "llm.invocation_parameters": '{"model": "gpt-4o-mini", "stream": true}',
                     "llm.finish_reason": "length", "llm.token_count.completion": 3}
    event = event_of([span(trace_id, ids[0], b"", "ChatCompletion", t0, t0 + 50 * MS, openinference)],
                     LlmSettings(models={"gpt-4o-mini": {"model": "support-bot"}}))
    assert (event["model"], event["version"], event["prediction"]) == ("support-bot", "gpt-4o-mini-2024-07-18",
                                                                       "length")
    unreadable = event_of([span(trace_id, ids[0], b"", "ChatCompletion", t0, t0 + 50 * MS,
                                {**openinference, "llm.invocation_parameters": "{not json"})])
    assert unreadable["model"] == "gpt-4o-mini-2024-07-18"
    contrib = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
               "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Hi."}], '
                                         '"finish_reason": "content_filter"}]'}
    event = event_of([span(trace_id, ids[1], b"", "chat gpt-4o-mini", t0, t0 + 50 * MS, contrib)])
    assert event["prediction"] == event["features"][d.FINISH_REASON] == "content_filter"
    assert event["features"][d.ANSWER_CHARS] == 3


def test_a_trace_without_llm_work_makes_no_event_and_unsafe_model_names_are_cleaned():
    trace_id = b"\x01" * 16
    health = [span(trace_id, b"\x02" * 8, b"", "GET /healthz", NOW_MS * MS, (NOW_MS + 1) * MS, {})]
    assert event_of(health) is None
    event = event_of(rag_trace(NOW_MS, model="models/gemini 1.5 pro"))
    assert event["model"] == "models-gemini-1.5-pro"


def test_otlp_json_ids_must_be_hex_and_bodies_must_be_otlp():
    doc = otlp_json(export_request(rag_trace(NOW_MS)))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "zz" * 16
    decoded = decode_json(orjson.dumps(doc))
    assert decoded.rejected == 1 and len(decoded.spans) == 3
    for body, decode in ((b"\xff\x00junk", decode_protobuf), (b"[1, 2]", decode_json), (b"{", decode_json)):
        with pytest.raises(OtlpError):
            decode(body)


def test_long_attributes_and_many_events_are_cut():
    trace_id = b"\x03" * 16
    long = span(trace_id, b"\x04" * 8, b"", "chat", NOW_MS * MS, (NOW_MS + 5) * MS,
                {"gen_ai.request.model": "m", "gen_ai.completion.0.content": "x" * 200_000},
                events=[("llm.content.completion.chunk", (NOW_MS + 1) * MS)] * 500)
    (decoded,) = decode_protobuf(export_request([long]).SerializeToString()).spans
    assert len(decoded.attributes["gen_ai.completion.0.content"]) == 65_536
    assert len(decoded.events) == 64 and decoded.dropped_events == 436


def test_pending_traces_join_on_the_root_wait_for_it_and_stay_bounded():
    spans = decode_protobuf(export_request(rag_trace(NOW_MS)).SerializeToString()).spans
    pending = PendingTraces(max_traces=2, max_spans=3, wait_s=5.0)
    first = pending.add(spans[:2], now_s=0.0)
    assert first.whole == [] and len(pending) == 1
    second = pending.add(spans[2:], now_s=1.0)  # the LLM span (a fourth: over the bound) and the root
    assert second.dropped == 1 and [len(t) for t in second.whole] == []
    assert [len(t) for t in pending.expired(now_s=6.1)] == [3]
    assert pending.add(spans[:1], now_s=7.0).late == 1  # a trace taken is not made twice
    others = [decode_protobuf(export_request(rag_trace(NOW_MS)[:1]).SerializeToString()).spans for _ in range(3)]
    pushed = [pending.add(s, now_s=8.0).whole for s in others]
    assert [len(w) for w in pushed] == [0, 0, 1] and len(pending) == 2


def test_pending_traces_are_bounded_in_bytes():
    calls = [decode_protobuf(export_request(rag_trace(NOW_MS, answer="z" * 20_000)[:3]).SerializeToString()).spans
             for _ in range(5)]
    pending = PendingTraces(max_traces=100, max_spans=10, wait_s=60.0, max_bytes=50_000)
    pushed = [len(pending.add(spans, now_s=float(i)).whole) for i, spans in enumerate(calls)]
    assert sum(pushed) >= 3 and pending.bytes <= 50_000  # each holds a 20 KB answer: two fit
    assert sum(len(t) for t in pending.drain()) + 3 * sum(pushed) == 15 and pending.bytes == 0
