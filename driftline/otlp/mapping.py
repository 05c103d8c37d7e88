"""One trace of an LLM or RAG request, as one inference event of the contract (docs/llm.md, the mapping table).

Pure: spans in, an event (not yet validated) out, or None when the trace holds no LLM, embedding, retrieval or
cache span (a health check). Which span is which:

* LLM: ``gen_ai.operation.name`` chat / text_completion / generate_content, or OpenInference's
  ``openinference.span.kind`` LLM, or any span naming a model (``gen_ai.request.model``, ``llm.model_name``)
  that is not an embedding call; the answer is the last of them to end, the tokens are summed over them;
* embedding: ``gen_ai.operation.name`` embeddings, or kind EMBEDDING; its first vector
  (``embedding.embeddings.0.embedding.vector``) is the event's ``prompt`` embedding;
* retrieval: kind RETRIEVER, ``gen_ai.operation.name`` retrieval, or a span with ``retrieval.documents.*``;
* any span's ``driftline.embeddings.NAME`` (a list of numbers) is the event's embedding NAME, and a true
  ``gen_ai.cache.hit`` / ``cache.hit`` / ``semantic_cache.hit`` makes the request a cache hit.
"""
from __future__ import annotations

import re
import uuid
from typing import Any, Iterable, Mapping

from driftline.events import INFERENCE_SCHEMA, rfc3339
from driftline.llm_settings import LlmSettings
from driftline.names import MAX_NAME_CHARS, is_safe_name
from driftline.otlp import descriptors as d
from driftline.otlp.spans import Span

LLM, EMBEDDING, RETRIEVAL = "llm", "embedding", "retrieval"
_LLM_OPERATIONS = frozenset(("chat", "text_completion", "generate_content", "completion", "invoke_agent"))
_KIND = "openinference.span.kind"
_OPERATION = "gen_ai.operation.name"
REQUEST_MODEL_KEYS = ("gen_ai.request.model", "llm.request.model", "llm.model_name", "gen_ai.response.model")
# OpenInference's llm.model_name is the model that answered: the requested one is in its invocation parameters (JSON)
INVOCATION_PARAMETERS = "llm.invocation_parameters"
RESPONSE_MODEL_KEYS = ("gen_ai.response.model", "llm.response.model", "llm.model_name")
INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt",
                    "llm.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
                     "llm.usage.completion_tokens")
FINISH_REASON_KEYS = ("gen_ai.response.finish_reasons", "gen_ai.response.finish_reason",
                      "gen_ai.completion.0.finish_reason", "llm.finish_reason",
                      "llm.output_messages.0.message.finish_reason")
# seconds from the request to the first token, where an instrumentation records it on the span
TTFT_KEYS = ("gen_ai.response.time_to_first_chunk", "gen_ai.server.time_to_first_token",
             "gen_ai.response.time_to_first_token")
# span events that mark a streamed chunk (the first of them is the first token)
FIRST_TOKEN_EVENTS = frozenset(("llm.content.completion.chunk", "gen_ai.content.completion.chunk",
                                "First Token Stream Event", "gen_ai.first_token"))
CACHE_HIT_KEYS = ("gen_ai.cache.hit", "cache.hit", "semantic_cache.hit", "llm.cache.hit")
ENTITY_KEYS = ("user.id", "enduser.id", "session.id", "gen_ai.conversation.id")
SYSTEM_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
EMBEDDING_VECTOR = "embedding.embeddings.0.embedding.vector"
EMBEDDING_PREFIX = "driftline.embeddings."
PROMPT_EMBEDDING = "prompt"
UNVERSIONED = "unversioned"
_EVENT_IDS = uuid.UUID("0b9c1d5e-47a3-4f7e-8a61-2f4c9e3d7b52")  # the namespace of a trace's event id
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def role(span: Span) -> str | None:
    """LLM, EMBEDDING, RETRIEVAL or None: what the span did, by the conventions above."""
    attributes = span.attributes
    kind, operation = str(attributes.get(_KIND, "")).upper(), attributes.get(_OPERATION)
    if kind == "EMBEDDING" or operation in ("embeddings", "embedding"):
        return EMBEDDING
    if kind == "RETRIEVER" or operation == "retrieval" or any(k.startswith("retrieval.documents.")
                                                              for k in attributes):
        return RETRIEVAL
    if kind == "LLM" or operation in _LLM_OPERATIONS or requested_model(attributes):
        return LLM
    return None


def requested_model(attributes: Mapping[str, Any]) -> str | None:
    """The model a call asked for: `gen_ai.request.model`, the model of OpenInference's invocation parameters, else
    the first other name of REQUEST_MODEL_KEYS."""
    asked = _first(attributes, REQUEST_MODEL_KEYS[:2], str)
    if asked is None and isinstance(attributes.get(INVOCATION_PARAMETERS), str):
        asked = d.json_field(attributes[INVOCATION_PARAMETERS], "model")
    return asked or _first(attributes, REQUEST_MODEL_KEYS[2:], str)


def safe_name(name: str) -> str | None:
    """A model name as the store keys it: other characters as '-', cut to MAX_NAME_CHARS; None if nothing is left."""
    cleaned = _UNSAFE.sub("-", name).strip("-._")[:MAX_NAME_CHARS].replace("..", ".")
    return cleaned if is_safe_name(cleaned) else None


def trace_event(spans: list[Span], settings: LlmSettings, refusal: re.Pattern[str]) -> dict[str, Any] | None:
    """The event of one trace (`refusal`: `settings.refusal()`, compiled once by the caller); None when the trace
    is no LLM request."""
    roles = [(span, role(span)) for span in spans]
    llm = sorted((s for s, r in roles if r == LLM), key=lambda s: s.end_ns)
    embedding = [s for s, r in roles if r == EMBEDDING]
    retrieval = [s for s, r in roles if r == RETRIEVAL]
    cache_hit = any(_first(s.attributes, CACHE_HIT_KEYS, bool) for s in spans)
    named = {k[len(EMBEDDING_PREFIX):]: v for s in spans for k, v in s.attributes.items()
             if k.startswith(EMBEDDING_PREFIX)}
    if not (llm or embedding or retrieval or cache_hit or named):
        return None
    answer = llm[-1] if llm else None
    model, version = _names(answer, spans, settings)
    if model is None:
        return None
    root = _root(spans)
    features: dict[str, Any] = {d.CACHE_HIT: cache_hit}
    event: dict[str, Any] = {"schema": INFERENCE_SCHEMA, "event_id": str(uuid.uuid5(_EVENT_IDS, root.trace_id)),
                             "request_id": root.trace_id, "ts": rfc3339(root.start_ns / 1e6), "model": model,
                             "version": version, "features": features, "cache_hit": cache_hit}
    latency = {"total": _ms(root.end_ns - root.start_ns)}
    for part, group in ((LLM, llm), (RETRIEVAL, retrieval), (EMBEDDING, embedding)):
        if group:
            latency[part] = _ms(sum(s.end_ns - s.start_ns for s in group))
    tokens_in = _total(llm, INPUT_TOKEN_KEYS)
    tokens_out = _total(llm, OUTPUT_TOKEN_KEYS)
    if tokens_in is not None:
        event["tokens_in"] = features[d.PROMPT_TOKENS] = tokens_in
    if tokens_out is not None:
        event["tokens_out"] = features[d.ANSWER_TOKENS] = tokens_out
    finish = None
    if answer is not None:
        features[d.LLM_CALLS] = len(llm)
        prompt, text = d.texts(answer.attributes)
        features.update(d.text_descriptors(prompt, text, refusal))
        finish = _finish_reason(answer.attributes)
        if finish is not None:
            features[d.FINISH_REASON] = finish
        latency.update(_streaming(answer, _first(answer.attributes, OUTPUT_TOKEN_KEYS, int)))
        price = settings.prices.get(requested_model(answer.attributes) or "") or settings.prices.get(
            _first(answer.attributes, RESPONSE_MODEL_KEYS, str) or "")
        spent = d.cost(price, tokens_in, tokens_out)
        if spent is not None:
            features[d.COST_USD] = round(spent, 9)
    if retrieval:
        counts = [d.retrieval(s.attributes) for s in retrieval]
        features.update(d.retrieval_descriptors(sum(c for c, _ in counts), [x for _, xs in counts for x in xs]))
    for name in d.DESCRIPTORS:
        features.setdefault(name, None)
    if settings.prices:
        features.setdefault(d.COST_USD, None)
    event["latency_ms"] = latency
    vectors = _embeddings(embedding, named)
    if vectors:
        event["embeddings"] = vectors
    failed = next((s for s in ([root] + llm) if s.error), None)
    if failed is not None:
        event["status"] = "error"
        event["error"] = _error_message(failed)
    else:
        event["prediction"] = finish or ("cache_hit" if cache_hit and answer is None else "unknown")
    entity = _first_of(spans, ENTITY_KEYS)
    if entity is not None:
        event["entity_id"] = entity[:256]
    tags = {"service": str(root.resource.get("service.name", ""))[:200]}
    system = _first_of(llm, SYSTEM_KEYS)
    if system is not None:
        tags["system"] = system[:200]
    event["tags"] = {k: v for k, v in tags.items() if v}
    if not event["tags"]:
        del event["tags"]
    return event


def _names(answer: Span | None, spans: list[Span], settings: LlmSettings) -> tuple[str | None, str]:
    """(model, version): the mapping's, else the requested model and the model that answered; a trace naming no
    model is mapped by its service's name, else is the service's, "unversioned"."""
    source = [answer] if answer is not None else spans
    requested = next((m for m in map(requested_model, (s.attributes for s in source)) if m), None)
    answered = _first_of(source, RESPONSE_MODEL_KEYS) or requested
    if requested is None:
        requested = next((str(s.resource["service.name"]) for s in spans if s.resource.get("service.name")), None)
    mapped = settings.models.get(requested) if requested else None
    model = (mapped.model if mapped is not None and mapped.model else None) or (
        safe_name(requested) if requested else None)
    version = (mapped.version if mapped is not None and mapped.version else None) or (
        safe_name(answered) if answered else None) or UNVERSIONED
    return model, version


def _root(spans: list[Span]) -> Span:
    """The trace's local root: the span whose parent is not in the trace, earliest first."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id not in ids] or spans
    return min(roots, key=lambda s: (s.start_ns, -s.end_ns))


def _streaming(span: Span, tokens_out: int | None) -> dict[str, float]:
    """ttft and tpot (ms) of a streamed answer: the first chunk event, or a recorded time to first token."""
    first_ns = next((e.time_ns for e in span.events if e.name in FIRST_TOKEN_EVENTS and e.time_ns), None)
    if first_ns is not None and first_ns >= span.start_ns:
        ttft = (first_ns - span.start_ns) / 1e6
    else:
        seconds = _first(span.attributes, TTFT_KEYS, float)
        if seconds is None or not 0 <= seconds < 86_400:
            return {}
        ttft = seconds * 1000
    out = {"ttft": round(ttft, 3)}
    if tokens_out is not None and tokens_out > 1:
        decode_ms = max(0.0, (span.end_ns - span.start_ns) / 1e6 - ttft)
        out["tpot"] = round(decode_ms / (tokens_out - 1), 3)
    return out


def _embeddings(spans: list[Span], named: Mapping[str, Any]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for span in spans:
        vector = d.vector(span.attributes.get(EMBEDDING_VECTOR))
        if vector is not None:
            out.setdefault(PROMPT_EMBEDDING, vector)
    for name, value in named.items():
        vector = d.vector(value)
        if vector is not None and is_safe_name(name):
            out[name] = vector
    return out


def _finish_reason(attributes: Mapping[str, Any]) -> str | None:
    for key in FINISH_REASON_KEYS:
        value = attributes.get(key)
        if isinstance(value, list) and value and isinstance(value[0], str):
            value = value[0]
        if isinstance(value, str) and value:
            return value[:64]
    reason = d.output_finish_reason(attributes)  # the contrib instrumentation's streamed calls record it only there
    return reason[:64] if reason else None


def _error_message(span: Span) -> str:
    for event in span.events:
        if event.name == "exception" and isinstance(event.attributes.get("exception.message"), str):
            return event.attributes["exception.message"][:1000] or "exception"
    return span.status_message or str(span.attributes.get("error.type", "")) or f"span {span.name!r} failed"


def _total(spans: Iterable[Span], keys: tuple[str, ...]) -> int | None:
    counts = [c for c in (_first(s.attributes, keys, int) for s in spans) if c is not None]
    return sum(counts) if counts else None


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...], kind: type) -> Any:
    for key in keys:
        value = attributes.get(key)
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if kind is bool and isinstance(value, bool):
            return value
        if kind is str and isinstance(value, str) and value:
            return value
    return None


def _first_of(spans: Iterable[Span], keys: tuple[str, ...]) -> str | None:
    for span in spans:
        value = _first(span.attributes, keys, str)
        if value is not None:
            return value
    return None


def _ms(ns: int) -> float:
    return round(max(0, ns) / 1e6, 3)
