"""The real thing: the `openai` client, instrumented by OpenLLMetry (`opentelemetry-instrumentation-openai`),
OpenInference (`openinference-instrumentation-openai`) or OpenTelemetry's contrib instrumentation
(`opentelemetry-instrumentation-openai-v2`), calls a local stand-in of the chat-completions API
(tests/support/openai_standin.py), plain and streamed; the request's retrieval is a span written by hand with the
SDK; the SDK's OTLP exporters (HTTP protobuf, gRPC) send the traces to a served receiver. Each request's trace is
one event on Kafka with the model, the answering snapshot, the tokens, the latencies, the finish reason and the
retrieval's descriptors; a call the API refuses (429) is an error event with the provider's message."""
from __future__ import annotations

import importlib
import uuid
from typing import Any, Iterator

import openai
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from driftline.llm_settings import LlmSettings
from driftline.receiver.otlp import OtlpConfig, OtlpIntake
from tests.receiver.conftest import events_of
from tests.support.openai_standin import ANSWER, API_KEY, FIRST_TOKEN_S, RATE_LIMITED, SNAPSHOT, OpenAIStandin, \
    prompt_tokens
from tests.support.otlp_receiver import served_receiver

TOKEN = "s3cret"
REQUESTED = "gpt-4o-mini"
QUESTION = "How do I reset my password?"
MESSAGES = [{"role": "system", "content": "Answer from the documents."}, {"role": "user", "content": QUESTION}]
SCORES = (0.82, 0.75, 0.6)
INSTRUMENTORS = {"openllmetry": "opentelemetry.instrumentation.openai",
                 "openinference": "openinference.instrumentation.openai",
                 "contrib": "opentelemetry.instrumentation.openai_v2"}
# the contrib instrumentation records the time to the first chunk only as a metric, never on the span
RECORDS_TTFT = {"openllmetry": True, "openinference": True, "contrib": False}


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin().start()
    yield server
    server.stop()


def exporter(protocol: str, http_port: int, grpc_port: int) -> Any:
    """The SDK's OTLP span exporter, configured as docs/llm.md says, the receiver's token in its headers."""
    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces",
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter(endpoint=f"http://127.0.0.1:{grpc_port}", insecure=True,
                        headers=(("authorization", f"Bearer {TOKEN}"),), timeout=10)


def ask(client: openai.OpenAI, tracer: Any, stream: bool) -> tuple[str, str]:
    """One RAG request: the server span, the retrieval traced by hand, the chat call; (its trace id, the answer)."""
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
        retrieved: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
        for i, score in enumerate(SCORES):
            retrieved |= {f"retrieval.documents.{i}.document.id": f"doc-{i}",
                          f"retrieval.documents.{i}.document.score": score,
                          f"retrieval.documents.{i}.document.content": f"document {i}"}
        with tracer.start_as_current_span("retrieve", attributes=retrieved):
            pass
        try:
            if stream:
                chunks = client.chat.completions.create(model=REQUESTED, messages=MESSAGES, stream=True,
                                                        stream_options={"include_usage": True})
                answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            else:
                answer = client.chat.completions.create(model=REQUESTED, messages=MESSAGES).choices[0].message.content
        except openai.RateLimitError:
            answer = None  # the service answers with its own error: only the chat span records the provider's
        return format(root.get_span_context().trace_id, "032x"), answer


@pytest.mark.parametrize(("instrumentation", "protocol"),
                         [("openllmetry", "http"), ("openinference", "grpc"), ("contrib", "grpc")])
def test_an_instrumented_openai_client_makes_one_event_per_request(instrumentation, protocol, standin,
                                                                   receiver_factory, broker, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")  # the contrib's content
    model = f"chat-{uuid.uuid4().hex[:8]}"
    service, _ = receiver_factory()
    intake = OtlpIntake(service, OtlpConfig(llm=LlmSettings(models={REQUESTED: {"model": model}})))
    instrumentor = importlib.import_module(INSTRUMENTORS[instrumentation]).OpenAIInstrumentor()
    with served_receiver(service, intake, token=TOKEN) as (http_port, grpc_port):
        provider = TracerProvider(resource=Resource.create({"service.name": "support-rag"}))
        provider.add_span_processor(BatchSpanProcessor(exporter(protocol, http_port, grpc_port),
                                                       schedule_delay_millis=50))
        instrumentor.instrument(tracer_provider=provider)
        try:
            client = openai.OpenAI(base_url=standin.base_url, api_key=API_KEY, max_retries=0)
            tracer = provider.get_tracer("support-rag")
            plain, answer = ask(client, tracer, stream=False)
            streamed, streamed_answer = ask(client, tracer, stream=True)
            standin.rate_limited = 1
            limited, no_answer = ask(client, tracer, stream=False)
        finally:
            instrumentor.uninstrument()
            provider.shutdown()  # exports what the batch holds
    assert answer == streamed_answer == ANSWER and no_answer is None
    events = {e["request_id"]: e for e in events_of(broker, model, 3)}
    assert set(events) == {plain, streamed, limited}
    failed = events.pop(limited)
    assert (failed["model"], failed["status"], failed["error"]) == (model, "error", f"Error code: 429 - {RATE_LIMITED}")
    assert "prediction" not in failed and failed["features"]["retrieval_documents"] == 3
    for event in events.values():
        features, latency = event["features"], event["latency_ms"]
        assert (event["model"], event["version"]) == (model, REQUESTED + SNAPSHOT)
        assert (event["tokens_in"], event["tokens_out"]) == (prompt_tokens(MESSAGES), len(ANSWER.split()))
        assert event["prediction"] == features["finish_reason"] == "stop"
        assert event["tags"] == {"service": "support-rag", "system": "openai"}
        assert latency["total"] >= latency["llm"] >= FIRST_TOKEN_S * 1000 * (event is events[streamed])
        assert latency["retrieval"] >= 0 and features["llm_calls"] == 1
        assert features["retrieval_documents"] == 3 and features["retrieval_empty"] is False
        assert features["retrieval_top_score"] == max(SCORES)
        assert features["retrieval_mean_score"] == pytest.approx(sum(SCORES) / len(SCORES))
        assert features["answer_chars"] == len(ANSWER) and features["answer_refused"] is False
        assert features["prompt_chars"] >= len(QUESTION)
    assert "ttft" not in events[plain]["latency_ms"]
    latency = events[streamed]["latency_ms"]
    if RECORDS_TTFT[instrumentation]:
        assert FIRST_TOKEN_S * 1000 <= latency["ttft"] < latency["llm"] and latency["tpot"] > 0
    else:
        assert "ttft" not in latency
