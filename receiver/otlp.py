"""OpenTelemetry traces in: OTLP export requests of an LLM or RAG service, one event per request's trace.

Spans are decoded (driftline/otlp/spans.py), gathered per trace until the trace is whole (driftline/otlp/joining.py,
bounded) and mapped to events (driftline/otlp/mapping.py); the events take the receiver's way out (the contract's
checks, the bounded buffer, Kafka, dead letters). A call is admitted only with room in the buffer for one event per
trace it names, or refused whole (`Busy`, 503 / RESOURCE_EXHAUSTED) with nothing changed. The answer is OTLP's:
an `ExportTraceServiceResponse` whose partial success counts the spans not taken.
"""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTracePartialSuccess,
                                                                       ExportTraceServiceRequest,
                                                                       ExportTraceServiceResponse)

from driftline import defaults
from driftline.events import EventError, encode_event
from driftline.llm_settings import LlmSettings
from driftline.otlp.joining import PendingTraces
from driftline.otlp.mapping import trace_event
from driftline.otlp.spans import Decoded, OtlpError, Span, decode_json, decode_protobuf, from_request
from driftline.receiver.service import Busy, Letter, Outcome, Receiver, TooLarge

ORIGIN_OTLP = "receiver:/v1/traces"
PROTOBUF = "application/x-protobuf"
_REASONS_SHOWN = 5  # reasons one answer's partial success names (the rest are in the dead letters)


@dataclass
class OtlpConfig:
    llm: LlmSettings = field(default_factory=LlmSettings)
    wait_s: float = defaults.OTLP_TRACE_WAIT_SECONDS
    max_traces: int = defaults.OTLP_MAX_PENDING_TRACES
    max_spans: int = defaults.OTLP_MAX_SPANS_PER_TRACE
    max_pending_bytes: int = defaults.OTLP_MAX_PENDING_BYTES
    max_body_bytes: int = defaults.RECEIVER_MAX_BODY_BYTES  # what a compressed body may inflate to


@dataclass
class OtlpOutcome:
    """One call: the receiver's outcome of the traces it completed, and the spans not taken (with why)."""

    outcome: Outcome
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def message(self) -> str:
        return "; ".join(self.reasons)[:1000]


class OtlpIntake:
    def __init__(self, receiver: Receiver, config: OtlpConfig | None = None):
        self.receiver = receiver
        self.config = config or OtlpConfig()
        self._refusal = self.config.llm.refusal()
        self._pending = PendingTraces(self.config.max_traces, self.config.max_spans, self.config.wait_s,
                                      self.config.max_pending_bytes)
        self._lock = threading.Lock()
        receiver.attach(self)
        self.counts = {"spans": 0, "traces": 0, "not_llm": 0, "spans_dropped": 0, "spans_late": 0,
                       "spans_rejected": 0}

    # --- the doors ---------------------------------------------------------------------------------------------
    def accept_http(self, body: bytes, content_type: str, encoding: str = "") -> OtlpOutcome:
        """`POST /v1/traces`: protobuf or JSON by `content_type`, gzip or deflate by `encoding`."""
        body = _decompressed(body, encoding, self.config.max_body_bytes)
        try:
            decoded = decode_protobuf(body) if content_type == PROTOBUF else decode_json(body)
        except OtlpError as exc:
            outcome = Outcome(max_errors=self.receiver.config.max_errors)
            self.receiver._finish(outcome, [Letter(body, str(exc), None, ORIGIN_OTLP)])
            raise
        return self._accept(decoded)

    def accept_request(self, request: ExportTraceServiceRequest) -> OtlpOutcome:
        """The gRPC door's decoded request."""
        return self._accept(from_request(request))

    def _accept(self, decoded: Decoded) -> OtlpOutcome:
        traces = len({span.trace_id for span in decoded.spans})
        if traces > self.receiver.config.event_buffer:
            raise TooLarge(f"the call holds {traces} traces, more than the {self.receiver.config.event_buffer} events "
                           "the receiver buffers (receiver event buffer): export fewer spans per call")
        reservation = self.receiver._reserve(traces)  # Busy before anything changed
        result = OtlpOutcome(Outcome(max_errors=self.receiver.config.max_errors), decoded.rejected,
                             list(decoded.reasons))
        try:
            with self._lock:
                added = self._pending.add(decoded.spans)
            self._count(spans=len(decoded.spans), spans_dropped=added.dropped, spans_late=added.late,
                        spans_rejected=decoded.rejected)
            if added.dropped:
                result.rejected += added.dropped
                result.reasons.append(f"{added.dropped} spans beyond {self.config.max_spans} in one trace "
                                      "(OTLP max spans per trace)")
            self._emit(added.whole, result, reservation)
        finally:
            self.receiver._release(reservation)
        return result

    # --- traces out -------------------------------------------------------------------------------------------
    def _emit(self, traces: list[list[Span]], result: OtlpOutcome, reservation: Any) -> None:
        """Map, check and send the traces' events; a trace whose event is dead-lettered counts its spans as
        rejected in the call's partial success, with the reason."""
        letters: list[Letter] = []
        encoded = []
        outcome = result.outcome
        for spans in traces:
            before = len(letters)
            try:
                event = trace_event(spans, self.config.llm, self._refusal)
            except (EventError, ValueError, TypeError) as exc:  # a mapping bug must cost one trace, not the call
                letters.append(Letter(spans[0].trace_id.encode(), f"the trace could not be mapped: {exc}", None,
                                      ORIGIN_OTLP))
                continue
            if event is None:
                self._count(not_llm=1)
                continue
            self._count(traces=1)
            raw = self.receiver._checked(event, None, ORIGIN_OTLP, -1, {"trace_id": spans[0].trace_id}, letters)
            if raw is not None:
                encoded.append(raw)
            if len(letters) > before:
                result.rejected += len(spans)
                if len(result.reasons) < _REASONS_SHOWN:
                    letter = letters[-1]
                    result.reasons.append(f"trace {spans[0].trace_id}: {letter.field + ': ' if letter.field else ''}"
                                          f"{letter.reason}")
        self.receiver._submit(encoded, outcome, reservation, ORIGIN_OTLP, letters)
        self.receiver._finish(outcome, letters)

    def expire(self) -> int:
        """Map the traces whose root never came within the wait; returns how many."""
        with self._lock:
            traces = self._pending.expired()
        return self._flush(traces)

    def drain(self) -> int:
        with self._lock:
            traces = self._pending.drain()
        return self._flush(traces)

    def _flush(self, traces: list[list[Span]]) -> int:
        if not traces:
            return 0
        result = OtlpOutcome(Outcome(max_errors=self.receiver.config.max_errors))
        outcome = result.outcome
        try:
            reservation = self.receiver._reserve(len(traces))
        except Busy as exc:
            self.receiver._finish(outcome, [Letter(encode_event({"trace_id": spans[0].trace_id}),
                                                   f"the event buffer is full: {exc}", None, ORIGIN_OTLP)
                                            for spans in traces])
            return len(traces)
        try:
            self._emit(traces, result, reservation)
        finally:
            self.receiver._release(reservation)
        return len(traces)

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self.counts[name] += delta

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**{f"otlp_{k}": v for k, v in self.counts.items()}, "otlp_pending_traces": len(self._pending),
                    "otlp_pending_bytes": self._pending.bytes}


def export_response(result: OtlpOutcome) -> ExportTraceServiceResponse:
    """OTLP's answer: partial success when spans were not taken (the events' own refusals are dead letters)."""
    if not result.rejected and not result.reasons:
        return ExportTraceServiceResponse()
    return ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(rejected_spans=result.rejected,
                                                                                error_message=result.message()))


def _decompressed(body: bytes, encoding: str, bound: int) -> bytes:
    """A gzip or deflate body inflated, at most `bound` bytes (TooLarge past it: a zip bomb stops there)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpError(f"Content-Encoding {encoding[:32]!r}: expected gzip, deflate or none")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, bound + 1)
    except zlib.error as exc:
        raise OtlpError(f"the {encoding} body cannot be inflated: {exc}") from None
    if len(out) > bound:
        raise TooLarge(f"the body inflates to more than {bound} bytes (receiver max body)")
    return out
