"""`InferenceCall`: the values of one logged inference, as `InferenceLogger.log` takes them, and the contract
event they make (the inference event of docs/contract.md).

`log` and `log_soon` keep their keyword arguments for users; each builds one `InferenceCall`, and the event is
made from it by `InferenceCall.event`, with the logger's model, version, device and tags.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from driftline.defaults import TOKENS_MAX
from driftline.embeddings.contract import as_lists
from driftline.events import INFERENCE_SCHEMA, TOKENS_IN, TOKENS_OUT, is_token_count
from driftline.vocabulary import PREDICTED_CLASS

__all__ = ["InferenceCall", "LoggerIdentity"]


def _token_count(field: str, count: Any) -> int:
    """`count` as the contract's token count (numpy integers too); ValueError, naming `field`, for anything else."""
    value = int(count) if isinstance(count, numbers.Integral) and not isinstance(count, bool) else count
    if not is_token_count(value):
        raise ValueError(f"{field} must be a whole number from 0 to {TOKENS_MAX}, got {count!r}")
    return value


def _as_dict(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """`mapping` itself when it is a dict (the event is encoded at once, so no copy is needed), else a dict of it."""
    return mapping if isinstance(mapping, dict) else dict(mapping)


@dataclass(frozen=True, slots=True)
class LoggerIdentity:
    """What every event of one logger carries: its model, its version (unless an event names its own), the
    device and the tags."""

    model: str
    version: str
    device: str | None = None
    tags: Mapping[str, str] | None = None


@dataclass(slots=True)
class InferenceCall:
    """One `log` call's values (`InferenceLogger.log` documents each); `ts` and `event_id` are set by then."""

    features: Mapping[str, Any]
    prediction: Any
    latency_ms: float | Mapping[str, float]
    ts: str | int
    event_id: str
    request_id: str | None = None
    inputs: Mapping[str, Any] | None = None
    entity_id: str | None = None
    version: str | None = None
    batch_size: int | None = None
    cache_hit: bool | None = None
    status: str = "ok"
    error: str | None = None
    tags: Mapping[str, str] | None = None
    role: str | None = None
    feature_ts: Mapping[str, str | int] | None = None
    feature_age_ms: Mapping[str, float] | None = None
    embeddings: Mapping[str, Any] | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    predicted_class: Any = None

    def event(self, identity: LoggerIdentity) -> dict[str, Any]:
        """The contract's inference event (ValueError for a token count or an embedding it would refuse)."""
        latency_ms = self.latency_ms
        event: dict[str, Any] = {
            "schema": INFERENCE_SCHEMA,
            "event_id": self.event_id,
            "request_id": self.request_id or self.event_id,
            "ts": self.ts,
            "model": identity.model,
            "version": str(self.version) if self.version is not None else identity.version,
            "features": _as_dict(self.features),
            "latency_ms": ({"total": float(latency_ms)} if isinstance(latency_ms, (int, float))
                           else _as_dict(latency_ms)),
            "status": self.status,
        }
        if self.prediction is not None:
            event["prediction"] = self.prediction
        if self.error is not None:
            event["error"] = self.error
        if self.inputs is not None:
            event["inputs"] = _as_dict(self.inputs)
        if self.entity_id is not None:
            event["entity_id"] = self.entity_id
        if self.batch_size is not None:
            event["batch_size"] = self.batch_size
        if self.cache_hit is not None:
            event["cache_hit"] = self.cache_hit
        if identity.device is not None:
            event["device"] = identity.device
        if identity.tags or self.tags:
            event["tags"] = {**(identity.tags or {}), **(self.tags or {})}
        if self.role is not None:
            event["role"] = self.role
        if self.feature_ts is not None:
            event["feature_ts"] = _as_dict(self.feature_ts)
        if self.feature_age_ms is not None:
            event["feature_age_ms"] = _as_dict(self.feature_age_ms)
        if self.embeddings:
            event["embeddings"] = as_lists(self.embeddings)
        for field, count in ((TOKENS_IN, self.tokens_in), (TOKENS_OUT, self.tokens_out)):
            if count is not None:
                event[field] = _token_count(field, count)
        if self.predicted_class is not None:
            event[PREDICTED_CLASS] = self.predicted_class
        return event
