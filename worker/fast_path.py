"""The worker's ASGI front: its two hot POST endpoints skip FastAPI's routing (figures in docs/worker.md)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response

from driftline.worker.oip_rest import is_infer_path


class PredictFastPath:
    """ASGI front: POST /predict and OIP infer go straight to their handlers; everything else to the FastAPI app.

    The handler is the same one the FastAPI route calls, with the same Starlette Request
    and Response; only FastAPI's routing, dependency and middleware layers are skipped.
    Those cost more than the whole prediction path (figures in docs/worker.md).
    """

    def __init__(self, app: FastAPI, answer: Callable[[Request], Awaitable[Response]],
                 infer: Callable[[Request], Awaitable[Response]]):
        self.app = app
        self.answer = answer
        self.infer = infer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            if scope["path"] == "/predict":
                response = await self.answer(Request(scope, receive))
                await response(scope, receive, send)
                return
            if is_infer_path(scope["path"]):
                response = await self.infer(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
