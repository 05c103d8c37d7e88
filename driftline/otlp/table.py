"""A file of past traces as a table: one row per request, its descriptors as columns (`driftline baseline --traces`).

The file holds OTLP/JSON export requests, one per line (what the OpenTelemetry Collector's file exporter writes),
or one request as a whole document. Every span of the file is joined by its trace (no waiting: the file is whole)
and mapped as the receiver maps a live trace (driftline/otlp/mapping.py), so a baseline from it and the live
windows hold the same features. Columns: the features and `prediction`; the embeddings are fitted apart
(`embedding_references`), each on the requests that carry it (a cache hit embeds nothing), as the live windows
sum only the events that carry it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from driftline.errors import UserError
from driftline.llm_settings import LlmSettings
from driftline.otlp.mapping import trace_event
from driftline.otlp.spans import OtlpError, Span, decode_json

PREDICTION_COLUMN = "prediction"


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
    """One row per event: its features and its prediction (None for an error)."""
    import pandas as pd

    return pd.DataFrame([{**event["features"], PREDICTION_COLUMN: event.get("prediction")} for event in events])


def embedding_references(events: list[dict[str, Any]],
                         on_fit: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Each embedding's reference, fitted on the vectors of the events that carry it."""
    from driftline.embeddings.reference import embedding_matrix, fit_reference

    vectors: dict[str, list[list[float]]] = {}
    for event in events:
        for name, vector in (event.get("embeddings") or {}).items():
            vectors.setdefault(name, []).append(vector)
    references = {}
    for name, rows in vectors.items():
        matrix = embedding_matrix(rows, name)
        if on_fit is not None:
            on_fit(name, matrix.shape[0], matrix.shape[1])
        references[name] = fit_reference(matrix, name)
    return references
