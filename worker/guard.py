"""The worker's front door: a request naming a Host the worker does not serve, or a POST whose body is not
declared as JSON, goes no further (ASGI middleware in front of every endpoint).

A browser page can reach a server on loopback too. Under DNS rebinding its requests carry the
page's own name in `Host` (refused: 400, naming `worker_allowed_hosts`); a cross-site form or
fetch that needs no CORS preflight can only send text/plain, urlencoded or multipart bodies
(refused: 415), while `application/json` from another origin needs a preflight the worker never
approves.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import orjson

from driftline.hosts import host_allowed

JSON_MEDIA_TYPE = "application/json"
# Distinct Host values whose verdict is remembered (the check runs on every request).
HOST_VERDICTS_CACHED = 64
HOSTS_SETTING = "worker_allowed_hosts (env DRIFTLINE_WORKER_ALLOWED_HOSTS, driftline worker --allowed-hosts)"


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type header declares JSON ("application/json", parameters such as charset allowed)."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == JSON_MEDIA_TYPE


class RequestGuard:
    """ASGI middleware: 400 for a Host outside `allowed_hosts`, 415 for a POST that is not JSON; else `app`.

    `on_refused(path, status)` is told of each refusal (the worker counts /predict's in its metrics).
    """

    def __init__(self, app: Any, allowed_hosts: frozenset[str],
                 on_refused: Callable[[str, int], None] | None = None):
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.on_refused = on_refused
        self._host_allowed = functools.lru_cache(HOST_VERDICTS_CACHED)(
            lambda header: host_allowed(header, allowed_hosts))

    def refusal(self, scope: Any) -> tuple[int, str] | None:
        host = declared = None
        for name, value in scope["headers"]:  # ASGI header names are lower-case bytes
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"content-type":
                declared = value.decode("latin-1")
        if not self._host_allowed(host):
            return 400, (f"this worker does not serve the host {host!r}; if clients reach it under that name, "
                         f"add it to {HOSTS_SETTING}")
        if scope["method"] == "POST" and not is_json(declared):
            hint = (" (tritonclient sends none of its own: infer(..., headers={'Content-Type': 'application/json'}))"
                    if scope["path"].startswith("/v2/") else "")
            return 415, (f"POST bodies must be JSON with the header Content-Type: {JSON_MEDIA_TYPE} "
                         f"(got {'no Content-Type' if declared is None else repr(declared)}){hint}")
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (refused := self.refusal(scope)) is not None:
            status, detail = refused
            if self.on_refused is not None:
                self.on_refused(scope["path"], status)
            # The Open Inference Protocol's error shape on its paths; the worker's own elsewhere.
            body = orjson.dumps({"error": detail} if scope["path"].startswith("/v2") else {"detail": detail})
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", JSON_MEDIA_TYPE.encode()),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
