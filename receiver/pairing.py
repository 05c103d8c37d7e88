"""Request and response halves waiting for each other, in bounded memory.

KServe's logger sends a request half and a response half per call, each a CloudEvent with the
same ce-id. `Pairing.offer` holds a half until its other half arrives; then the two leave as a pair.
Bounds (driftline.defaults): at most `max_pending` halves wait, each at most `wait_s` seconds;
`expired()` hands back the halves past their wait, and a full map hands back its oldest half to
make room: the caller dead-letters both. Keys of paired and expired halves are remembered (up to
`seen_max`, least recently used out first) so that a logger retry is recognised as a duplicate.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

REQUEST = "request"
RESPONSE = "response"
PAIRED = "paired"
EXPIRED = "expired"


@dataclass(slots=True)
class Half:
    key: Hashable  # what pairs the two halves: (namespace, service, component, ce-id)
    kind: str  # REQUEST or RESPONSE
    ce_id: str
    attributes: dict[str, str]  # the CloudEvent's attributes and extensions, and the URL's parameters
    data: Any  # the decoded JSON body
    raw: bytes  # the body as received (what a dead letter carries)
    time_ms: int  # the event's time (ce-time, else when it arrived)
    arrived_s: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Offer:
    """What became of an offered half: `pair` when it completed one, `duplicate` when it was seen already,
    `late` when its other half was already dead-lettered (so is this one); `evicted`: halves pushed out."""
    pair: tuple[Half, Half] | None = None
    duplicate: bool = False
    late: bool = False
    evicted: list[Half] = field(default_factory=list)


class Pairing:
    """Not thread-safe: the receiver calls it under its own lock."""

    def __init__(self, max_pending: int, wait_s: float, seen_max: int,
                 clock: Callable[[], float] = time.monotonic):
        if max_pending < 1 or seen_max < 1 or wait_s <= 0:
            raise ValueError("max_pending and seen_max must be at least 1, wait_s above 0")
        self.max_pending = max_pending
        self.wait_s = wait_s
        self.seen_max = seen_max
        self.clock = clock
        self._pending: OrderedDict[Hashable, Half] = OrderedDict()  # oldest first
        self._seen: OrderedDict[tuple[Hashable, str], str] = OrderedDict()  # (key, kind) -> PAIRED or EXPIRED

    def __len__(self) -> int:
        return len(self._pending)

    def offer(self, half: Half) -> Offer:
        half.arrived_s = self.clock()
        if (half.key, half.kind) in self._seen:
            self._seen.move_to_end((half.key, half.kind))
            return Offer(duplicate=True)
        waiting = self._pending.get(half.key)
        if waiting is not None:
            if waiting.kind == half.kind:  # a retry of the half already waiting: the first one stays
                return Offer(duplicate=True)
            del self._pending[half.key]
            self._remember(half.key, REQUEST, PAIRED)
            self._remember(half.key, RESPONSE, PAIRED)
            request, response = (waiting, half) if waiting.kind == REQUEST else (half, waiting)
            return Offer(pair=(request, response))
        other = RESPONSE if half.kind == REQUEST else REQUEST
        if self._seen.get((half.key, other)) == EXPIRED:
            self._remember(half.key, half.kind, EXPIRED)
            return Offer(late=True)
        evicted = []
        while len(self._pending) >= self.max_pending:
            _, oldest = self._pending.popitem(last=False)
            self._remember(oldest.key, oldest.kind, EXPIRED)
            evicted.append(oldest)
        self._pending[half.key] = half
        return Offer(evicted=evicted)

    def expired(self) -> list[Half]:
        """Remove and return the halves that waited `wait_s` or longer."""
        deadline = self.clock() - self.wait_s
        out = []
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.arrived_s > deadline:
                break
            self._pending.popitem(last=False)
            self._remember(oldest.key, oldest.kind, EXPIRED)
            out.append(oldest)
        return out

    def drain(self) -> list[Half]:
        """Every half still waiting (at shutdown: they are dead-lettered rather than lost)."""
        out = list(self._pending.values())
        self._pending.clear()
        return out

    def _remember(self, key: Hashable, kind: str, outcome: str) -> None:
        self._seen[(key, kind)] = outcome
        self._seen.move_to_end((key, kind))
        while len(self._seen) > self.seen_max:
            self._seen.popitem(last=False)
