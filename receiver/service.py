"""The receiver's work, apart from HTTP: halves in, pairs out as events, everything else dead-lettered.

Thread-safe: FastAPI runs the endpoints on a thread pool, and a sweeper thread dead-letters the
halves that waited too long. Two short locks: `_pairing_lock` around the pairing map (offering a
call's halves), `_lock` around the counts and the event buffer's reservations. Store lookups, the
conversion of pairs into events and the dead letters run outside both, so a call that reads the
store never holds up another call.

Nothing is accepted that cannot be buffered: a call's events are counted before it is admitted (the
request rows of the pairs it completes, or its JSON lines), and room for them is reserved in the
sender's bounded buffer, or the call is refused whole: `Busy` (503) when the buffer is busy, so the
caller can retry it; `TooLarge` (413) when it could never fit (more rows than the buffer holds, more
models than one call may name). A refused call changes nothing: no half waits, none is dead-lettered.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

import orjson

from driftline import defaults
from driftline.client import EventSender
from driftline.config import TOPIC_INFERENCE
from driftline.events import (MAX_EVENT_BYTES, REQUEST_ID_CHARS, VERSION_CHARS, EventError, encode_event,
                              validate_inference)
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.receiver.cloudevent import CloudEvent, from_http
from driftline.receiver.conversion import (HINT_MODEL, model_of, pair_events, parse_ce_time, request_id_problem,
                                           version_of)
from driftline.receiver.dead_letter_store import DeadLetterStore, LogThrottle
from driftline.receiver.dead_letters import DeadLetterSink
from driftline.receiver.lookups import StoreLookups
from driftline.receiver.pairing import REQUEST, RESPONSE, Half, Offer, Pairing
from driftline.receiver.payloads import rows_of

log = logging.getLogger(__name__)

ORIGIN_CLOUDEVENTS = "receiver:/"
ORIGIN_EVENTS = "receiver:/events"
_NON_BLANK_LINE = re.compile(rb"(?m)^[^\S\n]*\S")  # a line with something on it (blank lines are skipped)
_SHOWN = 200  # characters of a caller's name (type, model) an answer or a reason repeats


class Part(Protocol):
    """A door beside the CloudEvents one that holds work between calls (receiver/otlp.py): swept, counted, drained."""

    def expire(self) -> int: ...

    def drain(self) -> int: ...

    def stats(self) -> dict[str, int]: ...


class Busy(Exception):
    """The event buffer has no room for this call's events (Kafka slow or down): retry later."""


class TooLarge(Exception):
    """The call could never be taken whole, however long the caller waits: split it (413)."""


@dataclass
class ReceiverConfig:
    bootstrap_servers: str
    db_url: str
    security: KafkaSecurity | None = None
    pair_wait_s: float = defaults.RECEIVER_PAIR_WAIT_SECONDS
    max_pending: int = defaults.RECEIVER_MAX_PENDING
    max_pending_bytes: int = defaults.RECEIVER_MAX_PENDING_BYTES
    seen_ids: int = defaults.RECEIVER_SEEN_IDS
    event_buffer: int = defaults.RECEIVER_EVENT_BUFFER
    baseline_recheck_s: float = defaults.RECEIVER_BASELINE_RECHECK_SECONDS
    max_models_per_call: int = defaults.RECEIVER_MAX_MODELS_PER_CALL
    lookup_cache_entries: int = defaults.RECEIVER_LOOKUP_CACHE_ENTRIES
    max_errors: int = defaults.RECEIVER_MAX_ERRORS
    dead_letter_raw_bytes: int = defaults.RECEIVER_DEAD_LETTER_RAW_BYTES
    dead_letter_inflight: int = defaults.RECEIVER_DEAD_LETTER_INFLIGHT
    dead_letter_inflight_bytes: int = defaults.RECEIVER_DEAD_LETTER_INFLIGHT_BYTES
    sweep_interval_s: float = 1.0
    store_dead_letters: bool = True  # also as rows of the store's dead_letters table (receiver/dead_letter_store.py)


@dataclass
class Letter:
    """A dead letter to send once the call's locks are released; `unpaired`: a half without its other half."""
    raw: bytes
    reason: str
    field: str | None
    origin: str
    offset: int = -1
    extra: dict[str, str] | None = None
    model: str | None = None
    unpaired: bool = False


@dataclass
class Outcome:
    """What one call did: events produced, halves waiting, duplicates ignored, refusals dead-lettered (the first
    `max_errors` listed with their reasons in `dead_letters`, the others only counted)."""
    events: int = 0
    waiting: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    max_errors: int = defaults.RECEIVER_MAX_ERRORS

    def refused(self, letter: Letter) -> None:
        self.dead_lettered += 1
        if len(self.dead_letters) < self.max_errors:
            line = {"line": letter.offset} if letter.offset >= 0 else {}
            self.dead_letters.append({"reason": letter.reason, "field": letter.field, **line, **(letter.extra or {})})

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "waiting": self.waiting, "duplicates": self.duplicates,
                "dead_lettered": self.dead_lettered, "errors": self.dead_letters,
                "errors_left_out": self.dead_lettered - len(self.dead_letters)}


@dataclass
class _Reservation:
    left: int  # events this call may still hand to the sender


class Receiver:
    def __init__(self, config: ReceiverConfig):
        if config.max_errors < 1 or config.max_models_per_call < 1:
            raise ValueError("max_errors and max_models_per_call must be at least 1")
        self.config = config
        self.pairing = Pairing(config.max_pending, config.pair_wait_s, config.seen_ids, config.max_pending_bytes)
        self.lookups = StoreLookups(config.db_url, config.baseline_recheck_s, config.lookup_cache_entries)
        self.sender = EventSender(config.bootstrap_servers, max_buffered=config.event_buffer,
                                  client_id="driftline-receiver",
                                  producer_config=kafka_python_options(config.security))
        self.dead_letters = DeadLetterSink(config.bootstrap_servers, config.security,
                                           store=DeadLetterStore(config.db_url) if config.store_dead_letters else None,
                                           raw_bytes=config.dead_letter_raw_bytes,
                                           max_inflight=config.dead_letter_inflight,
                                           max_inflight_bytes=config.dead_letter_inflight_bytes)
        # halves: CloudEvents received; pairs: halves paired; unpaired: halves dead-lettered without their other half;
        # dead_letters: refusals dead-lettered (one letter each, or counted in a call's merged letter)
        self.counts = {"halves": 0, "pairs": 0, "events": 0, "duplicates": 0, "dead_letters": 0, "unpaired": 0,
                       "expired": 0}
        self._lock = threading.Lock()
        self._pairing_lock = threading.Lock()  # taken before _lock when both are held
        self._reserved = 0  # events admitted calls may still hand to the sender
        self._merged_log = LogThrottle(log)  # a flood of junk calls logs one line per interval, not one per call
        self._stop = threading.Event()
        self._parts: list[Part] = []
        self._sweeper = threading.Thread(target=self._sweep, name="driftline-receiver-sweeper", daemon=True)
        self._sweeper.start()

    # --- CloudEvents (KServe's logger, any proxy) ---------------------------------------
    def accept_cloudevents(self, headers: Mapping[str, str], body: bytes, hints: Mapping[str, str]) -> Outcome:
        """Take one HTTP request of CloudEvents; `hints`: model, version, output from the URL or headers."""
        outcome = Outcome(max_errors=self.config.max_errors)
        try:
            cloudevents = from_http(headers, body)
        except EventError as exc:
            self._finish(outcome, [Letter(body, exc.reason, exc.field, ORIGIN_CLOUDEVENTS)])
            return outcome
        letters: list[Letter] = []
        halves = [half for half in (self._door(event, hints, letters) for event in cloudevents) if half is not None]
        self._check_fits(halves)
        with self._pairing_lock:
            needed = self.pairing.rows_completed(halves)
            if needed > self.config.event_buffer:
                raise TooLarge(f"the call completes pairs of {needed} rows, more than the {self.config.event_buffer} "
                               "events the receiver buffers (receiver event buffer): send fewer pairs per call")
            reservation = self._reserve(needed)
            offers = [(half, self.pairing.offer(half)) for half in halves]
        self._count(halves=len(cloudevents))
        try:  # outside the pairing lock: lookups, conversion and validation hold up no other call
            for half, offer in offers:
                self._settle(half, offer, outcome, letters, reservation)
        finally:
            self._release(reservation)
        self._finish(outcome, letters)
        return outcome

    def _door(self, event: CloudEvent, hints: Mapping[str, str], letters: list[Letter]) -> Half | None:
        """The half of one CloudEvent, or None when it is refused at once (its letter added to `letters`)."""
        attributes = {**event.attributes, **{f"driftline.{k}": v for k, v in hints.items() if v}}
        ce_type, ce_id = attributes["type"], attributes.get("requestid") or attributes["id"]
        # a structured event's attributes may be megabytes: what answers and letters repeat of them is cut
        extra, model = {"ce_id": ce_id[:REQUEST_ID_CHARS], "ce_type": ce_type[:_SHOWN]}, _model_named(attributes)
        kind = REQUEST if ce_type.endswith(".inference.request") else (
            RESPONSE if ce_type.endswith(".inference.response") else None)
        if kind is None:
            letters.append(Letter(event.data, f"unknown CloudEvent type {ce_type[:_SHOWN]!r}: expected "
                                  "org.kubeflow.serving.inference.request or .response", "type", ORIGIN_CLOUDEVENTS,
                                  extra=extra, model=model))
            return None
        try:
            data = orjson.loads(event.data)  # only checked here: a waiting half keeps its bytes, parsed at pairing
        except orjson.JSONDecodeError as exc:
            letters.append(Letter(event.data, f"the {kind} body is not JSON: {exc}", "data", ORIGIN_CLOUDEVENTS,
                                  extra=extra, model=model))
            return None
        rows = rows_of(data, kind == REQUEST)
        problem = request_id_problem(ce_id, max(rows, 1)) or ("the request id holds NUL" if "\x00" in ce_id else None)
        if problem is not None:
            letters.append(Letter(event.data, problem, "requestid" if attributes.get("requestid") else "id",
                                  ORIGIN_CLOUDEVENTS, extra=extra, model=model))
            return None
        key = (attributes.get("namespace", ""), attributes.get("inferenceservicename", ""),
               attributes.get("component", ""), ce_id)
        time_ms = parse_ce_time(attributes.get("time")) or _now_ms()
        return Half(key, kind, ce_id, attributes, data, event.data, time_ms, rows=rows)

    def _check_fits(self, halves: list[Half]) -> None:
        """TooLarge for a call that could never be taken: too many models, or a half of more rows than the buffer."""
        models = {model_of(half, half) for half in halves}
        if len(models) > self.config.max_models_per_call:
            raise TooLarge(f"the call names {len(models)} models, more than the {self.config.max_models_per_call} one "
                           "call may (receiver max models per call): send each model's halves in calls of their own")
        for half in halves:
            if half.rows > self.config.event_buffer:
                raise TooLarge(f"a {half.kind} half of {half.rows} rows is more than the {self.config.event_buffer} "
                               "events the receiver buffers (receiver event buffer, --event-buffer): it could never "
                               "be taken whole; split the request")

    def _settle(self, half: Half, offer: Offer, outcome: Outcome, letters: list[Letter],
                reservation: _Reservation) -> None:
        for evicted in offer.evicted:
            letters.append(self._half_letter(evicted, f"unpaired: evicted to make room, {len(self.pairing)} halves of "
                                                      f"{self.pairing.bytes} bytes were waiting (receiver max pending "
                                                      f"{self.config.max_pending} halves, "
                                                      f"{self.config.max_pending_bytes} bytes)"))
        if offer.duplicate:
            outcome.duplicates += 1
            self._count(duplicates=1)
        elif offer.late:
            letters.append(self._half_letter(half, f"unpaired: its other half waited {self.config.pair_wait_s:g} s "
                                                   "and was dead-lettered"))
        elif offer.oversized:
            letters.append(self._half_letter(half, f"unpaired: the half holds {len(half.raw)} bytes, more than the "
                                                   f"{self.config.max_pending_bytes} halves may hold while they wait "
                                                   "(receiver max pending bytes)"))
        elif offer.pair is None:
            outcome.waiting += 1
        else:
            self._count(pairs=1)
            self._produce_pair(*offer.pair, outcome, letters, reservation)

    def _produce_pair(self, request: Half, response: Half, outcome: Outcome, letters: list[Letter],
                      reservation: _Reservation) -> None:
        for half in (request, response):
            if half.data is None:  # it waited as bytes (checked as JSON when it came)
                half.data = orjson.loads(half.raw)
        model = model_of(request, response)
        if model is None:
            letters += self._pair_letters(request, response, "no model: add ?model=NAME to the logger URL, or send "
                                          "ce-inferenceservicename", "model")
            return
        version = version_of(request, response) or self.lookups.production_version(model)
        if version is None:
            letters += self._pair_letters(request, response, f"no version for model {model[:_SHOWN]!r}: add ?version=V "
                                          "to the logger URL, send X-Driftline-Version, or promote a production "
                                          "version", "version")
            return
        try:
            events = pair_events(request, response, model, version, self.lookups.schema(model, version))
        except EventError as exc:
            letters += self._pair_letters(request, response, exc.reason, exc.field)
            return
        finally:
            request.data = response.data = None
        encoded = [raw for raw in (self._checked(event, None, ORIGIN_CLOUDEVENTS, -1, {"ce_id": request.ce_id}, letters)
                                   for event in events) if raw is not None]
        self._submit(encoded, outcome, reservation, ORIGIN_CLOUDEVENTS, letters)

    # --- POST /events: contract events as JSON lines ------------------------------------
    def accept_lines(self, body: bytes) -> Outcome:
        outcome = Outcome(max_errors=self.config.max_errors)
        self._refuse_too_many_lines(body)
        lines = [(i, line) for i, line in enumerate(body.split(b"\n")) if line.strip()]
        reservation = self._reserve(len(lines))
        letters: list[Letter] = []
        try:
            encoded = []
            for number, line in lines:
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    letters.append(Letter(line, f"not JSON: {exc}", None, ORIGIN_EVENTS, offset=number))
                    continue
                if not isinstance(doc, dict):
                    letters.append(Letter(line, "an event is a JSON object", None, ORIGIN_EVENTS, offset=number))
                    continue
                raw = self._checked(doc, line, ORIGIN_EVENTS, number, None, letters)
                if raw is not None:
                    encoded.append(raw)
            self._submit(encoded, outcome, reservation, ORIGIN_EVENTS, letters)
        finally:
            self._release(reservation)
        self._finish(outcome, letters)
        return outcome

    def _refuse_too_many_lines(self, body: bytes) -> None:
        """TooLarge for a body of more lines than the buffer holds, counted without an object per line (a 4 MiB
        body of one-byte lines would otherwise be two million objects just to be refused)."""
        limit = self.config.event_buffer
        if body.count(b"\n") < limit:  # cheap bound: fewer newlines than the buffer holds cannot be too many lines
            return
        for seen, _ in enumerate(_NON_BLANK_LINE.finditer(body), 1):
            if seen > limit:
                raise TooLarge(f"{seen} lines or more, more than the {limit} events the receiver buffers (receiver "
                               "event buffer): split the body")

    # --- shared -------------------------------------------------------------------------
    def _reserve(self, count: int) -> _Reservation:
        """Room for `count` events in the sender's buffer, held for this call; Busy when there is none."""
        with self._lock:
            buffered = self.sender.stats().buffered
            if buffered + self._reserved + count > self.config.event_buffer:
                raise Busy(f"{buffered + self._reserved} events are waiting for Kafka (receiver event buffer "
                           f"{self.config.event_buffer}); retry later")
            self._reserved += count
        return _Reservation(count)

    def _release(self, reservation: _Reservation) -> None:
        with self._lock:
            self._reserved -= reservation.left
            reservation.left = 0

    def _checked(self, doc: dict[str, Any], raw: bytes | None, origin: str, offset: int,
                 extra: dict[str, str] | None, letters: list[Letter]) -> bytes | None:
        """The event's bytes when it is valid (the contract, the store's limits, the message size), else None
        with its letter added."""
        try:
            validate_inference(doc, decoded=raw is not None,
                               max_ts_ms=int(_now_ms()) + defaults.COLLECTOR_MAX_FUTURE_SECONDS * 1000)
            _check_store_limits(doc)
            encoded = raw if raw is not None else encode_event(doc)
            if len(encoded) > MAX_EVENT_BYTES:  # the collector's bound, and a stock broker's message limit
                raise EventError(f"message is {len(encoded)} bytes, above the limit of {MAX_EVENT_BYTES}")
        except EventError as exc:
            letters.append(Letter(raw if raw is not None else encode_event(doc), exc.reason, exc.field, origin,
                                  offset=offset, extra=extra))
            return None
        return encoded

    def _submit(self, encoded: list[bytes], outcome: Outcome, reservation: _Reservation, origin: str,
                letters: list[Letter]) -> None:
        """Hand valid events to the sender within the call's reservation (an event beyond it, which counting
        rows should never leave, takes room if there is some, else is dead-lettered saying so)."""
        if len(encoded) > reservation.left:
            try:
                extra = self._reserve(len(encoded) - reservation.left)
            except Busy as exc:
                for raw in encoded[reservation.left:]:
                    letters.append(Letter(raw, f"the event buffer is full: {exc}", None, origin))
                encoded = encoded[:reservation.left]
            else:
                reservation.left += extra.left
        accepted = self.sender.submit_many(TOPIC_INFERENCE, encoded) if encoded else 0
        with self._lock:
            self._reserved -= len(encoded)
        reservation.left -= len(encoded)
        for raw in encoded[accepted:]:  # the room was reserved: only a closing sender refuses
            letters.append(Letter(raw, "the receiver is shutting down", None, origin))
        outcome.events += accepted
        self._count(events=accepted)

    def _half_letter(self, half: Half, reason: str) -> Letter:
        return Letter(half.raw, reason, None, ORIGIN_CLOUDEVENTS, extra=_half_extra(half),
                      model=_model_named(half.attributes), unpaired=True)

    def _pair_letters(self, request: Half, response: Half, reason: str, field_: str | None) -> list[Letter]:
        # both halves, each with the reason: either may be the one to fix and replay
        return [Letter(half.raw, reason, field_, ORIGIN_CLOUDEVENTS, extra=_half_extra(half),
                       model=_model_named(half.attributes)) for half in (request, response)]

    def _finish(self, outcome: Outcome, letters: list[Letter]) -> None:
        """Send a call's dead letters (outside the locks): the first `max_errors` and every unpaired half one by
        one, the other refusals together as one letter of their bytes, one per line, saying how many it holds."""
        merged: list[Letter] = []
        for letter in letters:
            outcome.refused(letter)
            if letter.unpaired or outcome.dead_lettered <= self.config.max_errors:
                self.dead_letters.send(letter.raw, letter.reason, letter.field, letter.origin, letter.offset,
                                       letter.extra, letter.model)
            else:
                merged.append(letter)
        if merged:
            first = merged[0]
            raw, size = _joined([letter.raw for letter in merged], self.dead_letters.raw_bytes)
            self.dead_letters.send(raw, f"{len(merged)} more refusals of one call (receiver max errors "
                                        f"{self.config.max_errors}), their bytes one per line; the first: "
                                        f"{first.reason}", first.field, first.origin, first.offset,
                                   {**(first.extra or {}), "merged": str(len(merged))}, first.model, raw_size=size)
            self._merged_log.warning("a call had %d refusals; %d were dead-lettered together in one letter (the "
                                     "first: %s)", outcome.dead_lettered, len(merged), first.reason)
        self._count(dead_letters=len(letters), unpaired=sum(1 for letter in letters if letter.unpaired))

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self.counts[name] += delta

    def expire(self) -> int:
        """Dead-letter the halves that waited too long; returns how many."""
        with self._pairing_lock:
            halves = self.pairing.expired()
        letters = [self._half_letter(half, f"unpaired: no {RESPONSE if half.kind == REQUEST else REQUEST} half within "
                                           f"{self.config.pair_wait_s:g} s (receiver pair wait)") for half in halves]
        self._finish(Outcome(max_errors=self.config.max_errors), letters)
        self._count(expired=len(letters))
        return len(letters)

    def attach(self, part: Part) -> None:
        """Sweep `part` with the halves, count it in `stats` and drain it at `close`."""
        self._parts.append(part)

    def _sweep(self) -> None:
        while not self._stop.wait(self.config.sweep_interval_s):
            try:
                self.expire()
                for part in self._parts:
                    part.expire()
            except Exception:  # the sweeper must outlive one bad round; the next one retries
                log.exception("expiring unpaired halves")

    def stats(self) -> dict[str, Any]:
        sender = self.sender.stats()
        with self._lock:
            counts = dict(self.counts)
        return {**counts, "pending_halves": len(self.pairing), "pending_bytes": self.pairing.bytes,
                "buffered": sender.buffered, "sent": sender.sent, "dropped": sender.dropped, "failed": sender.failed,
                "lookups_cached": self.lookups.cached(), **self.dead_letters.stats(),
                **{k: v for part in self._parts for k, v in part.stats().items()}}

    def flush(self, timeout_s: float = 10.0) -> bool:
        self.dead_letters.flush(timeout_s)
        return self.sender.flush(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop: halves still waiting are dead-lettered (never lost), then both producers flush and close."""
        self._stop.set()
        self._sweeper.join(timeout=5)
        with self._pairing_lock:
            halves = self.pairing.drain()
        self._finish(Outcome(max_errors=self.config.max_errors),
                     [self._half_letter(half, "unpaired: the receiver stopped before its other half came")
                      for half in halves])
        for part in self._parts:  # what still waits is judged as it is, never lost
            part.drain()
        self.sender.close(timeout_s)
        self.dead_letters.flush(timeout_s)
        self.dead_letters.close()


def _check_store_limits(doc: Mapping[str, Any]) -> None:
    """What the contract allows but the store cannot hold (the collector's check_store_limits): refused here, at the
    door, rather than answered 200 and dead-lettered by the collector."""
    version, request_id = doc.get("version"), doc.get("request_id")
    if isinstance(version, str) and len(version) > VERSION_CHARS:
        raise EventError(f"must be at most {VERSION_CHARS} characters (the store's limit)", "version")
    if isinstance(request_id, str) and (len(request_id) > REQUEST_ID_CHARS or "\x00" in request_id):
        raise EventError(f"must be at most {REQUEST_ID_CHARS} characters without NUL (the store's limit)",
                         "request_id")


def _joined(parts: list[bytes], bound: int) -> tuple[bytes, int]:
    """The parts joined by newlines, cut past `bound` bytes (never built whole), and the whole's size."""
    size = sum(len(part) for part in parts) + len(parts) - 1
    out, held = [], 0
    for part in parts:
        if held > bound:
            break
        out.append(part)
        held += len(part) + 1
    return b"\n".join(out), size


def _half_extra(half: Half) -> dict[str, str]:
    return {"ce_id": half.ce_id, "ce_type": half.attributes.get("type", ""), "half": half.kind}


def _model_named(attributes: Mapping[str, str]) -> str | None:
    """The model a half names (the logger URL's ?model=, else its InferenceService), for its dead letters."""
    return attributes.get(HINT_MODEL) or attributes.get("inferenceservicename") or None


def _now_ms() -> float:
    return time.time() * 1000
