"""The ingress guard every HTTP server uses (driftline/ingress.py): the pure rules without sockets, the ASGI guard's
body budget and deadline on a scripted request, the WSGI guard and its server's head deadline and connection cap."""
from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import orjson
import pytest

from driftline.hosts import parse_allowed_hosts
from driftline.ingress import (CLOUDEVENTS_BODY, JSON_BODY, JSON_LINES_BODY, NO_BODY, OIP_BODY, BodyRefused, BodyRule,
                               IngressGuard, IngressRules, Limits, WsgiGuard, serve_wsgi)

LIMITS = Limits(max_body_bytes=100, body_timeout_s=0.2, head_timeout_s=0.5, max_connections=2)
HOST = "127.0.0.1:8000"


def rules(body: BodyRule = JSON_BODY, hosts: str = "worker.internal", setting: str | None = "worker_allowed_hosts",
          limits: Limits = LIMITS) -> IngressRules:
    return IngressRules("worker", parse_allowed_hosts(hosts), setting, limits, lambda _path: body)


def refusal(headers: dict[str, str], method: str = "POST", body: BodyRule = JSON_BODY,
            **options: Any) -> tuple[int, str] | None:
    found = rules(body, **options).refusal(method, "/p", {"host": HOST, **headers})
    return None if found is None else (found.status, found.detail)


# --- Host -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host, allowed", [
    (HOST, True), ("localhost", True), ("[::1]:8000", True), ("worker.internal:8000", True),
    ("evil.example", False), ("127.0.0.1.evil.example", False), ("", False), ("user@localhost", False),
])
def test_only_the_hosts_the_server_answers(host, allowed):
    found = refusal({"host": host, "content-type": "application/json"})
    assert (found is None) is allowed
    if not allowed:
        assert found[0] == 400 and "worker_allowed_hosts" in found[1]


def test_a_server_without_a_setting_names_its_loopback_names():
    status, detail = refusal({"host": "rebind.evil.example"}, method="GET", body=NO_BODY, setting=None)
    assert status == 400 and "localhost, 127.0.0.1, ::1" in detail


# --- cross-origin requests (Go's net/http.CrossOriginProtection) ----------------------------------------------

@pytest.mark.parametrize("headers, refused", [
    ({}, False),  # neither header: a non-browser client (curl, tritonclient, KServe's logger)
    ({"sec-fetch-site": "same-origin"}, False), ({"sec-fetch-site": "none"}, False),
    ({"sec-fetch-site": "cross-site"}, True), ({"sec-fetch-site": "same-site"}, True),
    ({"sec-fetch-site": "same-origin", "origin": "http://evil.example"}, False),  # Sec-Fetch-Site decides
    ({"origin": f"http://{HOST}"}, False), ({"origin": f"HTTP://{HOST.upper()}"}, False),
    ({"origin": "http://evil.example"}, True), ({"origin": "http://127.0.0.1:9999"}, True),
    ({"origin": "null"}, True), ({"origin": "http://[::1"}, True),
])
def test_cross_site_browser_requests_are_403_and_non_browser_clients_pass(headers, refused):
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        found = refusal({"content-type": "application/json", **headers}, method=method)
        assert (found is not None and found[0] == 403) is refused, method
    assert refusal({"content-type": "application/json", **headers}, method="GET") is None  # safe methods pass


# --- declared body types per route --------------------------------------------------------------------------

SIMPLE = ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; b=x"]


@pytest.mark.parametrize("body, accepted, refused", [
    (JSON_BODY, ["application/json", "Application/JSON; charset=utf-8"], [None, "application/jsonp", *SIMPLE]),
    (OIP_BODY, [None, "application/json"], ["", "application/octet-stream", *SIMPLE]),
    (CLOUDEVENTS_BODY, ["application/cloudevents+json", "application/cloudevents-batch+json; charset=utf-8"],
     [None, "application/json", *SIMPLE]),
    (JSON_LINES_BODY, [None, "application/x-ndjson", "application/jsonl", "application/json"], SIMPLE),
])
def test_content_types_per_route(body, accepted, refused):
    for declared in accepted:
        assert refusal({} if declared is None else {"content-type": declared}, body=body) is None, declared
    for declared in refused:
        found = refusal({} if declared is None else {"content-type": declared}, body=body)
        assert found is not None and found[0] == 415, declared
    assert refusal({"content-type": "text/plain"}, method="GET", body=body) is None  # no body rule for GET


def test_binary_cloudevents_are_json_or_untyped_with_ce_headers():
    ce = {"ce-id": "1", "ce-type": "t", "ce-source": "s", "ce-specversion": "1.0"}
    assert refusal({**ce, "content-type": "application/json"}, body=CLOUDEVENTS_BODY) is None
    assert refusal(ce, body=CLOUDEVENTS_BODY) is None
    status, detail = refusal({**ce, "content-type": "text/plain"}, body=CLOUDEVENTS_BODY)
    assert status == 415 and "ce-* headers" in detail and "application/cloudevents+json" in detail


def test_a_get_only_server_refuses_other_methods():
    assert refusal({}, method="GET", body=NO_BODY) is None and refusal({}, method="HEAD", body=NO_BODY) is None
    assert refusal({}, method="POST", body=NO_BODY)[0] == 405


@pytest.mark.parametrize("length, status", [("100", None), ("101", 413), ("-1", 400), ("1e3", 400), ("²", 400)])
def test_a_declared_length_over_the_budget_is_413(length, status):
    found = refusal({"content-type": "application/json", "content-length": length})
    assert (None if found is None else found[0]) == status


@pytest.mark.parametrize("options", [{"max_body_bytes": -1}, {"body_timeout_s": 0}, {"head_timeout_s": -1},
                                     {"max_connections": 0}])
def test_limits_must_be_in_range(options):
    with pytest.raises(ValueError, match=next(iter(options))):
        Limits(**{"max_body_bytes": 1, "body_timeout_s": 1.0, "head_timeout_s": 1.0, "max_connections": 1, **options})


# --- the ASGI guard on a scripted request ----------------------------------------------------------------------

def _run(guard: IngressGuard, chunks: list[bytes | None], headers: dict[str, str]) -> tuple[list[dict], list[Any]]:
    """Drive one POST through `guard`: `chunks` arrive in turn (None: the client stalls); (sent messages, app log)."""
    sent: list[dict] = []
    app_saw: list[Any] = []

    async def receive() -> dict:
        chunk = chunks.pop(0)
        if chunk is None:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict) -> None:
        sent.append(message)

    async def app(scope: Any, receive_: Any, send_: Any) -> None:
        body = b""
        try:
            while True:
                message = await receive_()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
        except BodyRefused as exc:  # as the worker does: it answers something of its own, which is not sent
            app_saw.append(exc.refusal.status)
            await send_({"type": "http.response.start", "status": 500, "headers": []})
            await send_({"type": "http.response.body", "body": b"app"})
            return
        app_saw.append(body)
        await send_({"type": "http.response.start", "status": 200, "headers": []})
        await send_({"type": "http.response.body", "body": body})

    scope = {"type": "http", "method": "POST", "path": "/p",
             "headers": [(k.encode(), v.encode()) for k, v in {"host": HOST, **headers}.items()]}
    guard.app = app
    asyncio.run(guard(scope, receive, send))
    return sent, app_saw


def _status(sent: list[dict]) -> tuple[int, dict[bytes, bytes], bytes]:
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"]


def test_a_body_in_time_and_within_budget_reaches_the_app():
    sent, app_saw = _run(IngressGuard(None, rules()), [b'{"a":', b"1}"], {"content-type": "application/json"})
    assert app_saw == [b'{"a":1}'] and _status(sent)[0] == 200


def test_a_stalled_body_is_408_and_the_connection_closed():
    started = time.monotonic()
    sent, app_saw = _run(IngressGuard(None, rules()), [b'{"a":', None], {"content-type": "application/json"})
    status, headers, body = _status(sent)
    assert (status, app_saw) == (408, [408]) and time.monotonic() - started < 5
    assert headers[b"connection"] == b"close" and b"0.2 s" in body


def test_a_streamed_body_over_the_budget_is_413():
    sent, app_saw = _run(IngressGuard(None, rules()), [b"x" * 60, b"x" * 60], {"content-type": "application/json"})
    status, headers, body = _status(sent)
    assert (status, app_saw) == (413, [413]) and headers[b"connection"] == b"close"
    assert orjson.loads(body) == {"detail": "the body is above the limit of 100 bytes"}


def test_a_refusal_before_the_app_is_counted_and_never_reaches_it():
    counted: list[tuple[str, int]] = []
    guard = IngressGuard(None, rules(), lambda path, status: counted.append((path, status)))
    sent, app_saw = _run(guard, [b"{}"], {"content-type": "text/plain"})
    assert app_saw == [] and counted == [("/p", 415)] and _status(sent)[0] == 415


# --- WSGI: the /metrics servers --------------------------------------------------------------------------------

def _metrics_app(environ: dict, start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"metric 1\n"]


def test_the_wsgi_guard_applies_the_same_rules():
    guard = WsgiGuard(_metrics_app, rules(NO_BODY, hosts="", setting=None))
    answered: list[str] = []

    def call(**environ: str) -> bytes:
        return b"".join(guard({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", **environ},
                              lambda status, _headers: answered.append(status)))

    assert call(HTTP_HOST="rebind.evil.example") != b"metric 1\n" and answered[-1].startswith("400")
    assert call(HTTP_HOST="localhost:9108") == b"metric 1\n"
    call(HTTP_HOST="localhost", REQUEST_METHOD="POST", CONTENT_TYPE="text/plain")
    assert answered[-1].startswith("405")


def _read_all(conn: socket.socket) -> bytes:
    received = b""
    while chunk := conn.recv(65_536):
        received += chunk
    return received


def test_the_wsgi_server_closes_a_slow_head_and_caps_connections():
    limits = Limits(max_body_bytes=0, body_timeout_s=1.5, head_timeout_s=1.5, max_connections=2)
    server = serve_wsgi(_metrics_app, "127.0.0.1", 0, rules(NO_BODY, hosts="", setting=None, limits=limits))
    port = server.server_address[1]
    try:
        partial = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(limits.max_connections)]
        for conn in partial:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHo")
        # accepted in order: the partial heads hold both slots when this one comes (until their deadline)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as beyond:
            beyond.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert _read_all(beyond).startswith(b"HTTP/1.1 503")
        started = time.monotonic()
        assert [_read_all(conn) for conn in partial] == [b""] * len(partial)  # closed by the head deadline
        assert time.monotonic() - started < 5
        for conn in partial:
            conn.close()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as fresh:
            fresh.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert _read_all(fresh).endswith(b"metric 1\n")
    finally:
        server.shutdown()
        server.server_close()
