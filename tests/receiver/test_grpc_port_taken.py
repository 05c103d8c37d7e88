"""A gRPC port another process holds is one OSError for both gRPC servers, whatever grpcio does there (returns 0
in older releases, raises RuntimeError in newer): the receiver's OTLP door then falls back to HTTP."""
from __future__ import annotations

import socket
from concurrent import futures

import grpc
import pytest

from driftline.listen import bind_grpc
from driftline.receiver.otlp_grpc import start_otlp_grpc, stop_otlp_grpc


@pytest.fixture
def taken_port():
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


def test_binding_a_taken_port_is_an_oserror_naming_the_server(taken_port):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), options=[("grpc.so_reuseport", 0)])
    with pytest.raises(OSError, match=rf"cannot listen for OTLP gRPC on 127.0.0.1:{taken_port}"):
        bind_grpc(server, "127.0.0.1", taken_port, "OTLP gRPC")
    server.stop(None)


def test_the_otlp_server_on_a_taken_port_raises_oserror_and_a_free_one_binds(taken_port):
    with pytest.raises(OSError, match="cannot listen for OTLP gRPC"):
        start_otlp_grpc(None, "127.0.0.1", taken_port, None, 1 << 20, 4)  # type: ignore[arg-type]
    server, bound = start_otlp_grpc(None, "127.0.0.1", 0, None, 1 << 20, 4)  # type: ignore[arg-type]
    try:
        assert bound > 0 and bound != taken_port
    finally:
        stop_otlp_grpc(server)
