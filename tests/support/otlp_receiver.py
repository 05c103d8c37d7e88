"""A receiver taking traces as a service runs it: the app under uvicorn on 127.0.0.1 and the OTLP gRPC server, for
exporters that speak real HTTP and gRPC (the OpenTelemetry SDK's, the RAG stand-in's)."""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from tests.support.waiting import wait_until


@contextmanager
def served_receiver(service: Any, intake: Any, token: str | None = None) -> Iterator[tuple[int, int]]:
    """(HTTP port, gRPC port) of `service` with the OTLP `intake`, both stopped on leaving."""
    import uvicorn

    from driftline.receiver.app import LIMITS, create_app
    from driftline.receiver.otlp_grpc import start_otlp_grpc, stop_otlp_grpc

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(service, token=token, otlp=intake), log_level="warning",
                                           access_log=False, lifespan="off", **LIMITS.uvicorn_options()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    grpc_server, grpc_port = start_otlp_grpc(intake, "127.0.0.1", 0, token, 4 << 20, 8)
    try:
        wait_until(lambda: server.started, interval=0.02, message="the receiver to serve")
        yield sock.getsockname()[1], grpc_port
    finally:
        stop_otlp_grpc(grpc_server)
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
