"""The receiver's front door is the worker's (driftline/ingress.py): a foreign Host, a cross-site browser request or
a body in no CloudEvents / JSON-lines type is refused before anything is taken; stalled bodies are answered by their
deadline and the connections they hold are capped."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from typing import Iterator

import httpx
import orjson
import pytest
from cloudevents.v1.conversion import to_binary, to_structured

from driftline.ingress import Limits
from tests.receiver.test_receiver import V1_REQUEST, half
from tests.support.waiting import wait_until


def _line(model: str) -> bytes:
    return orjson.dumps({"schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "model": model,
                         "ts": "2026-01-02T03:04:05Z", "version": "1", "features": {"x": 1.0}, "prediction": 0.4,
                         "latency_ms": {"total": 3.0}})


@pytest.mark.parametrize("headers, status", [
    ({"Host": "evil.example", "Content-Type": "application/x-ndjson"}, 400),  # DNS rebinding
    ({"Content-Type": "text/plain"}, 415),  # a cross-site form's type: no CORS preflight
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
    ({"Content-Type": "application/x-ndjson", "Origin": "http://evil.example"}, 403),
    ({"Content-Type": "application/x-ndjson", "Sec-Fetch-Site": "cross-site"}, 403),
])
def test_a_foreign_host_a_simple_type_or_a_cross_site_page_takes_nothing(receiver_factory, model, headers, status):
    service, client = receiver_factory()
    for path in ("/events", "/"):
        answer = client.post(path, content=_line(model), headers=headers)
        assert answer.status_code == status, (path, answer.text)
    assert service.stats()["events"] == 0 and service.stats()["dead_letters"] == 0
    if status == 400:
        assert "receiver_allowed_hosts" in answer.json()["detail"]


def test_cloudevents_need_their_own_type_or_ce_headers(receiver_factory, model):
    _, client = receiver_factory()
    event = half(model, uuid.uuid4().hex, "request", V1_REQUEST, "2026-01-02T03:04:05Z")
    plain_json = client.post("/", content=orjson.dumps({"data": V1_REQUEST}), headers={"Content-Type": "application/json"})
    assert plain_json.status_code == 415 and "ce-* headers" in plain_json.json()["detail"]
    for mode in (to_binary, to_structured):
        headers, body = mode(event)
        assert client.post("/", headers=headers, content=body).status_code == 200, mode


def test_proper_cloudevents_and_json_lines_on_loopback_names_are_taken(receiver_factory, model):
    service, client = receiver_factory()
    port_host = "127.0.0.1:8002"
    for host, ndjson in (("localhost", "application/x-ndjson"), (port_host, "application/jsonl"), ("[::1]", None)):
        headers = {"Host": host} | ({"Content-Type": ndjson} if ndjson else {})  # httpx and curl-like producers
        assert client.post("/events", content=_line(model), headers=headers).json()["events"] == 1, host
    same_origin = {"Host": port_host, "Origin": f"http://{port_host}", "Content-Type": "application/x-ndjson"}
    assert client.post("/events", content=_line(model), headers=same_origin).json()["events"] == 1
    assert service.stats()["events"] == 4


def test_metrics_refuse_a_rebound_host(receiver_factory):
    _, client = receiver_factory()
    refused = client.get("/metrics", headers={"Host": "rebind.evil.example"})
    assert refused.status_code == 400 and "driftline_receiver" not in refused.text
    assert client.get("/metrics").status_code == 200


def test_an_allow_listed_name_is_answered(broker, sqlite_url, model):
    from fastapi.testclient import TestClient

    from driftline.hosts import parse_allowed_hosts
    from driftline.receiver.app import create_app
    from driftline.receiver.service import Receiver, ReceiverConfig

    service = Receiver(ReceiverConfig(bootstrap_servers=broker, db_url=sqlite_url))
    try:
        client = TestClient(create_app(service, allowed_hosts=parse_allowed_hosts("receiver.internal")),
                            base_url="http://receiver.internal:8002")
        assert client.post("/events", content=_line(model)).json()["events"] == 1
        assert client.get("/healthz", headers={"Host": "other.internal"}).status_code == 400
    finally:
        service.close()


# --- slow bodies: a deadline and a connection cap ------------------------------------------------------------

@contextlib.contextmanager
def _serving(service, limits: Limits) -> Iterator[tuple[str, int]]:
    """The receiver under uvicorn on 127.0.0.1 with `limits`, as `driftline receiver` runs it."""
    import uvicorn

    from driftline.receiver.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service, limits=limits), log_level="warning",
                                           access_log=False, lifespan="off", **limits.uvicorn_options()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, interval=0.02, message="the receiver to serve")
    try:
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _answer_and_close(conn: socket.socket) -> bytes:
    received = b""
    while chunk := conn.recv(65_536):
        received += chunk
    return received


def test_stalled_bodies_are_answered_by_their_deadline_and_connections_are_capped(receiver_factory):
    service, _ = receiver_factory()
    limits = Limits(max_body_bytes=4 << 20, body_timeout_s=0.5, head_timeout_s=2.0, max_connections=4)
    stalled_count = 10
    with _serving(service, limits) as (host, port):
        stalled = []
        for _ in range(stalled_count):  # each claims 4 MiB - 1 bytes, sends 64 KiB of them, then nothing
            conn = socket.create_connection((host, port), timeout=10)
            conn.sendall(f"POST /events HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/x-ndjson\r\n"
                         f"Content-Length: {(4 << 20) - 1}\r\n\r\n".encode() + b" " * 65_536)
            stalled.append(conn)
        started = time.monotonic()
        answers = [_answer_and_close(conn) for conn in stalled]  # each read ends when the server closes
        took = time.monotonic() - started
        for conn in stalled:
            conn.close()
        statuses = sorted(int(answer.split(b" ", 2)[1]) for answer in answers)
        assert took < 5, f"stalled connections held {took:.1f} s"
        assert set(statuses) <= {408, 503} and 1 <= statuses.count(408) < limits.max_connections, statuses
        assert all(b"connection: close" in answer.lower() for answer in answers)
        after = httpx.post(f"http://{host}:{port}/events", content=_line("m"), timeout=10)
        assert after.status_code == 200, after.text  # the stalled ones are gone: room again
