"""Request and response halves waiting for each other, in bounded memory.

KServe's logger sends a request half and a response half per call, each a CloudEvent with the
same ce-id. `Pairing.offer` holds a half until its other half arrives; then the two leave as a pair.
A waiting half keeps its body as the bytes received (the receiver parses it again at pairing: a
decoded JSON body takes many times its bytes). Bounds (driftline.defaults): at most `max_pending`
halves and `max_bytes` bytes wait (a half's body, attributes and bookkeeping, `Half.size`), each
at most `wait_s` seconds; `expired()` hands back the halves past their wait, a full map hands back
its oldest halves to make room, and a half larger than `max_bytes` on its own is handed back at
once (`Offer.oversized`): the caller dead-letters them all. Keys of paired and expired halves are
remembered (up to `seen_max`, least recently used out first, as fixed-size digests whatever the
ids' length) so that a logger retry is recognised as a duplicate.
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

REQUEST = "request"
RESPONSE = "response"
PAIRED = "paired"
EXPIRED = "expired"
# A waiting half's own objects (the Half, its dict entry, key tuple, attribute dict and strings): counted with
# its bytes so that a flood of empty bodies meets the byte bound too (measured ~0.9 KB besides the attributes' text).
HALF_OVERHEAD_BYTES = 1_024


@dataclass(slots=True)
class Half:
    key: Hashable  # what pairs the two halves: (namespace, service, component, ce-id)
    kind: str  # REQUEST or RESPONSE
    ce_id: str
    attributes: dict[str, str]  # the CloudEvent's attributes and extensions, and the URL's parameters
    data: Any  # the decoded JSON body while a call holds the half; None while it waits (parsed again at pairing)
    raw: bytes  # the body as received (what a dead letter carries)
    time_ms: float  # the event's time (ce-time, else when it arrived)
    rows: int = 0  # rows its body holds (a request's instances or input rows, a response's predictions)
    arrived_s: float = field(default_factory=time.monotonic)
    size: int = 0  # the bytes it counts against the pending bound while it waits


def half_size(half: Half) -> int:
    """The bytes a waiting half holds: its body, its attributes (ids included) and a fixed overhead."""
    return (HALF_OVERHEAD_BYTES + len(half.raw)
            + sum(len(name) + len(value) for name, value in half.attributes.items()))


@dataclass(slots=True)
class Offer:
    """What became of an offered half: `pair` when it completed one, `duplicate` when it was seen already,
    `late` when its other half was already dead-lettered (so is this one), `oversized` when it alone is
    larger than the byte bound (dead-lettered, never kept); `evicted`: halves pushed out to make room."""
    pair: tuple[Half, Half] | None = None
    duplicate: bool = False
    late: bool = False
    oversized: bool = False
    evicted: list[Half] = field(default_factory=list)


def _seen_key(key: Hashable, kind: str) -> bytes:
    # 16 bytes per remembered half however long its namespace, service, component or ce-id
    return hashlib.blake2b(repr((key, kind)).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Pairing:
    """Not thread-safe: the receiver calls it under its own lock."""

    def __init__(self, max_pending: int, wait_s: float, seen_max: int, max_bytes: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if max_pending < 1 or seen_max < 1 or wait_s <= 0 or (max_bytes is not None and max_bytes < 1):
            raise ValueError("max_pending, seen_max and max_bytes must be at least 1, wait_s above 0")
        self.max_pending = max_pending
        self.max_bytes = max_bytes
        self.wait_s = wait_s
        self.seen_max = seen_max
        self.clock = clock
        self.bytes = 0  # what the waiting halves hold (Half.size summed)
        self._pending: OrderedDict[Hashable, Half] = OrderedDict()  # oldest first
        self._seen: OrderedDict[bytes, str] = OrderedDict()  # digest of (key, kind) -> PAIRED or EXPIRED

    def __len__(self) -> int:
        return len(self._pending)

    def offer(self, half: Half) -> Offer:
        half.arrived_s = self.clock()
        seen = _seen_key(half.key, half.kind)
        if seen in self._seen:
            self._seen.move_to_end(seen)
            return Offer(duplicate=True)
        waiting = self._pending.get(half.key)
        if waiting is not None:
            if waiting.kind == half.kind:  # a retry of the half already waiting: the first one stays
                return Offer(duplicate=True)
            self._take(half.key)
            self._remember(half.key, REQUEST, PAIRED)
            self._remember(half.key, RESPONSE, PAIRED)
            request, response = (waiting, half) if waiting.kind == REQUEST else (half, waiting)
            return Offer(pair=(request, response))
        other = RESPONSE if half.kind == REQUEST else REQUEST
        if self._seen.get(_seen_key(half.key, other)) == EXPIRED:
            self._remember(half.key, half.kind, EXPIRED)
            return Offer(late=True)
        half.size = half_size(half)
        if self.max_bytes is not None and half.size > self.max_bytes:
            self._remember(half.key, half.kind, EXPIRED)  # its other half follows it to the dead letters
            return Offer(oversized=True)
        evicted = []
        while self._pending and (len(self._pending) >= self.max_pending or
                                 (self.max_bytes is not None and self.bytes + half.size > self.max_bytes)):
            oldest = self._take(next(iter(self._pending)))
            self._remember(oldest.key, oldest.kind, EXPIRED)
            evicted.append(oldest)
        half.data = None  # only the bytes wait: the decoded body is rebuilt at pairing
        self._pending[half.key] = half
        self.bytes += half.size
        return Offer(evicted=evicted)

    def rows_completed(self, halves: Sequence[Half]) -> int:
        """The request rows of the pairs that offering `halves` in this order would complete (changes nothing):
        the events a call may produce, counted before it is admitted."""
        state: dict[Hashable, Half | None] = {}  # this call's effect on a key: the half left waiting, None once paired
        rows = 0
        for half in halves:
            if _seen_key(half.key, half.kind) in self._seen:
                continue
            if half.key in state:
                waiting = state[half.key]
                if waiting is None:  # paired earlier in this call: a retry
                    continue
            else:
                waiting = self._pending.get(half.key)
            if waiting is None:
                state[half.key] = half
            elif waiting.kind != half.kind:
                rows += waiting.rows if waiting.kind == REQUEST else half.rows
                state[half.key] = None
        return rows

    def expired(self) -> list[Half]:
        """Remove and return the halves that waited `wait_s` or longer."""
        deadline = self.clock() - self.wait_s
        out = []
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.arrived_s > deadline:
                break
            self._take(oldest.key)
            self._remember(oldest.key, oldest.kind, EXPIRED)
            out.append(oldest)
        return out

    def drain(self) -> list[Half]:
        """Every half still waiting (at shutdown: they are dead-lettered rather than lost)."""
        out = list(self._pending.values())
        self._pending.clear()
        self.bytes = 0
        return out

    def _take(self, key: Hashable) -> Half:
        half = self._pending.pop(key)
        self.bytes -= half.size
        return half

    def _remember(self, key: Hashable, kind: str, outcome: str) -> None:
        seen = _seen_key(key, kind)
        self._seen[seen] = outcome
        self._seen.move_to_end(seen)
        while len(self._seen) > self.seen_max:
            self._seen.popitem(last=False)
