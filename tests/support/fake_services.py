"""Local stand-ins for the services driftline talks to over HTTP: Slack, PagerDuty, a signed webhook,
a retraining endpoint, and `Sink`, one server for a whole `driftline up` run.

Each fake is an http.server on 127.0.0.1 in a thread that answers like the real
service: Slack's incoming webhook answers 200 "ok" or 400 with "invalid_payload" /
"invalid_blocks"; PagerDuty Events API v2 answers 202 {"status": "success", ...},
400 {"status": "invalid event", "errors": [...]} for events that break the
contract, and keeps open incidents by dedup_key; the webhook verifies the HMAC
signature; the retraining endpoint checks the bearer token and deduplicates by
Idempotency-Key. `script(...)` makes the next requests fail (status codes, 429 with
Retry-After, or a slow answer that outlasts the client's timeout). Every request is
recorded (`requests`, `Recorded`), also those the fake refused.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from driftline.store.db import session_scope

ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, like a PagerDuty integration key
WEBHOOK_SECRET = "s3cret-for-tests"
RETRAIN_TOKEN = "retrain-token-for-tests"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    scripted: bool = False

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeService:
    requests: list[Recorded] = field(default_factory=list)
    script_queue: deque = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    delay: float = 0.0  # seconds every answer takes (to make concurrent clients overlap)
    # > 1: the first request waits (60 s at most) until this many are in flight at once, proving clients overlap
    hold_until_concurrent: int = 0
    overlapped: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0

    def script(self, *items: Any) -> None:
        """Answers for the next requests: a status code, (status, headers, body), or ("slow", seconds)."""
        with self.lock:
            self.script_queue.extend(items)

    def start(self) -> "FakeService":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                record = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with fake.lock:
                    fake.requests.append(record)
                    item = fake.script_queue.popleft() if fake.script_queue else None
                    fake.in_flight += 1
                    first = len(fake.requests) == 1
                    if fake.hold_until_concurrent and fake.in_flight >= fake.hold_until_concurrent:
                        fake.overlapped.set()
                try:
                    if first and fake.hold_until_concurrent:
                        fake.overlapped.wait(timeout=60)
                    self._answer(record, item)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _answer(self, record: Recorded, item: Any) -> None:
                if fake.delay:
                    time.sleep(min(fake.delay, 1.0))  # the service's latency is what is simulated
                if item is not None:
                    record.scripted = True
                    status, headers, payload = fake.scripted(item)
                else:
                    with fake.lock:
                        status, headers, payload = fake.respond(record)
                record.status = status
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def scripted(self, item: Any) -> tuple[int, dict[str, str], Any]:
        if isinstance(item, int):
            return item, {"Content-Type": "text/plain"}, f"scripted {item}"
        if isinstance(item, tuple) and item[0] == "slow":
            time.sleep(min(float(item[1]), 5.0))  # a slow answer, to outlast the client's timeout
            return 503, {}, "too slow"
        status, headers, body = item
        return status, headers, body

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        return 200, {}, "ok"

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def answered_ok(self) -> list[Recorded]:
        return [r for r in self.requests if 200 <= r.status < 300]


SLACK_BLOCK_TYPES = {"header", "section", "context", "divider", "actions", "image"}


class FakeSlack(FakeService):
    """Slack's incoming webhook: 200 "ok", or 400 invalid_payload / invalid_blocks."""

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        try:
            body = json.loads(record.body)
        except ValueError:
            return 400, {}, "invalid_payload"
        if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
            return 400, {}, "no_text"
        problem = slack_block_problem(body.get("blocks", []))
        if problem:
            return 400, {}, "invalid_blocks"
        return 200, {"Content-Type": "text/html"}, "ok"


def slack_block_problem(blocks: Any) -> str | None:
    """Slack's Block Kit limits, checked independently of the renderer."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "more than 50 blocks"
    for block in blocks:
        kind = block.get("type")
        if kind not in SLACK_BLOCK_TYPES:
            return f"unknown block {kind}"
        if kind == "header":
            text = block["text"]
            if text.get("type") != "plain_text" or len(text["text"]) > 150:
                return "header"
        if kind == "section":
            if "text" in block and len(block["text"]["text"]) > 3000:
                return "section text over 3000"
            fields = block.get("fields", [])
            if len(fields) > 10 or any(len(f["text"]) > 2000 for f in fields):
                return "fields"
            if "text" not in block and not fields:
                return "empty section"
        if kind == "context" and len(block.get("elements", [])) > 10:
            return "context elements"
    return None


PD_SEVERITIES = {"critical", "error", "warning", "info"}


class FakePagerDuty(FakeService):
    """PagerDuty Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/overview/)."""

    def __init__(self) -> None:
        super().__init__()
        self.open_incidents: dict[str, dict] = {}
        self.incidents_opened = 0
        self.events: list[dict] = []  # accepted events

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        try:
            event = json.loads(record.body)
        except ValueError:
            return 400, {}, {"status": "invalid event", "message": "Event object is invalid", "errors": ["bad json"]}
        errors = pagerduty_event_errors(event)
        if errors:
            return 400, {}, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}
        key = event.get("dedup_key")
        if event["event_action"] == "trigger":
            if key not in self.open_incidents:
                self.incidents_opened += 1
            self.open_incidents[key] = event
        elif event["event_action"] == "resolve":
            self.open_incidents.pop(key, None)
        self.events.append(event)
        return 202, {"Content-Type": "application/json"}, {"status": "success", "message": "Event processed",
                                                           "dedup_key": key}


def pagerduty_event_errors(event: Any) -> list[str]:
    errors = []
    if not isinstance(event, dict):
        return ["event must be an object"]
    if not isinstance(event.get("routing_key"), str) or len(event["routing_key"]) != 32:
        errors.append("routing_key must be a 32-character string")
    action = event.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        errors.append("event_action must be trigger, acknowledge or resolve")
    key = event.get("dedup_key")
    if key is not None and (not isinstance(key, str) or len(key) > 255):
        errors.append("dedup_key must be a string of at most 255 characters")
    if action in ("acknowledge", "resolve") and not key:
        errors.append("dedup_key is required for acknowledge and resolve")
    if action == "trigger":
        payload = event.get("payload")
        if not isinstance(payload, dict):
            return errors + ["payload is required for trigger"]
        summary = payload.get("summary")
        if not isinstance(summary, str) or not summary or len(summary) > 1024:
            errors.append("payload.summary must be 1-1024 characters")
        if not isinstance(payload.get("source"), str) or not payload["source"]:
            errors.append("payload.source is required")
        if payload.get("severity") not in PD_SEVERITIES:
            errors.append("payload.severity must be critical, error, warning or info")
        if "timestamp" in payload:
            try:
                datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00"))
            except (AttributeError, ValueError):
                errors.append("payload.timestamp must be ISO 8601")
        if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
            errors.append("payload.custom_details must be an object")
        for link in event.get("links", []):
            if not isinstance(link, dict) or "href" not in link:
                errors.append("links need href")
    return errors


class FakeWebhook(FakeService):
    """A receiver that verifies X-Driftline-Signature and deduplicates by Idempotency-Key."""

    def __init__(self, secret: str = WEBHOOK_SECRET) -> None:
        super().__init__()
        self.secret = secret
        self.delivered: dict[str, dict] = {}  # idempotency key -> body
        self.duplicates = 0

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        timestamp = record.headers.get("x-driftline-timestamp", "")
        expected = "sha256=" + hmac.new(self.secret.encode(), timestamp.encode() + b"." + record.body,
                                        hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, record.headers.get("x-driftline-signature", "")):
            return 401, {}, {"error": "bad signature"}
        if abs(time.time() - float(timestamp)) > 300:
            return 401, {}, {"error": "stale timestamp"}
        key = record.headers.get("idempotency-key")
        if not key:
            return 400, {}, {"error": "Idempotency-Key required"}
        if key in self.delivered:
            self.duplicates += 1
        else:
            self.delivered[key] = json.loads(record.body)
        return 200, {"Content-Type": "application/json"}, {"ok": True}


class FakeRetrain(FakeService):
    """Like the worker's POST /admin/retrain: bearer token, Idempotency-Key, 202 with a request id."""

    def __init__(self, token: str = RETRAIN_TOKEN) -> None:
        super().__init__()
        self.token = token
        self.accepted: dict[str, dict] = {}
        self.store_url: str | None = None  # set: record requests in this store, as the worker does

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        if record.headers.get("authorization") != f"Bearer {self.token}":
            return 401, {}, {"detail": "missing or wrong bearer token"}
        key = record.headers.get("idempotency-key")
        duplicate = key in self.accepted
        if not duplicate:
            self.accepted[key] = body = json.loads(record.body)
            if self.store_url:
                from driftline.store.models import RetrainRequest

                with session_scope(self.store_url) as s:
                    requested_at = datetime.fromisoformat(body["requested_at"].replace("Z", "+00:00"))
                    s.add(RetrainRequest(idempotency_key=key, model=body["model"], version=body["version"],
                                         reason=body, status="requested", requested_at=requested_at))
        request_id = list(self.accepted).index(key) + 1
        return 202, {"Content-Type": "application/json"}, {"request_id": str(request_id), "idempotency_key": key,
                                                           "status": "requested", "duplicate": duplicate}


class Sink(FakeService):
    """One server for a whole `driftline up` run: `/slack` answers as `FakeSlack`, `/pagerduty` as
    `FakePagerDuty`, any other path 404. Point the settings at `f"{sink.url}/slack"` and `.../pagerduty`.

    `fail_first[path] = N` makes the first N requests to that path answer 500 (a flaky channel).
    """

    def __init__(self) -> None:
        super().__init__()
        self.fail_first: dict[str, int] = {}
        self.routes: dict[str, FakeService] = {"/slack": FakeSlack(), "/pagerduty": FakePagerDuty()}

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        remaining = self.fail_first.get(record.path, 0)
        if remaining > 0:
            self.fail_first[record.path] = remaining - 1
            return 500, {"Content-Type": "application/json"}, {"status": "error"}
        route = self.routes.get(record.path)
        if route is None:
            return 404, {"Content-Type": "text/plain"}, "not found"
        return route.respond(record)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies of the requests to `path` that were accepted (2xx)."""
        return [r.json() for r in self.requests if r.path == path and 200 <= r.status < 300]

    def attempts(self, path: str) -> int:
        """Requests to `path`, accepted or not."""
        return sum(1 for r in self.requests if r.path == path)


class Trickler:
    """A receiver that answers one byte every `interval` seconds: each socket read gets data in
    time, so only a deadline on the whole call can end it. `status_line=True` trickles the
    status line and headers (the outcome is unknown until they end); False sends them at once
    and trickles the body. It trickles `total` bytes, or until `release()`. `started` is set
    when a request has been read, `completed` when every byte went out, `finished` when the
    handler is done (completed, released, or the client hung up)."""

    def __init__(self, *, status_line: bool = True, total: int = 120, interval: float = 0.5) -> None:
        self.status_line, self.total, self.interval = status_line, total, interval
        self.started = threading.Event()
        self.completed = threading.Event()
        self.finished = threading.Event()
        self._released = threading.Event()
        self.bodies: list[bytes] = []
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> "Trickler":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                fake.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                fake.started.set()
                body = b"x" * fake.total
                head = (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                        f"X-Padding: {'p' * fake.total}\r\n\r\n").encode()
                try:
                    if not fake.status_line:
                        self.wfile.write(head)
                        self.wfile.flush()
                    data = head + body if fake.status_line else body
                    for i in range(len(data)):
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        if fake._released.wait(fake.interval):
                            break
                    else:
                        fake.completed.set()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up: what a deadline does
                    pass
                finally:
                    self.close_connection = True
                    fake.finished.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def release(self) -> None:
        """Stop trickling: every handler ends at its next byte."""
        self._released.set()

    def stop(self) -> None:
        self.release()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
