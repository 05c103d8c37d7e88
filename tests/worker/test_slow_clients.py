"""Slow and idle clients: a body still arriving holds no admission slot, a stalled one gets 408, connections are capped."""
from __future__ import annotations

import contextlib
import socket
from typing import Iterator

import httpx
import pytest

from driftline.worker.dataset import generate_inputs
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until
from tests.support.worker_helpers import MODEL, make_settings, metric, registry_with_versions, serving

BODY = {"features": generate_inputs(1, seed=5).to_dict("records")[0]}


@contextlib.contextmanager
def _worker(broker, tiny_results, tmp_path_factory, **config) -> Iterator[tuple[str, Worker]]:
    settings = make_settings(tmp_path_factory.mktemp("slow"), broker)
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_events=False, **config))
    with serving(worker) as url:
        yield url, worker


def _stalled(url: str, sent: bytes = b"") -> socket.socket:
    """A connection that sent a POST /predict's headers (Content-Length 1000) and `sent` of its body, then nothing."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=60)
    conn.sendall(f"POST /predict HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 1000\r\n\r\n".encode() + sent)
    return conn


def _read_to_close(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (the socket's timeout bounds each read)."""
    received = b""
    while chunk := conn.recv(65_536):
        received += chunk
    return received


def test_idle_connections_beyond_max_pending_do_not_lock_out_predict(broker, tiny_results, tmp_path_factory):
    with _worker(broker, tiny_results, tmp_path_factory, max_pending=2, body_timeout_s=120.0) as (url, worker):
        stalled = [_stalled(url) for _ in range(worker.config.max_pending + 4)]
        try:
            wait_until(lambda: metric(url, "driftline_worker_body_reads") == len(stalled),
                       message="the stalled requests to be reading their bodies")
            answers = [httpx.post(f"{url}/predict", json=BODY, timeout=60).status_code for _ in range(10)]
            assert answers == [200] * 10
            assert metric(url, "driftline_worker_body_reads") == len(stalled)  # still stalled meanwhile
        finally:
            for conn in stalled:
                conn.close()


def test_a_body_not_received_in_time_gets_408_and_the_connection_closed(broker, tiny_results, tmp_path_factory):
    with _worker(broker, tiny_results, tmp_path_factory, body_timeout_s=0.5) as (url, _worker_):
        with _stalled(url, sent=b'{"features": {') as conn:
            received = _read_to_close(conn)
        status, _, rest = received.partition(b"\r\n")
        assert status.startswith(b"HTTP/1.1 408"), received
        assert b"connection: close" in rest.lower()
        assert b"0.5" in rest  # the message says the deadline
        assert httpx.post(f"{url}/predict", json=BODY).status_code == 200
        assert metric(url, "driftline_worker_body_reads") == 0


def test_a_connection_that_does_not_finish_a_request_head_in_time_is_closed(broker, tiny_results, tmp_path_factory):
    with _worker(broker, tiny_results, tmp_path_factory, head_timeout_s=0.5) as (url, _worker_):
        host, port = url.removeprefix("http://").split(":")
        silent = socket.create_connection((host, int(port)), timeout=60)
        partial = socket.create_connection((host, int(port)), timeout=60)
        partial.sendall(f"POST /predict HTTP/1.1\r\nHost: {host}:{port}\r\nContent-".encode())
        with silent, partial:
            assert _read_to_close(silent) == b"" and _read_to_close(partial) == b""  # closed, nothing answered
        with httpx.Client(timeout=60) as client:  # one keep-alive connection, several requests: never cut
            assert [client.post(f"{url}/predict", json=BODY).status_code for _ in range(5)] == [200] * 5


def test_connections_beyond_the_cap_are_refused_until_some_close(broker, tiny_results, tmp_path_factory):
    with _worker(broker, tiny_results, tmp_path_factory, max_connections=4, body_timeout_s=120.0) as (url, worker):
        stalled = [_stalled(url) for _ in range(worker.config.max_connections)]
        try:
            wait_until(lambda: _fresh_status(url) == 503, message="the connection cap to refuse a new request")
        finally:
            for conn in stalled:
                conn.close()
        wait_until(lambda: _fresh_status(url) == 200, message="the worker to answer once the idle connections closed")


def _fresh_status(url: str) -> int:
    """The status of one POST /predict on a new connection."""
    with httpx.Client(timeout=60) as client:
        return client.post(f"{url}/predict", json=BODY).status_code


@pytest.mark.parametrize("config", [{"body_timeout_s": 0}, {"head_timeout_s": -1}, {"max_connections": 0}])
def test_limits_must_be_positive(config):
    with pytest.raises(ValueError):
        WorkerConfig(**config)
