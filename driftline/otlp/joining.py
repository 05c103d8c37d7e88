"""A request's spans gathered until its trace is whole: bounded in traces, spans per trace and time.

A trace is whole when its local root span comes (no parent, or a parent in another process, as the span's flags
say); one whose root never comes here (its caller's span is exported elsewhere) is taken as it is
`wait_s` after its last span came, and so is the oldest when `max_traces` wait or their spans hold more than
`max_bytes` (each span charged its `size`). A trace taken is remembered
(`seen` of them), so its spans that come later are counted as late, not made into a second event.
Not thread-safe: the caller holds a lock.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from driftline.otlp.spans import Span

# OTLP span flags: the parent's is-remote bit is known, and set
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200


@dataclass
class _Trace:
    spans: list[Span] = field(default_factory=list)
    last_s: float = 0.0
    bytes: int = 0


@dataclass
class Added:
    whole: list[list[Span]] = field(default_factory=list)  # traces made whole (or pushed out) by this call
    dropped: int = 0  # spans beyond a trace's bound
    late: int = 0  # spans of traces already taken


class PendingTraces:
    def __init__(self, max_traces: int, max_spans: int, wait_s: float, max_bytes: int = 1 << 62,
                 seen: int = 100_000):
        self.max_traces, self.max_spans, self.wait_s, self.seen_max = max_traces, max_spans, wait_s, seen
        self.max_bytes = max_bytes
        self.bytes = 0
        self._traces: OrderedDict[str, _Trace] = OrderedDict()
        self._taken: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._traces)

    def add(self, spans: list[Span], now_s: float | None = None) -> Added:
        now_s = time.monotonic() if now_s is None else now_s
        out = Added()
        roots: list[str] = []
        for span in spans:
            if span.trace_id in self._taken:
                out.late += 1
                continue
            trace = self._traces.get(span.trace_id)
            if trace is None:
                if len(self._traces) >= self.max_traces:
                    out.whole.append(self._take(next(iter(self._traces))))
                trace = self._traces[span.trace_id] = _Trace()
            if len(trace.spans) >= self.max_spans:
                out.dropped += 1
                continue
            trace.spans.append(span)
            trace.last_s = now_s
            trace.bytes += span.size
            self.bytes += span.size
            self._traces.move_to_end(span.trace_id)
            if is_local_root(span):
                roots.append(span.trace_id)
        out.whole.extend(self._take(trace_id) for trace_id in dict.fromkeys(roots) if trace_id in self._traces)
        while self.bytes > self.max_bytes and self._traces:  # the least recently fed traces go first
            out.whole.append(self._take(next(iter(self._traces))))
        return out

    def expired(self, now_s: float | None = None) -> list[list[Span]]:
        """The traces whose last span came `wait_s` ago or more (oldest first)."""
        now_s = time.monotonic() if now_s is None else now_s
        old = [trace_id for trace_id, trace in self._traces.items() if now_s - trace.last_s >= self.wait_s]
        return [self._take(trace_id) for trace_id in old]

    def drain(self) -> list[list[Span]]:
        return [self._take(trace_id) for trace_id in list(self._traces)]

    def _take(self, trace_id: str) -> list[Span]:
        trace = self._traces.pop(trace_id)
        self.bytes -= trace.bytes
        spans = trace.spans
        self._taken[trace_id] = None
        if len(self._taken) > self.seen_max:
            self._taken.popitem(last=False)
        return spans


def is_local_root(span: Span) -> bool:
    """No parent, or a parent the span's flags say is remote (the service's server span under its caller's)."""
    return not span.parent_id or (span.flags & _HAS_IS_REMOTE != 0 and span.flags & _IS_REMOTE != 0)
