"""Waiting in tests: poll a condition until it holds, bounded, and fail naming what was awaited.

`wait_until(condition, timeout=30, interval=0.05, message="the first 400 events")` calls
`condition()` until it returns something truthy and returns that value; after `timeout` seconds
it raises AssertionError("timed out after 30 s waiting for the first 400 events (last value: 312)").
An exception raised by the condition (a process that died, say) ends the wait at once.
`wait_until_async` is the same inside a coroutine (the loop's other tasks run while it waits); its
condition may also be a coroutine function (`lambda: reader.get(key)`): it is awaited each round.

Timeouts are generous on purpose: a slow or busy machine makes a passing test slower, never a
failing one; a condition that holds returns at the next poll.
"""
from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_INTERVAL_S = 0.05


def _timed_out(timeout: float, message: str, last: Any) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {message} (last value: {last!r})")


def wait_until(condition: Callable[[], T], timeout: float = DEFAULT_TIMEOUT_S, interval: float = DEFAULT_INTERVAL_S,
               message: str = "the condition") -> T:
    """Poll `condition` until it returns a truthy value, and return that value; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, message, value)
        time.sleep(interval)


async def wait_until_async(condition: Callable[[], T | Awaitable[T]], timeout: float = DEFAULT_TIMEOUT_S,
                           interval: float = 0.01, message: str = "the condition") -> T:
    """`wait_until` inside a coroutine: sleeps with asyncio so the loop's other tasks run meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, message, value)
        await asyncio.sleep(interval)
