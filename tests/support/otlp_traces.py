"""OTLP traces of a RAG request as the common instrumentations write them, built with opentelemetry-proto.

`rag_trace` makes one request's spans: the service's server span (root), the query's embedding (OpenInference
EMBEDDING, with its vector), the retrieval (OpenInference RETRIEVER, documents with scores) and the chat call as
opentelemetry-instrumentation-openai writes it (gen_ai.* attributes, a chunk event per streamed token).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from driftline.otlp.rag_standin import any_value

MS = 1_000_000  # nanoseconds


value = any_value  # the stand-in's conversion: the tests' traces and the scenario's are built alike


def attrs(mapping: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=value(v)) for k, v in mapping.items()]


def span(trace_id: bytes, span_id: bytes, parent: bytes, name: str, start_ns: int, end_ns: int,
         attributes: dict[str, Any], events: Sequence[tuple[str, int]] = (), error: str | None = None,
         kind: int = 1) -> Span:
    out = Span(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name, kind=kind,
               start_time_unix_nano=start_ns, end_time_unix_nano=end_ns, attributes=attrs(attributes),
               events=[Span.Event(name=n, time_unix_nano=t) for n, t in events])
    if error is not None:
        out.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=error))
    return out


def rag_trace(start_ms: int, *, question: str = "How do I reset my password?", answer: str = "Open settings.",
              scores: Sequence[float] = (0.82, 0.75, 0.6), embedding: Sequence[float] | None = None,
              tokens_in: int = 120, tokens_out: int = 40, ttft_ms: float = 80.0, tpot_ms: float = 10.0,
              model: str = "gpt-4o-mini", finish: str = "stop", cache_hit: bool = False,
              error: str | None = None, session: str | None = None, stream: bool = True) -> list[Span]:
    """One RAG request's spans, the server span first (its children end before it, as they are exported)."""
    trace_id, ids = os.urandom(16), [os.urandom(8) for _ in range(4)]
    t0 = start_ms * MS
    root_attrs: dict[str, Any] = {"http.route": "/ask", "http.request.method": "POST"}
    if session is not None:
        root_attrs["session.id"] = session
    if cache_hit:
        root_attrs["gen_ai.cache.hit"] = True
        return [span(trace_id, ids[0], b"", "POST /ask", t0, t0 + 5 * MS, root_attrs, kind=2)]
    spans = []
    embed_attrs: dict[str, Any] = {"openinference.span.kind": "EMBEDDING", "embedding.model_name": "minilm",
                                   "embedding.embeddings.0.embedding.text": question}
    if embedding is not None:
        embed_attrs["embedding.embeddings.0.embedding.vector"] = [float(x) for x in embedding]
    spans.append(span(trace_id, ids[1], ids[0], "embed", t0 + 1 * MS, t0 + 4 * MS, embed_attrs))
    retrieval_attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i, score in enumerate(scores):
        retrieval_attrs[f"retrieval.documents.{i}.document.id"] = f"doc-{i}"
        retrieval_attrs[f"retrieval.documents.{i}.document.score"] = float(score)
        retrieval_attrs[f"retrieval.documents.{i}.document.content"] = f"document {i}"
    spans.append(span(trace_id, ids[2], ids[0], "retrieve", t0 + 4 * MS, t0 + 9 * MS, retrieval_attrs))
    llm_start = t0 + 10 * MS
    duration_ns = int((ttft_ms + tpot_ms * max(tokens_out - 1, 0)) * MS)
    llm_attrs: dict[str, Any] = {
        "gen_ai.system": "openai", "gen_ai.operation.name": "chat", "llm.request.type": "chat",
        "gen_ai.request.model": model, "gen_ai.response.model": f"{model}-2024-07-18",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Answer from the documents.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": question,
        "gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out,
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": answer,
        "gen_ai.response.finish_reasons": [finish], "llm.is_streaming": stream}
    events = [("gen_ai.content.completion.chunk", llm_start + int((ttft_ms + tpot_ms * i) * MS))
              for i in range(min(tokens_out, 5))] if stream else []
    spans.append(span(trace_id, ids[3], ids[0], "openai.chat", llm_start, llm_start + duration_ns, llm_attrs,
                      events, error=error, kind=3))
    spans.append(span(trace_id, ids[0], b"", "POST /ask", t0, llm_start + duration_ns + 2 * MS, root_attrs,
                      kind=2))
    return spans


def export_request(spans: Sequence[Span], service: str = "rag-service") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=attrs({"service.name": service})),
        scope_spans=[ScopeSpans(spans=list(spans))])])


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON of a request, as the spec writes it (hex ids)."""
    from driftline.otlp.spans import to_otlp_json

    return to_otlp_json(request)
