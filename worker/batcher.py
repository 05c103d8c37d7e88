"""Dynamic batching: concurrent requests share one forward pass.

Requests wait in an asyncio queue. One collector task takes the first waiting
request, then keeps taking more until the batch holds `max_batch_size` requests or
`max_wait_ms` have passed since that first request arrived (waiting only while other
requests are on their way: admitted by the server, not yet submitted; alone, a request
never waits), and runs the batch on a
single worker thread (torch releases the GIL, so the event loop keeps accepting
requests meanwhile). While a batch computes, the next one fills up, so under load
batches grow on their own and at low load a request waits at most `max_wait_ms`.

Admission is bounded: at most `max_pending` requests may be admitted or queued at once
(the batch computing is not counted); beyond that `arriving()` raises `BatcherFull`, so
an overload is refused at the door instead of growing the queue without bound.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from driftline import defaults


@dataclass(frozen=True, slots=True)
class BatchResult:
    value: Any          # this request's share of the batch output
    tag: Any            # what the batch function says about the whole batch (e.g. the model version)
    queue_ms: float
    compute_ms: float
    batch_size: int


class BatcherFull(Exception):
    """The batcher holds `max_pending` requests already: refuse this one (the server answers 503)."""


@dataclass(slots=True)
class _Waiting:
    payload: Any
    future: asyncio.Future
    enqueued_at: float


class DynamicBatcher:
    """`run_batch(payloads) -> (outputs, tag)` with one output per payload, run off the event loop."""

    def __init__(self, run_batch: Callable[[Sequence[Any]], tuple[Sequence[Any], Any]],
                 max_batch_size: int, max_wait_ms: float, max_pending: int = defaults.WORKER_MAX_PENDING_REQUESTS):
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        if max_wait_ms < 0:
            raise ValueError("max_wait_ms must not be negative")
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_pending = max_pending
        self._queue: asyncio.Queue[_Waiting] | None = None
        self._task: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="driftline-batch")
        self.on_batch: Callable[[int, float], None] | None = None  # (batch size, compute seconds), for metrics
        # Requests the server has admitted but not yet submitted (parsing, cache look-up);
        # the server keeps this count with `arriving()`.
        self.arriving_count = 0

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._collect(), name="driftline-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._queue is not None:
            while not self._queue.empty():
                waiting = self._queue.get_nowait()
                if not waiting.future.done():
                    waiting.future.set_exception(RuntimeError("the worker is shutting down"))
        self._executor.shutdown(wait=True)

    def arriving(self, count: int = 1) -> "_Arriving":
        """Context manager around `count` requests' path to `submit`: tells the batcher they may be coming.

        Raises BatcherFull when fewer than `count` of the `max_pending` places are free (all or none admitted).
        """
        if self.arriving_count + self.queue_depth + count > self.max_pending:
            if count > self.max_pending:
                raise BatcherFull(f"{count} rows are more than the {self.max_pending} requests admitted at once")
            raise BatcherFull(f"{self.max_pending} requests are already waiting")
        return _Arriving(self, count)

    async def submit(self, payload: Any) -> BatchResult:
        if self._queue is None or self._task is None or self._task.done():
            raise RuntimeError("the batcher is not running")
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Waiting(payload, future, time.perf_counter()))
        return await future

    async def _collect(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            first = await queue.get()
            batch = [first]
            deadline = first.enqueued_at + self.max_wait_s
            while len(batch) < self.max_batch_size:
                if not queue.empty():
                    batch.append(queue.get_nowait())
                    continue
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or self.arriving_count <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), remaining))
                except TimeoutError:
                    break
            batch = [w for w in batch if not w.future.done()]  # the client went away
            if not batch:
                continue
            started = time.perf_counter()
            try:
                outputs, tag = await loop.run_in_executor(self._executor, self.run_batch, [w.payload for w in batch])
            except asyncio.CancelledError:
                for waiting in batch:
                    if not waiting.future.done():
                        waiting.future.set_exception(RuntimeError("the worker is shutting down"))
                raise
            except Exception as exc:  # the whole batch failed: every request in it gets the error
                for waiting in batch:
                    if not waiting.future.done():
                        waiting.future.set_exception(exc)
                continue
            finished = time.perf_counter()
            compute_ms = (finished - started) * 1000.0
            if self.on_batch is not None:
                self.on_batch(len(batch), finished - started)
            for waiting, output in zip(batch, outputs):
                if not waiting.future.done():
                    waiting.future.set_result(BatchResult(output, tag, (started - waiting.enqueued_at) * 1000.0,
                                                          compute_ms, len(batch)))


class _Arriving:
    __slots__ = ("batcher", "count")

    def __init__(self, batcher: DynamicBatcher, count: int):
        self.batcher = batcher
        self.count = count

    def __enter__(self) -> None:
        self.batcher.arriving_count += self.count

    def __exit__(self, *exc: object) -> None:
        self.batcher.arriving_count -= self.count
