"""The one front door of every driftline HTTP server: what a request must be before any endpoint sees it.

A browser page can reach a server on loopback too, so every server applies the same rules (`IngressRules`):

1. `Host` must be a name the server answers: localhost, 127.0.0.1, [::1] (always), plus the server's own
   allowed-hosts setting (`worker_allowed_hosts`, `receiver_allowed_hosts`); else 400 naming the setting.
   A DNS-rebinding page's requests carry the page's own name in `Host`.
2. Cross-origin protection, as Go's `net/http.CrossOriginProtection`, for every method but GET, HEAD and
   OPTIONS: `Sec-Fetch-Site` other than `same-origin` or `none` is a cross-site browser request (403);
   without it, an `Origin` whose host:port differs from `Host` is one too (403); a request with neither is a
   non-browser client (curl, tritonclient, KServe's logger) and passes.
3. The body's declared type, per route (`BodyRule`): JSON endpoints take `application/json` only; the Open
   Inference Protocol takes JSON or no Content-Type (tritonclient sends none); the receiver takes CloudEvents
   (structured, batched, or binary mode: `ce-*` headers with `application/json` or none) and JSON lines (or
   none). The types a cross-site form or fetch sends without a CORS preflight (text/plain, urlencoded,
   multipart) are 415 everywhere; a body without a type passes only where non-browser clients send one so, as
   a browser sends Origin with every POST (rule 2).
4. Limits (`Limits`): a body byte budget (413, on Content-Length and while it streams), a body deadline (408
   and the connection closed), a deadline on each request's head (the connection closed) and a cap on open
   connections (503 beyond it).

The servers: the worker's REST and OIP REST (ASGI, worker/server.py), the receiver (ASGI, receiver/app.py) and
the collector's and scheduler's /metrics (WSGI, driftline/metrics_endpoint.py: `serve_wsgi`). Not here: the
dashboard is Streamlit's own server (its XSRF protection and sign-on: dashboard/), and the worker's OIP gRPC
(worker/oip_grpc.py) speaks HTTP/2 gRPC, which no browser page can send. tests/core/test_ingress_coverage.py
fails when a server is added without this guard. The rules are pure (`IngressRules.refusal`): no socket needed.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit

import orjson

from driftline.hosts import LOOPBACK_NAMES, host_allowed

JSON = "application/json"
PROTOBUF = "application/x-protobuf"
CLOUDEVENT = "application/cloudevents+json"
CLOUDEVENT_BATCH = "application/cloudevents-batch+json"
JSON_LINES = ("application/x-ndjson", "application/jsonl", JSON)
# Go's CrossOriginProtection exempts these: they must not change state, and a page can send them anyway.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Sec-Fetch-Site values of a request the server's own page (or the user, typing a URL) made.
SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})
# Distinct Host values whose verdict is remembered per server (the check runs on every request).
HOST_VERDICTS_CACHED = 64


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


class BodyRefused(Exception):
    """Raised from `receive` when a body overruns its budget or deadline; the guard answers `refusal`."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.detail)
        self.refusal = refusal


def media_type(content_type: str | None) -> str | None:
    """The media type of a Content-Type header, lower-case, parameters dropped; None when absent ("" when empty)."""
    return None if content_type is None else content_type.split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class BodyRule:
    """What a route's bodies may be declared as (`what`: them, in messages). `binary`: types accepted only with
    `ce-*` headers (CloudEvents' binary mode)."""

    what: str
    accepted: tuple[str, ...] = ()
    binary: tuple[str | None, ...] = ()  # None: no Content-Type (ce-* headers alone force a CORS preflight)
    none_ok: bool = False  # no Content-Type at all: non-browser clients such as tritonclient
    takes_body: bool = True  # False: the route answers GET and HEAD only (405 otherwise)

    def refusal(self, method: str, headers: Mapping[str, str]) -> Refusal | None:
        if not self.takes_body:
            return None if method in SAFE_METHODS else Refusal(405, f"{self.what} answers GET and HEAD only")
        if method not in BODY_METHODS:
            return None
        declared = headers.get("content-type")
        media = media_type(declared)
        if (media is None and self.none_ok) or media in self.accepted:
            return None
        if media in self.binary and any(name.startswith("ce-") for name in headers):
            return None
        got = "no Content-Type" if declared is None else repr(declared)
        return Refusal(415, f"{self.what} must be declared as {self._wanted()} (got {got})")

    def _wanted(self) -> str:
        wanted = f"Content-Type: {' or '.join(self.accepted)}"
        if self.binary:
            types = " or ".join(m for m in self.binary if m) + (" or none" if None in self.binary else "")
            wanted += f", or binary mode: ce-* headers with Content-Type: {types}"
        return wanted + (", or no Content-Type" if self.none_ok else "")


JSON_BODY = BodyRule("POST bodies", (JSON,))
OIP_BODY = BodyRule("Open Inference Protocol bodies", (JSON,), none_ok=True)
CLOUDEVENTS_BODY = BodyRule("CloudEvents", (CLOUDEVENT, CLOUDEVENT_BATCH), binary=(JSON, None))
JSON_LINES_BODY = BodyRule("JSON lines", JSON_LINES, none_ok=True)
OTLP_BODY = BodyRule("OTLP traces", (PROTOBUF, JSON))  # OpenTelemetry's exporters always declare one  # as OIP: producers such as httpx send none
NO_BODY = BodyRule("this server", takes_body=False)


@dataclass(frozen=True)
class Limits:
    """What one client may hold of a server: bytes and seconds of a body, seconds of a head, connections."""

    max_body_bytes: int
    body_timeout_s: float
    head_timeout_s: float
    max_connections: int

    def __post_init__(self) -> None:
        if self.max_body_bytes < 0:
            raise ValueError(f"max_body_bytes must be at least 0, got {self.max_body_bytes}")
        for name in ("body_timeout_s", "head_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0, got {getattr(self, name)}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn settings for the connection cap (503 beyond, `limit_concurrency`) and the head deadline."""
        return {"limit_concurrency": self.max_connections, "http": head_deadline_protocol(self.head_timeout_s)}


def cross_origin(headers: Mapping[str, str]) -> str | None:
    """Why a request is a cross-origin browser request (Go's CrossOriginProtection), or None when it is not."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return None if site.strip().lower() in SAME_ORIGIN_FETCH else f"Sec-Fetch-Site is {site!r}"
    origin = headers.get("origin")
    if origin is None:
        return None  # neither header: not a browser (browsers send Origin on every cross-origin POST)
    try:
        origin_host = urlsplit(origin.strip()).netloc.lower()
    except ValueError:
        origin_host = ""
    host = (headers.get("host") or "").strip().lower()
    return None if origin_host and origin_host == host else f"Origin {origin!r} is not this server ({host!r})"


def _json_everywhere(_path: str) -> BodyRule:
    return JSON_BODY


def _detail_key(_path: str) -> str:
    return "detail"


@dataclass(frozen=True)
class IngressRules:
    """One server's rules: its name (in messages), allowed Host names, the setting that lists them, limits,
    the body rule of each path, and the key of the error document on each path ({"detail": ...})."""

    server: str
    allowed_hosts: frozenset[str]
    hosts_setting: str | None
    limits: Limits
    body_rule: Callable[[str], BodyRule] = _json_everywhere
    error_key: Callable[[str], str] = _detail_key
    _host_allowed: Callable[[str | None], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allowed = self.allowed_hosts
        cached = functools.lru_cache(HOST_VERDICTS_CACHED)(lambda header: host_allowed(header, allowed))
        object.__setattr__(self, "_host_allowed", cached)

    def refusal(self, method: str, path: str, headers: Mapping[str, str]) -> Refusal | None:
        """Why this request goes no further (pure: headers by lower-case name), or None when it may."""
        host = headers.get("host")
        if not self._host_allowed(host):
            where = (f"if clients reach it under that name, add it to {self.hosts_setting}" if self.hosts_setting
                     else f"it answers only {', '.join(LOOPBACK_NAMES)}")
            return Refusal(400, f"this {self.server} does not serve the host {host!r}; {where}")
        if method not in SAFE_METHODS and (why := cross_origin(headers)) is not None:
            return Refusal(403, f"cross-origin request refused ({why}): the {self.server} answers its own "
                                "pages and non-browser clients only")
        if (refused := self.body_rule(path).refusal(method, headers)) is not None:
            return refused
        length = headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit()):
                return Refusal(400, "invalid Content-Length header")
            if int(length) > self.limits.max_body_bytes:
                return Refusal(413, f"the body is {length} bytes, above the limit of {self.limits.max_body_bytes}")
        return None

    def document(self, path: str, refusal: Refusal) -> bytes:
        return orjson.dumps({self.error_key(path): refusal.detail})


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers by name (lower-case); a repeated Host becomes "" (malformed, so refused)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key = name.decode("latin-1")
        if key in headers:
            if key == "host":
                headers[key] = ""
            continue
        headers[key] = value.decode("latin-1")
    return headers


class IngressGuard:
    """ASGI middleware applying `rules` to each HTTP request in front of `app`.

    `on_refused(path, status)` is told of each refusal made before the app (the worker counts them).
    A body that overruns its budget or deadline raises `BodyRefused` in the app's `receive`; the guard then
    answers the refusal itself (whatever the app sends instead) and closes the connection.
    """

    def __init__(self, app: Any, rules: IngressRules, on_refused: Callable[[str, int], None] | None = None):
        self.app = app
        self.rules = rules
        self.on_refused = on_refused

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        refused = self.rules.refusal(scope["method"], path, header_map(scope["headers"]))
        if refused is not None:
            if self.on_refused is not None:
                self.on_refused(path, refused.status)
            await _answer(send, refused, self.rules.document(path, refused))
            return
        watch = _BodyWatch(receive, send, self.rules.limits)
        try:
            await self.app(scope, watch.receive, watch.send)
        except BodyRefused:
            if watch.refusal is None:
                raise
        if watch.refusal is not None and not watch.started:
            watch.started = True
            await _answer(send, watch.refusal, self.rules.document(path, watch.refusal))


async def _answer(send: Any, refusal: Refusal, body: bytes) -> None:
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", JSON.encode()), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class _BodyWatch:
    """One request's `receive` with the body's deadline and byte budget; its `send`, silenced once refused."""

    def __init__(self, receive: Any, send: Any, limits: Limits):
        self._receive = receive
        self._send = send
        self.limits = limits
        self.deadline = time.monotonic() + limits.body_timeout_s
        self.size = 0
        self.done = False
        self.started = False
        self.refusal: Refusal | None = None

    async def receive(self) -> Any:
        if self.refusal is not None:
            raise BodyRefused(self.refusal)
        if self.done:  # the body is in: later calls wait for a disconnect, with no deadline
            return await self._receive()
        try:
            async with asyncio.timeout(self.deadline - time.monotonic()):
                message = await self._receive()
        except TimeoutError:
            return self._refuse(408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s")
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self.limits.max_body_bytes:
                return self._refuse(413, f"the body is above the limit of {self.limits.max_body_bytes} bytes")
            self.done = not message.get("more_body", False)
        else:
            self.done = True
        return message

    def _refuse(self, status: int, detail: str) -> Any:
        self.refusal = Refusal(status, detail)
        raise BodyRefused(self.refusal)

    async def send(self, message: Any) -> None:
        if self.refusal is not None and not self.started:
            return  # the guard answers a refused body itself, once the app is done
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def head_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with a `seconds` deadline on each request's head (uvicorn's `http` option).

    uvicorn closes a keep-alive connection that stays silent, but not one that sends part of a head and then
    nothing: it would hold a connection slot for ever. Here a connection must complete a request's head within
    `seconds` of connecting, or of its previous response; otherwise it is closed.
    """
    try:  # uvicorn's own choice ("auto"): httptools when installed, else h11
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    class HeadDeadline(Base):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_head_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_head_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

        def _arm_head_deadline(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            # uvicorn keeps the request being served in `cycle`: a new one means a head arrived meanwhile.
            self._head_timer = self.loop.call_later(seconds, self._head_overdue, self.cycle)

        def _head_overdue(self, cycle_then: Any) -> None:
            self._head_timer = None
            waiting = self.cycle is cycle_then and (cycle_then is None or cycle_then.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeadDeadline


# --- WSGI: the /metrics servers (prometheus_client's WSGI app) ------------------------------------------

class WsgiGuard:
    """WSGI middleware applying `rules` in front of `app` (no bodies are read: GET-only servers)."""

    def __init__(self, app: Any, rules: IngressRules):
        self.app = app
        self.rules = rules

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        headers = {key[5:].lower().replace("_", "-"): value for key, value in environ.items()
                   if key.startswith("HTTP_")}
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                headers[key.lower().replace("_", "-")] = environ[key]
        path = environ.get("PATH_INFO") or "/"
        refused = self.rules.refusal(environ.get("REQUEST_METHOD", "GET"), path, headers)
        if refused is None:
            return self.app(environ, start_response)
        body = self.rules.document(path, refused)
        start_response(f"{refused.status} {HTTPStatus(refused.status).phrase}",
                       [("Content-Type", JSON), ("Content-Length", str(len(body)))])
        return [body]


_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def serve_wsgi(app: Any, host: str, port: int, rules: IngressRules) -> Any:
    """Serve `app` behind `WsgiGuard(app, rules)` on host:port from a daemon thread; returns the server.

    One thread per connection, `rules.limits.max_connections` at most (a 503 and closed beyond); a connection
    must send its request's head within `head_timeout_s` (each read and write is bounded by it too).
    """
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    limits = rules.limits
    slots = threading.BoundedSemaphore(limits.max_connections)

    class Handler(WSGIRequestHandler):
        timeout = limits.head_timeout_s  # each socket read and write

        def setup(self) -> None:
            super().setup()
            self._head_timer = threading.Timer(limits.head_timeout_s, self._head_overdue)
            self._head_timer.daemon = True
            self._head_timer.start()

        def parse_request(self) -> bool:
            try:
                return super().parse_request()
            finally:
                self._head_timer.cancel()

        def _head_overdue(self) -> None:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def finish(self) -> None:
            self._head_timer.cancel()
            super().finish()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

        def process_request(self, request: Any, client_address: Any) -> None:
            if not slots.acquire(blocking=False):
                with contextlib.suppress(OSError):
                    request.sendall(_BUSY)
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                slots.release()

        def handle_error(self, request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], OSError):  # a client that timed out or left: nothing to report
                super().handle_error(request, client_address)

    server = make_server(host, port, WsgiGuard(app, rules), server_class=Server, handler_class=Handler)
    threading.Thread(target=server.serve_forever, name=f"driftline-{rules.server}", daemon=True).start()
    return server
