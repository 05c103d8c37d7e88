"""Receiver fixtures: a store with a registered iris baseline, the app on a TestClient, and reading topics back."""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

import numpy as np
import orjson
import pandas as pd
import pytest

from driftline.config import TOPIC_DEAD_LETTERS, TOPIC_INFERENCE

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def register_baseline(db_url: str, tmp_path, model: str, version: str = "1", rows: int = 400, seed: int = 0) -> None:
    """`driftline baseline` for an iris-like table (four numeric features), promoted to production."""
    from click.testing import CliRunner

    from driftline.cli import cli

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({name: rng.normal(5.0 + i, 0.5, rows) for i, name in enumerate(FEATURES)})
    frame["score"] = rng.uniform(0, 1, rows)
    path = tmp_path / f"{model}-train.csv"
    frame.to_csv(path, index=False)
    result = CliRunner().invoke(cli, ["baseline", "--model", model, "--version", version, "--file", str(path),
                                      "--prediction", "score", "--db", db_url])
    assert result.exit_code == 0, result.output


@pytest.fixture
def model(unique_id) -> str:
    return f"iris-{unique_id[:8]}"


@pytest.fixture
def receiver_factory(broker, sqlite_url) -> Iterator[Callable[..., Any]]:
    """Receivers (service, TestClient) on the session broker and this test's store; closed at the end."""
    from fastapi.testclient import TestClient

    from driftline.receiver.app import create_app
    from driftline.receiver.service import Receiver, ReceiverConfig

    made: list[Any] = []

    def make(token: str | None = None, **overrides: Any) -> tuple[Any, Any]:
        service = Receiver(ReceiverConfig(**{"bootstrap_servers": broker, "db_url": sqlite_url, **overrides}))
        made.append(service)
        # on loopback's name: the ingress guard answers only the Host names it serves (TestClient's is "testserver")
        return service, TestClient(create_app(service, token=token), base_url="http://127.0.0.1")

    yield make
    for service in made:
        service.close()


def read_topic(bootstrap: str, topic: str, keep: Callable[[Any], bool], count: int,
               timeout_s: float = 60.0) -> list[Any]:
    """The first `count` records of `topic` that `keep` accepts (the session broker holds other tests' too)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"receiver-test-{uuid.uuid4().hex[:8]}",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=2000, heartbeat_interval_ms=500)
    found: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(found) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found += [r for r in records if keep(r)]
    finally:
        consumer.close()
    return found


def _of_model(record: Any, model: str) -> bool:
    """Whether a record is an event of `model`; other tests on the session broker put malformed ones there too."""
    try:
        value = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and value.get("model") == model


def events_of(bootstrap: str, model: str, count: int) -> list[dict[str, Any]]:
    records = read_topic(bootstrap, TOPIC_INFERENCE, lambda r: _of_model(r, model), count)
    return [orjson.loads(r.value) for r in records]


def dead_letters_of(bootstrap: str, marker: str, count: int) -> list[tuple[dict[str, str], bytes]]:
    """Dead letters whose headers or body mention `marker` (a ce-id or a model name), as (headers, body)."""
    def keep(record: Any) -> bool:
        return marker.encode() in record.value or any(marker.encode() in v for _, v in record.headers)

    return [({k: v.decode() for k, v in r.headers}, r.value)
            for r in read_topic(bootstrap, TOPIC_DEAD_LETTERS, keep, count)]
