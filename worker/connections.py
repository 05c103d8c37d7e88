"""A deadline for a request's head (request line and headers) on each connection the worker serves.

uvicorn closes a keep-alive connection that stays silent, but not one that sends part of a
request's head and then nothing: that connection would hold one of the worker's
`max_connections` for ever, and enough of them would lock every client out. With this
protocol a connection must complete a request's head within the deadline of connecting, or of
its previous response; otherwise it is closed. (The body has its own deadline in the server.)
"""
from __future__ import annotations

import asyncio
from typing import Any

try:  # uvicorn's own choice ("auto"): httptools when installed, else h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


def head_deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with a `seconds` deadline on each request's head (uvicorn's `http` option)."""

    class HeadDeadline(_Base):  # type: ignore[misc, valid-type]
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
