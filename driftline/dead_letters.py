"""The dead-letter record's Kafka headers, shared by every stage that writes to `driftline.inference.dlq`.

A dead letter is the original bytes untouched, with headers saying why and where it came from:
``driftline.reason``, ``driftline.field``, ``driftline.topic``, ``driftline.partition``,
``driftline.offset`` (so a fixed message can be replayed), plus any stage-specific extras.
"""
from __future__ import annotations

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
