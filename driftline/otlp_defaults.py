"""The OpenTelemetry trace intake's defaults (driftline/otlp/, the receiver's `POST /v1/traces` and OTLP gRPC).

Re-exported by driftline/defaults.py, so `defaults.NAME` stays the one way to read any default; the
"Default thresholds" table of docs/configuration.md is generated from this file too.
"""
from __future__ import annotations

# --- OpenTelemetry traces (driftline/otlp/; the receiver's /v1/traces and OTLP gRPC) ------------
# The OTLP gRPC port of `driftline receiver` (receiver_otlp_grpc_port; 0: off): the port every
# OpenTelemetry SDK exports to by default, so a service needs only the receiver's host.
OTLP_GRPC_PORT = 4317
# Spans one request's trace may hold: a RAG request is a handful (server, embedding, retrieval,
# LLM, cache); past this the trace is a loop gone wrong and its further spans are dropped, counted.
OTLP_MAX_SPANS_PER_TRACE = 256
# Spans one OTLP call may carry: the SDK's batch processor exports 512 at most per call.
OTLP_MAX_SPANS_PER_CALL = 8_192
# Attributes kept per span, and span events (the streamed chunks of an answer) read per span: the
# first token is the first event, so the rest are only counted.
OTLP_MAX_ATTRIBUTES_PER_SPAN = 512
OTLP_MAX_EVENTS_PER_SPAN = 64
# Characters of a string attribute kept (a prompt or an answer): lengths above it are read as this
# long, which no descriptor's bin tells apart.
OTLP_MAX_ATTRIBUTE_CHARS = 65_536
# Items of an array attribute kept (finish reasons, an embedding vector: the largest encoders are
# 4 096 wide, as EMBEDDING_MAX_DIMENSION).
OTLP_MAX_ARRAY_ITEMS = 4_096
# Traces waiting for their root span at most, and the bytes their spans hold; beyond either the
# least recently fed is judged as it is. A RAG request's spans are a few KB, or tens with prompts.
OTLP_MAX_PENDING_TRACES = 10_000
OTLP_MAX_PENDING_BYTES = 64 << 20
# Seconds a trace waits for its root span after its last span came: an SDK's batch processor
# exports every 5 s, so a request's spans are in within two exports.
OTLP_TRACE_WAIT_SECONDS = 10.0
