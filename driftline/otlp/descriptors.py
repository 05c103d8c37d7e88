"""What a trace says about one request, read from its spans' attributes: the prompt's and the answer's text,
and the descriptors an event carries as features (docs/llm.md, "What each check catches").

Pure functions. Texts are read from the conventions the common instrumentations write: OpenLLMetry's
``gen_ai.prompt.N.content`` / ``gen_ai.completion.N.content``, OpenInference's ``llm.input_messages.N.message.content``
/ ``llm.output_messages.N.message.content`` (``input.value`` / ``output.value`` otherwise), and the GenAI
conventions' ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON).
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

import orjson

from driftline import defaults
from driftline.llm_settings import REFUSAL_SEARCH_CHARS, TokenPrice

# The descriptors (event features), one name each
PROMPT_TOKENS = "prompt_tokens"
ANSWER_TOKENS = "answer_tokens"
PROMPT_CHARS = "prompt_chars"
ANSWER_CHARS = "answer_chars"
ANSWER_EMPTY = "answer_empty"
ANSWER_REFUSED = "answer_refused"
FINISH_REASON = "finish_reason"
RETRIEVAL_DOCUMENTS = "retrieval_documents"
RETRIEVAL_TOP_SCORE = "retrieval_top_score"
RETRIEVAL_MEAN_SCORE = "retrieval_mean_score"
RETRIEVAL_EMPTY = "retrieval_empty"
CACHE_HIT = "cache_hit"
COST_USD = "cost_usd"
LLM_CALLS = "llm_calls"
# Every descriptor but the cost, in every event: one the request has nothing for (a cache hit's prompt tokens) is
# null, which the data-quality checks hold to the baseline's null rate, where a lacking feature is a schema fault.
DESCRIPTORS = (CACHE_HIT, LLM_CALLS, PROMPT_TOKENS, ANSWER_TOKENS, PROMPT_CHARS, ANSWER_CHARS, ANSWER_EMPTY,
               ANSWER_REFUSED, FINISH_REASON, RETRIEVAL_DOCUMENTS, RETRIEVAL_EMPTY, RETRIEVAL_TOP_SCORE,
               RETRIEVAL_MEAN_SCORE)

_PROMPT_KEY = re.compile(r"(?:gen_ai\.prompt|llm\.input_messages)\.(\d+)\.(?:message\.)?content")
_ANSWER_KEY = re.compile(r"(?:gen_ai\.completion|llm\.output_messages)\.(\d+)\.(?:message\.)?content")
_DOCUMENT_KEY = re.compile(r"retrieval\.documents\.(\d+)\.document\.(score|content|id)")
MAX_MESSAGES = 256  # messages read from a JSON message list: a conversation longer than this is cut


def texts(attributes: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(the prompt's text, all input messages joined; the answer's text), None where the span records none."""
    prompt = _indexed(attributes, _PROMPT_KEY) or _json_messages(attributes.get("gen_ai.input.messages"))
    answer = _indexed(attributes, _ANSWER_KEY) or _json_messages(attributes.get("gen_ai.output.messages"))
    if prompt is None and isinstance(attributes.get("input.value"), str):
        prompt = attributes["input.value"]
    if answer is None and isinstance(attributes.get("output.value"), str):
        answer = attributes["output.value"]
    return prompt, answer


def _indexed(attributes: Mapping[str, Any], pattern: re.Pattern[str]) -> str | None:
    parts = sorted((int(m.group(1)), value) for key, value in attributes.items()
                   if isinstance(value, str) and (m := pattern.fullmatch(key)) is not None)
    return "\n".join(value for _, value in parts) if parts else None


def _json_messages(value: Any) -> str | None:
    """The text parts of a GenAI conventions message list (a JSON string); None when it is not one."""
    messages = _json(value)
    if not isinstance(messages, list):
        return None
    out = []
    for message in messages[:MAX_MESSAGES]:
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("content"), str):
            out.append(message["content"])
        parts = message.get("parts")
        for part in parts[:MAX_MESSAGES] if isinstance(parts, list) else ():
            if isinstance(part, dict) and isinstance(part.get("content"), str):
                out.append(part["content"])
    return "\n".join(out) if out else None


def output_finish_reason(attributes: Mapping[str, Any]) -> str | None:
    """The first answer's ``finish_reason`` in the GenAI conventions' ``gen_ai.output.messages`` (JSON), if any."""
    messages = _json(attributes.get("gen_ai.output.messages"))
    first = messages[0] if isinstance(messages, list) and messages else None
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return reason if isinstance(reason, str) and reason else None


def json_field(value: str, name: str) -> str | None:
    """A JSON object's string field (OpenInference's ``llm.invocation_parameters`` model, say); None otherwise."""
    doc = _json(value)
    field = doc.get(name) if isinstance(doc, dict) else None
    return field if isinstance(field, str) and field else None


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def text_descriptors(prompt: str | None, answer: str | None, refusal: re.Pattern[str]) -> dict[str, Any]:
    """Lengths in characters, and whether the answer is empty or refused (`refusal`: `LlmSettings.refusal()`)."""
    out: dict[str, Any] = {}
    if prompt is not None:
        out[PROMPT_CHARS] = len(prompt)
    if answer is not None:
        out[ANSWER_CHARS] = len(answer)
        out[ANSWER_EMPTY] = not answer.strip()
        out[ANSWER_REFUSED] = refusal.search(answer[:REFUSAL_SEARCH_CHARS]) is not None
    return out


def retrieval(attributes: Mapping[str, Any]) -> tuple[int, list[float]]:
    """(documents returned, their relevance scores) of a retriever span: OpenInference's
    ``retrieval.documents.N.document.*``, or a ``retrieval.scores`` list of numbers."""
    indices: set[int] = set()
    scores: dict[int, float] = {}
    for key, value in attributes.items():
        match = _DOCUMENT_KEY.fullmatch(key)
        if match is None:
            continue
        index = int(match.group(1))
        indices.add(index)
        if match.group(2) == "score" and _finite(value):
            scores[index] = float(value)
    listed = attributes.get("retrieval.scores")
    if not indices and isinstance(listed, list):
        numbers = [float(v) for v in listed if _finite(v)]
        return len(listed), numbers
    return len(indices), [scores[i] for i in sorted(scores)]


def retrieval_descriptors(documents: int, scores: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {RETRIEVAL_DOCUMENTS: documents, RETRIEVAL_EMPTY: documents == 0}
    if scores:
        out[RETRIEVAL_TOP_SCORE] = max(scores)
        out[RETRIEVAL_MEAN_SCORE] = sum(scores) / len(scores)
    return out


def cost(price: TokenPrice | None, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """The request's token cost in the price table's currency; None without a price or token counts."""
    if price is None or (tokens_in is None and tokens_out is None):
        return None
    return ((tokens_in or 0) * price.input_per_million + (tokens_out or 0) * price.output_per_million) / 1e6


def vector(value: Any) -> list[float] | None:
    """An embedding attribute as a vector the event contract takes (finite numbers within the value bound, at most
    EMBEDDING_MAX_DIMENSION), else None: a bad vector is left out rather than losing the request's event."""
    if not isinstance(value, list) or not 0 < len(value) <= defaults.EMBEDDING_MAX_DIMENSION:
        return None
    if not all(_finite(v) and abs(v) <= defaults.VALUE_MAX_ABS for v in value):
        return None
    return [float(v) for v in value]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
