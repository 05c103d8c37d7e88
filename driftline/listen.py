"""Which listen addresses need a secret: the rule every driftline HTTP server applies to its bind address.

Loopback (127.0.0.0/8, ::1, localhost) is reachable from this machine only, so a server may run there
without a secret of its own; on any other address anyone on the network may call it, so a server
refuses to start there without one (an empty value or a published default is no secret).
"""
from __future__ import annotations

import socket
from typing import Any

from driftline.hosts import is_loopback

__all__ = ["bind_grpc", "is_loopback", "port_in_use", "token_problem"]


def token_problem(host: str, token: str | None, setting: str, published_default: str | None = None) -> str | None:
    """Why a server must not listen on `host` with this token, naming the `setting` to change; None when it may."""
    if is_loopback(host):
        return None
    if not token:
        return f"no token is set; set {setting} to a secret of your own before listening on {host}"
    if published_default is not None and token == published_default:
        return (f"the token is the published default; set {setting} to a secret of your own before listening on "
                f"{host} (the default is accepted on 127.0.0.1 only)")
    return None


def port_in_use(host: str, port: int) -> bool:
    """Whether binding host:port fails (another process listens there); port 0 never is. Checked before a server
    starts, so the error is one line naming the option, not a traceback from deep in its start-up."""
    if not port:
        return False
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror:
        return False  # an unknown name: the server's own start-up says so
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError:
            return True
    return False


def bind_grpc(server: Any, host: str, port: int, what: str) -> int:
    """Add an insecure host:port to a grpc (or grpc.aio) server; the port bound (`port` 0: a free one). Raises
    OSError naming `what` when it cannot bind: grpcio returns 0 there in older releases and raises RuntimeError
    in newer ones, so callers handle one error whatever grpcio is installed."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"cannot listen for {what} on {address} (is the port in use?)")
    return bound
