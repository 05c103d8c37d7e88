"""Fixtures for the collector tests: `kcat_broker`, and `spawn_collector`, which starts `driftline collector`
processes and cleans them up after the test. The other helpers are plain functions in
tests/support/collector_helpers.py."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from driftline import defaults
from tests.support.collector_helpers import Spawned, kcat_broker_running


@pytest.fixture
def kcat_broker() -> Iterator[str]:
    """A fresh embedded broker that kcat can talk to (through `KafkaProxy`); yields its bootstrap address."""
    with kcat_broker_running() as bootstrap:
        yield bootstrap


@pytest.fixture
def spawn_collector(tmp_path: Path) -> Iterator[Callable[..., Spawned]]:
    """`spawn_collector(bootstrap, url, group_id, *extra_args, name=...)` starts `driftline collector` with fast
    group settings; every process it started is killed after the test."""
    spawned: list[Spawned] = []

    def spawn(bootstrap: str, url: str, group_id: str, *extra: str, name: str = "collector") -> Spawned:
        args = ["--bootstrap-servers", bootstrap, "--db", url, "--group-id", group_id, "--metrics-port", "0",
                "--session-timeout-ms", "2000", "--heartbeat-interval-ms", "500", *extra]
        proc = Spawned(args, tmp_path / f"{name}-{len(spawned)}.log")
        spawned.append(proc)
        return proc

    yield spawn
    for proc in spawned:
        proc.cleanup()


@pytest.fixture(params=defaults.COLLECTOR_KAFKA_CLIENTS)
def kafka_client(request) -> str:
    """The collector's Kafka client: a test that takes it runs on librdkafka and on kafka-python."""
    return request.param
