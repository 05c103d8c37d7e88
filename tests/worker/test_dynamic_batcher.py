"""The dynamic batcher: batches form under concurrency, each caller gets its own answer, errors reach everyone."""
from __future__ import annotations

import asyncio
import threading

import pytest

from driftline.worker.batcher import BatcherFull, DynamicBatcher
from tests.support.waiting import wait_until_async


def doubling(calls: list[int], gate: threading.Event | None = None, entered: threading.Event | None = None):
    def run(payloads):
        if entered is not None:
            entered.set()
        if gate is not None:
            gate.wait(5)
        calls.append(len(payloads))
        return [2 * p for p in payloads], "v1"
    return run


async def _gather_through(batcher: DynamicBatcher, payloads: list[int]):
    await batcher.start()
    try:
        return await asyncio.gather(*(batcher.submit(p) for p in payloads))
    finally:
        await batcher.stop()


def test_concurrent_requests_share_forward_passes_and_get_their_own_results():
    calls: list[int] = []
    gate, entered = threading.Event(), threading.Event()
    batcher = DynamicBatcher(doubling(calls, gate, entered), max_batch_size=16, max_wait_ms=50)

    async def scenario():
        await batcher.start()
        try:
            first = asyncio.ensure_future(batcher.submit(-1))  # occupies the worker thread until the gate opens
            await wait_until_async(entered.is_set, message="the first request's forward pass to start")
            rest = [asyncio.ensure_future(batcher.submit(i)) for i in range(40)]
            await wait_until_async(lambda: batcher.queue_depth == 40, message="the other 40 requests to queue")
            gate.set()
            return await first, await asyncio.gather(*rest)
        finally:
            await batcher.stop()

    first, results = asyncio.run(scenario())
    assert first.value == -2 and first.batch_size == 1
    assert [r.value for r in results] == [2 * i for i in range(40)]
    assert all(r.tag == "v1" for r in results)
    assert calls[0] == 1 and max(calls[1:]) == 16  # the queue built while the first batch ran
    assert sum(calls) == 41 and all(size <= 16 for size in calls)
    assert all(r.batch_size in calls for r in results)


def test_max_batch_size_one_never_batches():
    calls: list[int] = []
    results = asyncio.run(_gather_through(DynamicBatcher(doubling(calls), max_batch_size=1, max_wait_ms=50),
                                          list(range(10))))
    assert calls == [1] * 10 and [r.value for r in results] == [2 * i for i in range(10)]


def test_a_lone_request_does_not_wait_for_company():
    # With nobody else arriving, the batch leaves at once, not after the (huge) max wait.
    calls: list[int] = []
    batcher = DynamicBatcher(doubling(calls), max_batch_size=64, max_wait_ms=600_000)

    async def one():
        return await asyncio.wait_for(_gather_through(batcher, [21]), timeout=30)

    assert asyncio.run(one())[0].value == 42


def test_a_failing_batch_fails_every_request_in_it_and_the_batcher_survives():
    state = {"fail": True}

    def run(payloads):
        if state["fail"]:
            raise ValueError("boom")
        return list(payloads), None

    batcher = DynamicBatcher(run, max_batch_size=8, max_wait_ms=1)

    async def scenario():
        await batcher.start()
        try:
            failed = await asyncio.gather(*(batcher.submit(i) for i in range(3)), return_exceptions=True)
            state["fail"] = False
            ok = await batcher.submit(7)
            return failed, ok
        finally:
            await batcher.stop()

    failed, ok = asyncio.run(scenario())
    assert all(isinstance(e, ValueError) for e in failed) and ok.value == 7


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError):
        DynamicBatcher(lambda p: (p, None), max_batch_size=0, max_wait_ms=1)
    with pytest.raises(ValueError):
        DynamicBatcher(lambda p: (p, None), max_batch_size=1, max_wait_ms=-1)


def test_admission_is_bounded_and_reopens_once_the_queue_drains():
    calls: list[int] = []
    gate, entered = threading.Event(), threading.Event()

    async def scenario():
        batcher = DynamicBatcher(doubling(calls, gate, entered), max_batch_size=1, max_wait_ms=0, max_pending=2)
        await batcher.start()
        try:
            first = asyncio.create_task(batcher.submit(1))
            await wait_until_async(entered.is_set, message="the first request to leave the queue for its forward pass")
            assert batcher.queue_depth == 0 and first.done() is False
            queued = [asyncio.create_task(batcher.submit(p)) for p in (2, 3)]
            await asyncio.sleep(0)
            assert batcher.queue_depth == 2
            with pytest.raises(BatcherFull):
                batcher.arriving()
            gate.set()
            results = await asyncio.gather(first, *queued)
            with batcher.arriving():  # room again
                pass
            return [r.value for r in results]
        finally:
            gate.set()
            await batcher.stop()

    assert asyncio.run(scenario()) == [2, 4, 6]
    with pytest.raises(ValueError, match="max_pending"):
        DynamicBatcher(doubling([]), max_batch_size=1, max_wait_ms=0, max_pending=0)
