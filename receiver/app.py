"""The receiver's HTTP surface (FastAPI), docs/receiver.md.

`POST /` (and any path under it but the ones below): CloudEvents of KServe's inference logger, or of
any proxy, in binary, structured or batched mode. The logger URL may carry `model`, `version` and
`output` query parameters; `X-Driftline-Version` names the version too.
`POST /events`: contract events as JSON lines. `GET /healthz`: counts.
Answers: 200 with what was done (events, waiting halves, duplicates, dead letters with reasons);
400 when the call carried nothing usable (it is dead-lettered all the same); 413 for a body over
the bound; 503 with Retry-After when the event buffer is full (nothing of the call was taken).
With a token set, POST calls need `Authorization: Bearer TOKEN` or `?token=TOKEN`.
"""
from __future__ import annotations

import hmac

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from driftline import defaults
from driftline.receiver.service import Busy, Outcome, Receiver

HINTS = ("model", "version", "output")
_RESERVED = {"events", "healthz"}


def create_app(receiver: Receiver, token: str | None = None,
               max_body_bytes: int = defaults.RECEIVER_MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(title="driftline receiver", docs_url=None, redoc_url=None, openapi_url=None)

    def refused(request: Request) -> JSONResponse | None:
        if token is not None:
            header = request.headers.get("authorization", "")
            given = header[7:] if header.startswith("Bearer ") else request.query_params.get("token", "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                return JSONResponse({"detail": "missing or wrong token (settings.receiver_token, env "
                                               "DRIFTLINE_RECEIVER_TOKEN): send Authorization: Bearer TOKEN "
                                               "or ?token=TOKEN"}, status_code=401)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            return _too_large(max_body_bytes)
        return None

    async def body_of(request: Request) -> bytes | None:
        chunks, size = [], 0
        async for chunk in request.stream():  # bounded even when no Content-Length is sent
            size += len(chunk)
            if size > max_body_bytes:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def answer(outcome: Outcome, usable: bool) -> JSONResponse:
        return JSONResponse(outcome.as_dict(), status_code=200 if usable else 400)

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok", **receiver.stats()}

    @app.post("/events")
    async def events(request: Request) -> JSONResponse:
        problem = refused(request)
        if problem is not None:
            return problem
        body = await body_of(request)
        if body is None:
            return _too_large(max_body_bytes)
        try:
            outcome = await _in_thread(receiver.accept_lines, body)
        except Busy as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})
        return answer(outcome, outcome.events > 0 or not outcome.dead_letters)

    @app.post("/")
    @app.post("/{path:path}")
    async def cloudevents(request: Request, path: str = "") -> JSONResponse:
        if path in _RESERVED:
            return JSONResponse({"detail": "not found"}, status_code=404)
        problem = refused(request)
        if problem is not None:
            return problem
        body = await body_of(request)
        if body is None:
            return _too_large(max_body_bytes)
        hints = {name: request.query_params.get(name, "") for name in HINTS}
        hints["version"] = hints["version"] or request.headers.get("x-driftline-version", "")
        try:
            outcome = await _in_thread(receiver.accept_cloudevents, dict(request.headers), body, hints)
        except Busy as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})
        usable = outcome.events > 0 or outcome.waiting > 0 or outcome.duplicates > 0 or not outcome.dead_letters
        return answer(outcome, usable)

    return app


def _too_large(bound: int) -> JSONResponse:
    return JSONResponse({"detail": f"the body is larger than {bound} bytes (receiver max body)"}, status_code=413)


async def _in_thread(function, *args):  # noqa: ANN001, ANN202 - a thin wrapper
    # the service takes a lock and may read the store: off the event loop
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(function, *args)
