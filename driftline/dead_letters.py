"""A dead letter's two shapes, shared by every stage that writes them (collector, receiver).

On the topic `driftline.inference.dlq`: the original bytes untouched, with headers saying why and
where it came from: ``driftline.reason``, ``driftline.field``, ``driftline.topic``,
``driftline.partition``, ``driftline.offset`` (so a fixed message can be replayed), plus any
stage-specific extras. In the store's `dead_letters` table: the same facts as columns, the model
when it can be read, and the bytes cut to a bound (`raw_size` keeps the size).
"""
from __future__ import annotations

from typing import Any

import orjson

# Kafka headers are bytes; reasons can quote a bad value, so they are capped.
MAX_HEADER_CHARS = 1_000


def dead_letter_headers(reason: str, field: str | None, topic: str, partition: int, offset: int,
                        extra: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
    """The headers of one dead letter; `extra` adds `driftline.<name>` headers (values capped like the reason)."""
    headers = [("driftline.reason", reason[:MAX_HEADER_CHARS].encode("utf-8", "replace")),
               ("driftline.field", (field or "").encode("utf-8", "replace")),
               ("driftline.topic", topic.encode("utf-8", "replace")),
               ("driftline.partition", str(partition).encode()),
               ("driftline.offset", str(offset).encode())]
    for name, value in (extra or {}).items():
        headers.append((f"driftline.{name}", value[:MAX_HEADER_CHARS].encode("utf-8", "replace")))
    return headers


def dead_letter_values(topic: str, partition: int | None, offset: int | None, reason: str, field: str | None,
                       model: str | None, raw: bytes, raw_bound: int) -> dict[str, Any]:
    """Column values for the store's `dead_letters` table (text made storable: PostgreSQL refuses NUL)."""
    return {"topic": topic, "partition": partition, "offset": offset,
            "reason": _text(reason), "field": _text(field)[:500] if field else None,
            "model": _text(model)[:200] if model else None, "raw": raw[:raw_bound], "raw_size": len(raw)}


def model_of_raw(raw: bytes) -> str | None:
    """The message's model, when it is JSON with a string `model` (helps people triage)."""
    if not raw or len(raw) > (1 << 20):
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    model = doc.get("model") if isinstance(doc, dict) else None
    return model if isinstance(model, str) and model else None


def _text(value: str | None) -> str | None:
    """A bad message's own text (a field name, a model) can hold NUL; it is shown escaped."""
    return value.replace("\x00", "\\x00") if value else value
