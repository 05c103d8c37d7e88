"""Shadow predictions: a candidate version answers copies of production requests off the request path.

A production request that the rollout plan samples is put on a bounded queue after its answer
is on its way; one task drains the queue in batches (up to `max_batch_size`) and runs each batch's
forward pass on a thread of its own, so the production batcher's thread never waits for a shadow
batch. That thread (and the torch threads it starts) runs at a lower scheduling priority (`nice`):
where production and the candidate contend for the cores, the kernel gives them to production
first. When the candidate falls behind and the queue is full, the copy is dropped and counted
(`driftline_worker_shadow_dropped`): shadow work may lose samples, never delay production.
The answers go to `on_answer` (the server logs them as events with role ``shadow``); they are
never returned to a client.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from driftline import defaults

log = logging.getLogger(__name__)


class Candidate(Protocol):
    version: str

    def predict(self, feature_records: Sequence[dict[str, Any]]) -> list[Any]: ...


@dataclass(slots=True)
class ShadowRequest:
    candidate: Candidate
    features: dict[str, Any]
    inputs: dict[str, Any]
    request_id: str
    entity_id: str | None
    queued_at: float  # time.perf_counter()


@dataclass(slots=True)
class ShadowAnswer:
    request: ShadowRequest
    prediction: Any
    queue_ms: float
    compute_ms: float
    batch_size: int


class ShadowRunner:
    """A bounded queue of shadow requests and the task that answers them on its own thread."""

    def __init__(self, max_queued: int, max_batch_size: int, on_answer: Callable[[ShadowAnswer], None],
                 on_drop: Callable[[], None], on_error: Callable[[], None],
                 nice: int = defaults.WORKER_SHADOW_NICE):
        if max_queued < 1 or max_batch_size < 1:
            raise ValueError("the shadow queue and batch size must be at least 1")
        self.max_queued = max_queued
        self.max_batch_size = max_batch_size
        self.on_answer = on_answer
        self.on_drop = on_drop
        self.on_error = on_error
        self._queue: asyncio.Queue[ShadowRequest] | None = None
        self._task: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftline-shadow",
                                            initializer=_lower_priority, initargs=(nice,))
        self.dropped = 0
        self.answered = 0

    @property
    def depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self.max_queued)
        self._task = asyncio.create_task(self._drain(), name="driftline-shadow")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._executor.shutdown(wait=True)

    def offer(self, request: ShadowRequest) -> bool:
        """Queue `request` unless the queue is full (then it is dropped and counted); never waits."""
        if self._queue is None:
            return False
        try:
            self._queue.put_nowait(request)
        except asyncio.QueueFull:
            self.dropped += 1
            self.on_drop()
            return False
        return True

    async def _drain(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            while len(batch) < self.max_batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            groups: dict[int, list[ShadowRequest]] = {}
            for request in batch:  # one forward pass per candidate (an A/B plan never shadows, but a plan may change)
                groups.setdefault(id(request.candidate), []).append(request)
            for requests in groups.values():
                started = time.perf_counter()
                try:
                    predictions = await loop.run_in_executor(self._executor, requests[0].candidate.predict,
                                                             [r.features for r in requests])
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the candidate failed: count it, production is unaffected
                    log.warning("shadow version %s failed on %d requests: %s", requests[0].candidate.version,
                                len(requests), exc)
                    self.on_error()
                    continue
                finished = time.perf_counter()
                for request, prediction in zip(requests, predictions):
                    self.answered += 1
                    self.on_answer(ShadowAnswer(request, prediction, (started - request.queued_at) * 1000.0,
                                                (finished - started) * 1000.0, len(requests)))


def _lower_priority(nice: int) -> None:
    """Raise this thread's nice value by `nice` (Linux: per thread; threads it starts, torch's among them, inherit it)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except (AttributeError, OSError) as exc:  # not on this platform: the bounded queue still protects production
        log.warning("cannot lower the shadow thread's priority: %s", exc)
