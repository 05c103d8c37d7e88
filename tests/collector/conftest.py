"""Fixtures for the collector tests: `kcat_broker`, and `ckit`, the helpers of tests/support/collector_helpers.py
as a fixture (for the tests written before they were a module; new tests import the module) with `spawn`, which
starts `driftline collector` processes and cleans them up after the test."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

from driftline.events import encode_event
from tests.support.collector_helpers import (DRIFTLINE, T0_MS, Spawned, collector_thread, config, event, events,
                                             kcat, kcat_broker_running, label, merged, produce, produce_raw,
                                             record_batch, rows)


@pytest.fixture
def kcat_broker() -> Iterator[str]:
    """A fresh embedded broker that kcat can talk to (through `KafkaProxy`); yields its bootstrap address."""
    with kcat_broker_running() as bootstrap:
        yield bootstrap


@pytest.fixture
def ckit(tmp_path: Path) -> Iterator[SimpleNamespace]:
    spawned: list[Spawned] = []

    def spawn(bootstrap: str, url: str, group_id: str, *extra: str, name: str = "collector") -> Spawned:
        args = ["--bootstrap-servers", bootstrap, "--db", url, "--group-id", group_id, "--metrics-port", "0",
                "--session-timeout-ms", "2000", "--heartbeat-interval-ms", "500", *extra]
        proc = Spawned(args, tmp_path / f"{name}-{len(spawned)}.log")
        spawned.append(proc)
        return proc

    yield SimpleNamespace(event=event, label=label, encode=encode_event, produce=produce, kcat=kcat,
                          record_batch=record_batch, produce_raw=produce_raw,
                          events=events, rows=rows, merged=merged,
                          collector_thread=collector_thread, config=config, spawn=spawn, T0_MS=T0_MS,
                          driftline=str(DRIFTLINE))
    for proc in spawned:
        proc.cleanup()
