"""The receiver's work, apart from HTTP: halves in, pairs out as events, everything else dead-lettered.

Thread-safe: FastAPI runs the endpoints on a thread pool, and a sweeper thread dead-letters the
halves that waited too long. Nothing is accepted that cannot be buffered: a call whose events do not
fit in the sender's bounded buffer is refused whole (`Busy`), so the caller can retry it.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import orjson

from driftline import defaults
from driftline.client import EventSender
from driftline.config import TOPIC_INFERENCE
from driftline.events import EventError, encode_event, validate_inference
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.receiver.cloudevent import CloudEvent, from_http
from driftline.receiver.conversion import HINT_MODEL, model_of, pair_events, parse_ce_time, version_of
from driftline.receiver.dead_letter_store import DeadLetterStore
from driftline.receiver.dead_letters import DeadLetterSink
from driftline.receiver.lookups import StoreLookups
from driftline.receiver.pairing import REQUEST, RESPONSE, Half, Pairing

log = logging.getLogger(__name__)

ORIGIN_CLOUDEVENTS = "receiver:/"
ORIGIN_EVENTS = "receiver:/events"


class Busy(Exception):
    """The event buffer has no room for this call's events (Kafka slow or down): retry later."""


@dataclass
class ReceiverConfig:
    bootstrap_servers: str
    db_url: str
    security: KafkaSecurity | None = None
    pair_wait_s: float = defaults.RECEIVER_PAIR_WAIT_SECONDS
    max_pending: int = defaults.RECEIVER_MAX_PENDING
    seen_ids: int = defaults.RECEIVER_SEEN_IDS
    event_buffer: int = defaults.RECEIVER_EVENT_BUFFER
    baseline_recheck_s: float = defaults.RECEIVER_BASELINE_RECHECK_SECONDS
    sweep_interval_s: float = 1.0
    store_dead_letters: bool = True  # also as rows of the store's dead_letters table (receiver/dead_letter_store.py)


@dataclass
class Outcome:
    """What one call did: events produced, halves waiting, duplicates ignored, dead letters (with reasons)."""
    events: int = 0
    waiting: int = 0
    duplicates: int = 0
    dead_letters: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"events": self.events, "waiting": self.waiting, "duplicates": self.duplicates,
                "dead_lettered": len(self.dead_letters), "errors": self.dead_letters}


class Receiver:
    def __init__(self, config: ReceiverConfig):
        self.config = config
        self.pairing = Pairing(config.max_pending, config.pair_wait_s, config.seen_ids)
        self.lookups = StoreLookups(config.db_url, config.baseline_recheck_s)
        self.sender = EventSender(config.bootstrap_servers, max_buffered=config.event_buffer,
                                  client_id="driftline-receiver",
                                  producer_config=kafka_python_options(config.security))
        self.dead_letters = DeadLetterSink(config.bootstrap_servers, config.security,
                                           store=DeadLetterStore(config.db_url) if config.store_dead_letters else None)
        # halves: CloudEvents received; pairs: halves paired; unpaired: halves dead-lettered without their other half
        self.counts = {"halves": 0, "pairs": 0, "events": 0, "duplicates": 0, "dead_letters": 0, "unpaired": 0,
                       "expired": 0}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="driftline-receiver-sweeper", daemon=True)
        self._sweeper.start()

    # --- CloudEvents (KServe's logger, any proxy) ---------------------------------------
    def accept_cloudevents(self, headers: Mapping[str, str], body: bytes, hints: Mapping[str, str]) -> Outcome:
        """Take one HTTP request of CloudEvents; `hints`: model, version, output from the URL or headers."""
        outcome = Outcome()
        try:
            cloudevents = from_http(headers, body)
        except EventError as exc:
            self._dead_letter(outcome, body, exc.reason, exc.field, ORIGIN_CLOUDEVENTS)
            return outcome
        with self._lock:
            self._check_room(len(cloudevents))
            self.counts["halves"] += len(cloudevents)
            for event in cloudevents:
                self._accept_half(event, hints, outcome)
        return outcome

    def _accept_half(self, event: CloudEvent, hints: Mapping[str, str], outcome: Outcome) -> None:
        attributes = {**event.attributes, **{f"driftline.{k}": v for k, v in hints.items() if v}}
        ce_type, ce_id = attributes["type"], attributes.get("requestid") or attributes["id"]
        extra, model = {"ce_id": ce_id, "ce_type": ce_type}, _model_named(attributes)
        kind = REQUEST if ce_type.endswith(".inference.request") else (
            RESPONSE if ce_type.endswith(".inference.response") else None)
        if kind is None:
            self._dead_letter(outcome, event.data, f"unknown CloudEvent type {ce_type!r}: expected "
                              "org.kubeflow.serving.inference.request or .response", "type", ORIGIN_CLOUDEVENTS,
                              extra=extra, model=model)
            return
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError as exc:
            self._dead_letter(outcome, event.data, f"the {kind} body is not JSON: {exc}", "data",
                              ORIGIN_CLOUDEVENTS, extra=extra, model=model)
            return
        key = (attributes.get("namespace", ""), attributes.get("inferenceservicename", ""),
               attributes.get("component", ""), ce_id)
        received_ms = _now_ms()
        half = Half(key, kind, ce_id, attributes, data, event.data, parse_ce_time(attributes.get("time")) or received_ms)
        offer = self.pairing.offer(half)
        for evicted in offer.evicted:
            self._dead_letter_half(outcome, evicted, f"unpaired: evicted to make room, {self.config.max_pending} "
                                                     "halves were waiting (receiver max pending)", unpaired=True)
        if offer.duplicate:
            outcome.duplicates += 1
            self.counts["duplicates"] += 1
        elif offer.late:
            self._dead_letter_half(outcome, half, f"unpaired: its other half waited {self.config.pair_wait_s:g} s "
                                                  "and was dead-lettered", unpaired=True)
        elif offer.pair is None:
            outcome.waiting += 1
        else:
            self.counts["pairs"] += 1
            self._produce_pair(*offer.pair, outcome)

    def _produce_pair(self, request: Half, response: Half, outcome: Outcome) -> None:
        model = model_of(request, response)
        if model is None:
            self._dead_letter_pair(outcome, request, response, "no model: add ?model=NAME to the logger URL, or send "
                                   "ce-inferenceservicename", "model")
            return
        version = version_of(request, response) or self.lookups.production_version(model)
        if version is None:
            self._dead_letter_pair(outcome, request, response, f"no version for model {model!r}: add ?version=V to the "
                                   "logger URL, send X-Driftline-Version, or promote a production version", "version")
            return
        try:
            events = pair_events(request, response, model, version, self.lookups.feature_names(model, version))
        except EventError as exc:
            self._dead_letter_pair(outcome, request, response, exc.reason, exc.field)
            return
        for event in events:
            self._produce_checked(event, outcome, ORIGIN_CLOUDEVENTS, extra={"ce_id": request.ce_id})

    # --- POST /events: contract events as JSON lines ------------------------------------
    def accept_lines(self, body: bytes) -> Outcome:
        outcome = Outcome()
        lines = [(i, line) for i, line in enumerate(body.split(b"\n")) if line.strip()]
        with self._lock:
            self._check_room(len(lines))
            for number, line in lines:
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    self._dead_letter(outcome, line, f"not JSON: {exc}", None, ORIGIN_EVENTS, offset=number)
                    continue
                if not isinstance(doc, dict):
                    self._dead_letter(outcome, line, "an event is a JSON object", None, ORIGIN_EVENTS, offset=number)
                    continue
                self._produce_checked(doc, outcome, ORIGIN_EVENTS, offset=number, raw=line)
        return outcome

    # --- shared -------------------------------------------------------------------------
    def _check_room(self, count: int) -> None:
        # only the receiver submits, under self._lock: the room seen here is still there when it submits
        if self.sender.stats().buffered + count > self.config.event_buffer:
            raise Busy(f"{self.sender.stats().buffered} events are waiting for Kafka (receiver event buffer "
                       f"{self.config.event_buffer}); retry later")

    def _produce_checked(self, doc: dict[str, Any], outcome: Outcome, origin: str, offset: int = -1,
                         raw: bytes | None = None, extra: dict[str, str] | None = None) -> None:
        try:
            validate_inference(doc, decoded=raw is not None, max_ts_ms=int(_now_ms()) + defaults.COLLECTOR_MAX_FUTURE_SECONDS * 1000)
        except EventError as exc:
            self._dead_letter(outcome, raw if raw is not None else encode_event(doc), exc.reason, exc.field, origin,
                              offset=offset, extra=extra)
            return
        if not self.sender.submit(TOPIC_INFERENCE, None, raw if raw is not None else encode_event(doc)):
            # _check_room made room; a refusal here means the sender is closing
            self._dead_letter(outcome, raw or encode_event(doc), "the receiver is shutting down", None, origin,
                              offset=offset, extra=extra)
            return
        outcome.events += 1
        self.counts["events"] += 1

    def _dead_letter(self, outcome: Outcome, raw: bytes, reason: str, field_: str | None, origin: str,
                     offset: int = -1, extra: dict[str, str] | None = None, model: str | None = None) -> None:
        self.dead_letters.send(raw, reason, field_, origin, offset, extra, model)
        self.counts["dead_letters"] += 1
        outcome.dead_letters.append({"reason": reason, "field": field_, **({"line": offset} if offset >= 0 else {}),
                                     **(extra or {})})

    def _dead_letter_half(self, outcome: Outcome, half: Half, reason: str, unpaired: bool = False) -> None:
        self._dead_letter(outcome, half.raw, reason, None, ORIGIN_CLOUDEVENTS,
                          extra={"ce_id": half.ce_id, "ce_type": half.attributes.get("type", ""), "half": half.kind},
                          model=_model_named(half.attributes))
        if unpaired:
            self.counts["unpaired"] += 1

    def _dead_letter_pair(self, outcome: Outcome, request: Half, response: Half, reason: str,
                          field_: str | None) -> None:
        # both halves, each with the reason: either may be the one to fix and replay
        for half in (request, response):
            self._dead_letter(outcome, half.raw, reason, field_, ORIGIN_CLOUDEVENTS,
                              extra={"ce_id": half.ce_id, "ce_type": half.attributes.get("type", ""),
                                     "half": half.kind}, model=_model_named(half.attributes))

    def expire(self) -> int:
        """Dead-letter the halves that waited too long; returns how many."""
        outcome = Outcome()
        with self._lock:
            for half in self.pairing.expired():
                other = RESPONSE if half.kind == REQUEST else REQUEST
                self._dead_letter_half(outcome, half, f"unpaired: no {other} half within "
                                                      f"{self.config.pair_wait_s:g} s (receiver pair wait)",
                                       unpaired=True)
            self.counts["expired"] += len(outcome.dead_letters)
        return len(outcome.dead_letters)

    def _sweep(self) -> None:
        while not self._stop.wait(self.config.sweep_interval_s):
            try:
                self.expire()
            except Exception:  # the sweeper must outlive one bad round; the next one retries
                log.exception("expiring unpaired halves")

    def stats(self) -> dict[str, Any]:
        sender = self.sender.stats()
        return {**self.counts, "pending_halves": len(self.pairing), "buffered": sender.buffered,
                "sent": sender.sent, "dropped": sender.dropped, "failed": sender.failed,
                "dead_letters_sent": self.dead_letters.sent, "dead_letters_failed": self.dead_letters.failed,
                **self.dead_letters.store_stats()}

    def flush(self, timeout_s: float = 10.0) -> bool:
        self.dead_letters.flush(timeout_s)
        return self.sender.flush(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop: halves still waiting are dead-lettered (never lost), then both producers flush and close."""
        self._stop.set()
        self._sweeper.join(timeout=5)
        outcome = Outcome()
        with self._lock:
            for half in self.pairing.drain():
                self._dead_letter_half(outcome, half, "unpaired: the receiver stopped before its other half came",
                                       unpaired=True)
        self.sender.close(timeout_s)
        self.dead_letters.flush(timeout_s)
        self.dead_letters.close()


def _model_named(attributes: Mapping[str, str]) -> str | None:
    """The model a half names (the logger URL's ?model=, else its InferenceService), for its dead letters."""
    return attributes.get(HINT_MODEL) or attributes.get("inferenceservicename") or None


def _now_ms() -> float:
    return time.time() * 1000
