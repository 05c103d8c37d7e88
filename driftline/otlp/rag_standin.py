"""A small RAG service stand-in that needs no network: what `driftline up --scenario rag_topic_shift` and the tests
trace.

A fixed corpus of help-desk documents (named by id in the prompt, so that lengths follow the question), a local embedding (the hashing trick over words, `DIMENSION` wide, unit
length), retrieval by cosine similarity (the top `TOP_K` documents, their similarities as relevance scores), a
semantic cache in front (a question asked recently is answered from it) and a templated LLM (tokens are words,
time to first token and time per token drawn around fixed means). Each request is one trace of OTLP spans as the
common instrumentations write them: the service's server span, an OpenInference EMBEDDING span with the query's
vector, a RETRIEVER span with the documents' scores, and an OpenLLMetry-style chat span with gen_ai.* attributes
and a chunk event per streamed token (the first is the time to first token).

`questions(topic, n, rng)`: help-desk questions (`SUPPORT`) or questions the corpus cannot answer
(`OFF_TOPIC`: cooking and travel), of the same lengths, so that a topic shift moves the embedding and the
retrieval scores and not the lengths.
"""
from __future__ import annotations

import hashlib
import math
import os
import random
from collections import OrderedDict
from typing import Any, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

DIMENSION = 64
TOP_K = 3
MODEL = "standin-chat"
ANSWERING_MODEL = "standin-chat-0001"  # gen_ai.response.model: the version its events carry
SERVICE = "rag-standin"
SUPPORT, OFF_TOPIC = "support", "off_topic"
CORPUS = (
    "reset your password from the account settings page and follow the email link",
    "change the email address of your account in the profile settings",
    "invoices are sent by email each month and listed on the billing page",
    "update the credit card used for billing on the payment settings page",
    "refunds are paid to the original card within ten business days",
    "orders ship within two days and the tracking link is sent by email",
    "return an order within thirty days from the orders page for a refund",
    "two factor authentication is turned on in the security settings",
    "delete your account from the privacy settings after exporting your data",
    "contact support by chat from the help page during business hours",
)
# pairwise of the same words and characters: a topic shift moves what is asked, not how long it is
_SUBJECTS = {
    SUPPORT: ("my password", "the billing page", "my invoice", "a refund", "my order", "the tracking link",
              "two factor authentication", "my account email", "the payment card", "a return"),
    OFF_TOPIC: ("my baguette", "the hiking trail", "my risotto", "a recipe", "my pasta", "the museum ticket",
                "traditional italian pasta", "my beach holiday", "the train ticket", "a tomato"),
}
_FORMS = ("how do i fix {} today", "what should i do about {} now", "where can i find help with {}",
          "can you explain {} to me please")
_ANSWER = "according to our help center article {} here is what to do let me know if anything else is unclear"
MS = 1_000_000
# Answers the semantic cache keeps (least recently asked out first): of the 40 questions of a topic, about one in
# four is answered from it, in either topic.
CACHE_ENTRIES = 10


def embed(text: str) -> list[float]:
    """The hashing-trick embedding of `text`'s words: a signed count per hashed dimension, unit length."""
    vector = [0.0] * DIMENSION
    for word in text.lower().split():
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[digest[0] % DIMENSION] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


_DOCUMENTS = [embed(text) for text in CORPUS]


def retrieve(vector: Sequence[float]) -> list[tuple[int, float]]:
    """(document index, cosine similarity) of the TOP_K most similar documents, best first."""
    scores = [(i, sum(a * b for a, b in zip(vector, doc))) for i, doc in enumerate(_DOCUMENTS)]
    return sorted(scores, key=lambda pair: -pair[1])[:TOP_K]


def questions(topic: str, n: int, rng: random.Random) -> list[str]:
    subjects = _SUBJECTS[topic]
    return [rng.choice(_FORMS).format(rng.choice(subjects)) for _ in range(n)]


class RagStandin:
    """The stand-in service; `request` answers one question and returns its trace's spans."""

    def __init__(self, seed: int = 0, ttft_ms: float = 120.0, tpot_ms: float = 15.0,
                 cache_entries: int = CACHE_ENTRIES):
        self.rng = random.Random(seed)
        self.ttft_ms, self.tpot_ms = ttft_ms, tpot_ms
        self.cache: OrderedDict[str, str] = OrderedDict()  # least recently asked first
        self.cache_entries = cache_entries

    def request(self, question: str, start_ms: int) -> list[Span]:
        trace_id, root_id = os.urandom(16), os.urandom(8)
        t0 = start_ms * MS
        spans: list[Span] = []
        if question in self.cache:
            self.cache.move_to_end(question)
            end = t0 + int(self.rng.uniform(2, 6) * MS)
            return [_span(trace_id, root_id, b"", "POST /ask", t0, end, {"gen_ai.cache.hit": True}, kind=2)]
        vector = embed(question)
        spans.append(_span(trace_id, os.urandom(8), root_id, "embed", t0 + MS, t0 + 3 * MS, {
            "openinference.span.kind": "EMBEDDING", "embedding.model_name": "hashing-64",
            "embedding.embeddings.0.embedding.vector": vector}))
        documents = retrieve(vector)
        retrieved: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
        for rank, (index, score) in enumerate(documents):
            retrieved[f"retrieval.documents.{rank}.document.id"] = f"doc-{index}"
            retrieved[f"retrieval.documents.{rank}.document.score"] = round(score, 6)
        spans.append(_span(trace_id, os.urandom(8), root_id, "retrieve", t0 + 3 * MS, t0 + 8 * MS, retrieved))
        # the prompt and the answer name the documents: their lengths follow the question's alone
        answer = _ANSWER.format(f"doc-{documents[0][0]}")
        prompt = "answer from these documents: " + " ".join(f"doc-{i}" for i, _ in documents)
        tokens_in, tokens_out = len(prompt.split()) + len(question.split()), len(answer.split())
        ttft = self.rng.gauss(self.ttft_ms, self.ttft_ms / 10)
        tpot = max(1.0, self.rng.gauss(self.tpot_ms, self.tpot_ms / 10))
        start = t0 + 9 * MS
        first = start + int(max(1.0, ttft) * MS)
        end = first + int(tpot * (tokens_out - 1) * MS)
        chat = {"gen_ai.system": "openai", "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
                "gen_ai.response.model": ANSWERING_MODEL, "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": prompt,
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": question,
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": answer,
                "gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out,
                "gen_ai.response.finish_reasons": ["stop"], "llm.is_streaming": True}
        chunks = [("gen_ai.content.completion.chunk", first + int(i * tpot * MS)) for i in range(min(tokens_out, 4))]
        spans.append(_span(trace_id, os.urandom(8), root_id, "openai.chat", start, end, chat, chunks, kind=3))
        spans.append(_span(trace_id, root_id, b"", "POST /ask", t0, end + MS, {"http.route": "/ask"}, kind=2))
        if self.cache_entries:
            self.cache[question] = answer
            if len(self.cache) > self.cache_entries:
                self.cache.popitem(last=False)
        return spans


def export_request(spans: Sequence[Span], service: str = SERVICE) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name", value=any_value(service))]),
        scope_spans=[ScopeSpans(spans=list(spans))])])


def _span(trace_id: bytes, span_id: bytes, parent: bytes, name: str, start_ns: int, end_ns: int,
          attributes: dict[str, Any], events: Sequence[tuple[str, int]] = (), kind: int = 1) -> Span:
    return Span(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                kind=kind,  # type: ignore[arg-type]  # the SpanKind enum's number
                start_time_unix_nano=start_ns, end_time_unix_nano=end_ns,
                attributes=[KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()],
                events=[Span.Event(name=n, time_unix_nano=t) for n, t in events])


def any_value(v: Any) -> AnyValue:
    """A Python value as an OTLP attribute value (bool, int, float, sequence, else its string)."""
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[any_value(x) for x in v]))
    return AnyValue(string_value=str(v))
