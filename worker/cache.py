"""The prediction cache: least-recently-used with a time to live.

A key is (model, version, canonical features): the features the model actually saw,
serialised with sorted keys, so a new version never serves an old version's answer
and a serving-path change to the features is never hidden by the cache.
Single-threaded by design: only the event loop touches it.

`RedisPredictionCache` is an optional second tier shared by several workers
(`driftline worker --cache-url redis://...`), asked only on a local miss.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping

import orjson

from driftline import defaults

log = logging.getLogger(__name__)


def cache_key(model: str, version: str, features: Mapping[str, Any]) -> tuple[str, str, bytes]:
    return model, version, orjson.dumps(features, option=orjson.OPT_SORT_KEYS)


class PredictionCache:
    """LRU + TTL. `get` refreshes recency but not age: an entry expires `ttl_s` after it was stored."""

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.ttl_s > 0

    def get(self, key: Hashable) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored_at, value = entry
        if self.clock() - stored_at > self.ttl_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        if not self.enabled:
            return
        self._entries[key] = (self.clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def redis_key(key: tuple[str, str, bytes], prefix: str = defaults.WORKER_REDIS_KEY_PREFIX) -> str:
    """`<prefix><model>:<version>:<blake2b-128>`; the digest covers model, version and features,
    so names with ':' in them cannot collide, and the readable part is for operators."""
    model, version, canonical = key
    digest = hashlib.blake2b(digest_size=16)
    for part in (model.encode(), b"\0", version.encode(), b"\0", canonical):
        digest.update(part)
    return f"{prefix}{model}:{version}:{digest.hexdigest()}"


class RedisPredictionCache:
    """The shared tier of the prediction cache: Redis, reached without blocking the event loop.

    The worker asks it only after a local (`PredictionCache`) miss and copies a hit into the
    local cache, so a repeated request costs no round trip. Look-ups of one event-loop pass
    go out as one MGET, and writes as one pipeline of `SET key value PX ttl`, one round trip
    of each kind in flight at a time (while one is in flight the next batch fills, as in the
    dynamic batcher); entries expire in Redis after `ttl_s`, and Redis' own `maxmemory` with
    an eviction policy (`allkeys-lru`) bounds the space.

    Redis down or slow never fails a request: every round trip is bounded by `timeout_s`,
    an error or a timeout answers "miss", calls `on_error` (a Prometheus counter), is
    logged once per outage, and for `retry_s` afterwards Redis is not asked at all; then
    the next look-up tries again (redis-py reconnects), and a success ends the outage.
    Single-threaded by design: only the event loop touches it.
    """

    def __init__(self, url: str, ttl_s: float, *, timeout_s: float = defaults.WORKER_REDIS_TIMEOUT_SECONDS,
                 retry_s: float = defaults.WORKER_REDIS_RETRY_SECONDS,
                 max_pending_writes: int = defaults.WORKER_REDIS_MAX_PENDING_WRITES,
                 prefix: str = defaults.WORKER_REDIS_KEY_PREFIX, on_error: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.url = url
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.max_pending_writes = max_pending_writes
        self.prefix = prefix
        self.on_error = on_error
        self.clock = clock
        # No retries inside redis-py (its default is ten, with backoff): a failed round trip
        # is a miss, and the outage logic decides when to try again.
        self._client = redis.asyncio.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                                    retry=Retry(NoBackoff(), 0), health_check_interval=0)
        self._reads: list[tuple[str, asyncio.Future]] = []
        self._writes: dict[str, bytes] = {}
        self._read_task: asyncio.Task | None = None
        self._write_task: asyncio.Task | None = None
        self._down_until = 0.0
        self.healthy = True
        self.errors = 0

    @property
    def asking(self) -> bool:
        """False while an outage's `retry_s` pause lasts."""
        return self.clock() >= self._down_until

    async def get(self, key: tuple[str, str, bytes]) -> Any | None:
        if not self.asking:
            return None
        future = asyncio.get_running_loop().create_future()
        self._reads.append((redis_key(key, self.prefix), future))
        if self._read_task is None:
            self._read_task = asyncio.create_task(self._read_loop(), name="driftline-redis-reads")
        return await future

    def put(self, key: tuple[str, str, bytes], value: Any) -> None:
        if not self.asking or len(self._writes) >= self.max_pending_writes:
            return
        self._writes[redis_key(key, self.prefix)] = orjson.dumps(value)
        if self._write_task is None:
            self._write_task = asyncio.create_task(self._write_loop(), name="driftline-redis-writes")

    async def close(self) -> None:
        for task in (self._read_task, self._write_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for _, future in self._reads:
            if not future.done():
                future.set_result(None)
        self._reads.clear()
        with contextlib.suppress(Exception):
            await self._client.aclose()

    async def _read_loop(self) -> None:
        try:
            while self._reads:
                batch, self._reads = self._reads, []
                values: list[Any] = [None] * len(batch)
                try:
                    if self.asking:
                        try:
                            async with asyncio.timeout(self.timeout_s):
                                raw = await self._client.mget([key for key, _ in batch])
                            self._succeeded()
                            values = [_decode(item) for item in raw]
                        except Exception as exc:  # down, slow or confused: a miss, never an error
                            self._failed(exc)
                finally:  # also when cancelled at shut-down: nobody waits forever
                    for (_, future), value in zip(batch, values):
                        if not future.done():  # the client may have gone away meanwhile
                            future.set_result(value)
        finally:
            self._read_task = None

    async def _write_loop(self) -> None:
        try:
            while self._writes:
                batch, self._writes = self._writes, {}
                if not self.asking:
                    continue
                try:
                    async with asyncio.timeout(self.timeout_s):
                        async with self._client.pipeline(transaction=False) as pipe:
                            for key, value in batch.items():
                                pipe.set(key, value, px=self.ttl_ms)
                            await pipe.execute()
                    self._succeeded()
                except Exception as exc:
                    self._failed(exc)
        finally:
            self._write_task = None

    def _succeeded(self) -> None:
        if not self.healthy:
            self.healthy = True
            log.warning("Redis prediction cache at %s is back", _safe_url(self.url))

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        if self.on_error is not None:
            self.on_error()
        self._down_until = self.clock() + self.retry_s
        if self.healthy:
            self.healthy = False
            log.warning("Redis prediction cache at %s unavailable (%s: %s); serving without it, retrying every %g s",
                        _safe_url(self.url), type(exc).__name__, str(exc) or "timed out", self.retry_s)


def _decode(raw: bytes | None) -> Any | None:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # not ours (a shared Redis): a miss
        return None


def _safe_url(url: str) -> str:
    """The URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}"
