"""The shared Redis tier of the prediction cache, against a real `redis-server` on loopback.

Two workers share hits; a version change or the TTL ends them; Redis killed or frozen
mid-run costs misses and counted errors, never a failed request; Redis back, hits return.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import redis

from driftline import defaults
from driftline.broker import free_port
from driftline.worker.cache import RedisPredictionCache, cache_key, redis_key
from driftline.worker.dataset import generate_inputs
from driftline.worker.server import Worker, WorkerConfig
from tests.support.waiting import wait_until, wait_until_async
from tests.support.worker_helpers import MODEL, make_settings, metric, registry_with_versions, serving


class RedisProcess:
    """A throw-away redis-server on 127.0.0.1 (no persistence), that a test may kill, freeze and restart."""

    def __init__(self, binary: str, port: int, folder: Path):
        self.binary, self.port, self.folder = binary, port, folder
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)

        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}: "
                                   f"{self.process.stderr.read().decode()}")
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        try:
            wait_until(answers, timeout=60, interval=0.02, message=f"redis-server to answer on 127.0.0.1:{self.port}")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None:
            return
        with_signal = self.process.poll() is None
        if with_signal:
            self.process.send_signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
            self.process.kill()
        self.process.wait(timeout=10)
        self.process.stderr.close()
        self.process = None

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)


@pytest.fixture
def redis_server(tmp_path) -> Iterator[RedisProcess]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run scripts/install-system-deps.sh "
                    "(it installs the Debian package redis-server), or `apt-get install redis-server`")
    server = RedisProcess(binary, free_port(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


KEY = cache_key("credit-default", "1", {"age": 40, "region": "north"})
SLOW_MACHINE_TIMEOUT_S = 5.0  # a round-trip bound no busy test machine reaches


def test_redis_key_has_the_prefix_model_and_version_and_hashes_the_features():
    key = redis_key(KEY)
    assert key.startswith(f"{defaults.WORKER_REDIS_KEY_PREFIX}credit-default:1:")
    assert redis_key(cache_key("credit-default", "1", {"region": "north", "age": 40})) == key
    assert redis_key(cache_key("credit-default", "2", {"age": 40, "region": "north"})) != key
    assert redis_key(cache_key("credit-default", "1", {"age": 41, "region": "north"})) != key
    # ':' in names cannot make two different (model, version) pairs share a key.
    assert redis_key(cache_key("a:b", "c", {})) != redis_key(cache_key("a", "b:c", {}))


def test_two_cache_objects_share_entries_which_expire_in_redis(redis_server):
    async def scenario() -> None:
        # round trips bounded generously (the default is 20 ms): sharing and expiry are tested, not speed
        writer = RedisPredictionCache(redis_server.url, ttl_s=0.5, timeout_s=SLOW_MACHINE_TIMEOUT_S)
        reader = RedisPredictionCache(redis_server.url, ttl_s=0.5, timeout_s=SLOW_MACHINE_TIMEOUT_S)
        try:
            assert await reader.get(KEY) is None
            writer.put(KEY, 0.25)
            await wait_until_async(lambda: reader.get(KEY), message="the reader to find the writer's entry")
            assert await reader.get(KEY) == 0.25
            other_version = cache_key("credit-default", "2", {"age": 40, "region": "north"})
            assert await reader.get(other_version) is None
            ttl_ms = redis_server.client().pttl(redis_key(KEY))
            assert 0 < ttl_ms <= 500  # Redis owns the expiry

            async def expired() -> bool:
                return await reader.get(KEY) is None

            await wait_until_async(expired, message="Redis to expire the entry")
            assert await reader.get(KEY) is None
            assert writer.errors == reader.errors == 0
        finally:
            await writer.close()
            await reader.close()

    asyncio.run(scenario())


def test_concurrent_lookups_are_answered_each_with_its_own_value(redis_server):
    keys = [cache_key("m", "1", {"i": i}) for i in range(50)]

    async def scenario() -> list:
        cache = RedisPredictionCache(redis_server.url, ttl_s=60, timeout_s=SLOW_MACHINE_TIMEOUT_S)
        try:
            for i, key in enumerate(keys[:25]):
                cache.put(key, i / 100)
            await wait_until_async(lambda: cache._write_task is None, message="the puts to reach Redis")
            return await asyncio.gather(*(cache.get(key) for key in keys))
        finally:
            await cache.close()

    assert asyncio.run(scenario()) == [i / 100 for i in range(25)] + [None] * 25


def test_redis_down_or_frozen_is_a_counted_miss_logged_once_and_recovered(redis_server, caplog):
    counted = []

    async def scenario() -> None:
        # a frozen Redis must time out; a busy machine's round trip must not
        cache = RedisPredictionCache(redis_server.url, ttl_s=60, retry_s=0.05, timeout_s=0.5,
                                     on_error=lambda: counted.append(1))
        try:
            cache.put(KEY, 0.5)
            await wait_until_async(lambda: cache._write_task is None, message="the puts to reach Redis")
            assert await cache.get(KEY) == 0.5

            redis_server.stop()
            for _ in range(4):
                await asyncio.sleep(0.06)  # time passes beyond retry_s, so every look-up asks (and fails)
                assert await cache.get(KEY) is None
            assert cache.errors == len(counted) == 4 and not cache.healthy
            assert await cache.get(KEY) is None  # inside retry_s: not even asked
            assert cache.errors == 4

            redis_server.start()  # same port, empty (no persistence)
            await asyncio.sleep(0.06)  # time passes beyond retry_s: the next put asks again
            cache.put(KEY, 0.75)
            await wait_until_async(lambda: cache._write_task is None, message="the puts to reach Redis")
            assert await cache.get(KEY) == 0.75 and cache.healthy

            redis_server.freeze()  # slow rather than down: the timeout answers
            try:
                await asyncio.sleep(0.06)  # time passes beyond retry_s: the look-up asks (and times out)
                assert await cache.get(KEY) is None
                assert cache.errors == 5
            finally:
                redis_server.thaw()
            await asyncio.sleep(0.06)  # time passes beyond retry_s: the look-up asks again
            assert await cache.get(KEY) == 0.75
        finally:
            await cache.close()

    with caplog.at_level(logging.WARNING, logger="driftline.worker.cache"):
        asyncio.run(scenario())
    outages = [r for r in caplog.records if "unavailable" in r.getMessage()]
    recoveries = [r for r in caplog.records if "is back" in r.getMessage()]
    assert len(outages) == 2 and len(recoveries) == 2  # once per outage (down, then frozen), not per error


def _predict(url: str, features: dict) -> dict:
    response = httpx.post(f"{url}/predict", json={"features": features}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_two_workers_share_hits_and_survive_a_redis_outage(tiny_results, tmp_path, redis_server):
    settings = make_settings(tmp_path, "127.0.0.1:1")
    registry = registry_with_versions(settings, tiny_results)
    store = redis_server.client()

    def make_worker() -> Worker:
        return Worker(settings, WorkerConfig(model=MODEL, device="cpu", alias_poll_s=0.1, log_events=False,
                                             listen_for_labels=False, cache_url=redis_server.url))

    rows = iter(generate_inputs(200, seed=5).to_dict("records"))

    def answered_by_the_other_worker(url_a: str, url_b: str, write_wait_s: float = 1.0) -> dict | None:
        """A answers a new row and writes it to Redis; B (which never saw it) must then find it there."""
        row, keys_before = next(rows), store.dbsize()
        assert _predict(url_a, row)["cached"] is False
        try:
            wait_until(lambda: store.dbsize() > keys_before, timeout=write_wait_s, message="A to write the row to Redis")
        except AssertionError:
            return None  # A is not writing yet (after an outage: the retry pause); the caller tries another row
        answer = _predict(url_b, row)
        return answer if answer["cached"] else None

    with serving(make_worker()) as url_a, serving(make_worker()) as url_b:
        # no outage yet: A writes, however long a busy machine makes that take (the deadline is for a stuck write);
        # B's first round trip also connects, and on a busy machine may outlast the 20 ms bound (a miss, then
        # the retry pause): another row then, as after the restart below
        shared = wait_until(lambda: answered_by_the_other_worker(url_a, url_b, write_wait_s=60), timeout=120,
                            interval=0.1, message="B to find what A wrote to Redis")
        assert shared is not None and shared["version"] == "1"
        assert metric(url_b, "driftline_worker_cache_remote_hits_total") == 1
        assert all(key.decode().startswith("driftline:pred:credit-default:1:") for key in store.keys())

        # A promotion changes the key: the old version's answer is never served.
        row = next(rows)
        assert _predict(url_a, row)["cached"] is False and _predict(url_a, row)["cached"] is True
        registry.promote(MODEL, "2")
        wait_until(lambda: httpx.get(f"{url_a}/healthz").json()["version"] == "2",
                   message="worker A to serve version 2")
        wait_until(lambda: httpx.get(f"{url_b}/healthz").json()["version"] == "2",
                   message="worker B to serve version 2")
        after_swap = _predict(url_a, row)
        assert after_swap["version"] == "2" and after_swap["cached"] is False

        served = metric(url_a, 'driftline_worker_requests_total{code="200"}')
        redis_server.stop()
        answers = [_predict(url_a, next(rows)) for _ in range(20)]  # every request still served
        assert all(a["cached"] is False for a in answers)
        assert metric(url_a, "driftline_worker_cache_remote_errors_total") >= 1
        assert metric(url_a, 'driftline_worker_requests_total{code="200"}') == served + 20

        redis_server.start()  # empty again; the workers reconnect on their own
        store = redis_server.client()
        shared = wait_until(lambda: answered_by_the_other_worker(url_a, url_b), timeout=60, interval=0.1,
                            message="B to find what A wrote to Redis after the restart")
        assert shared is not None and shared["version"] == "2"
