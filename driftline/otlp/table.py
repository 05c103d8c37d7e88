"""A file of past traces as a table: one row per request, its descriptors as columns (`driftline baseline --traces`).

The file holds OTLP/JSON export requests, one per line (what the OpenTelemetry Collector's file exporter writes),
or one request as a whole document. Every span of the file is joined by its trace (no waiting: the file is whole)
and mapped as the receiver maps a live trace (driftline/otlp/mapping.py), so a baseline from it and the live
windows hold the same features. Columns: the features, `prediction`, and `EMBEDDING_COLUMN.format(name)` holding
each embedding's vectors.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from driftline.errors import UserError
from driftline.llm_settings import LlmSettings
from driftline.otlp.mapping import trace_event
from driftline.otlp.spans import OtlpError, Span, decode_json

PREDICTION_COLUMN = "prediction"
EMBEDDING_COLUMN = "{}_embedding"


def read_trace_events(path: str, settings: LlmSettings) -> list[dict[str, Any]]:
    """The events of every request traced in `path` (UserError naming the line that is not OTLP/JSON)."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"--traces {path}: no such file")
    text = file.read_bytes()
    lines = [text] if text.lstrip().startswith(b"{") and text.count(b"\n{") == 0 else text.splitlines()
    traces: dict[str, list[Span]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            decoded = decode_json(line)
        except OtlpError as exc:
            raise UserError(f"--traces {path}, line {number}: {exc}") from None
        for span in decoded.spans:
            traces.setdefault(span.trace_id, []).append(span)
    refusal = settings.refusal()
    return [event for spans in traces.values() if (event := trace_event(spans, settings, refusal)) is not None]


def events_frame(events: list[dict[str, Any]]) -> Any:
    """One row per event: its features, its prediction (None for an error) and its embeddings' vectors."""
    import pandas as pd

    rows = []
    for event in events:
        row = dict(event["features"])
        row[PREDICTION_COLUMN] = event.get("prediction")
        for name, vector in (event.get("embeddings") or {}).items():
            row[EMBEDDING_COLUMN.format(name)] = vector
        rows.append(row)
    return pd.DataFrame(rows)
