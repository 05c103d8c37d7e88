"""Fixtures for the worker tests: tiny trained models, and `kit`, the helpers of tests/support/worker_helpers.py
as a fixture (for the tests written before they were a module; new tests import the module)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from driftline.worker.training import TrainResult
from tests.support.worker_helpers import (MODEL, make_settings, metric, read_topic, registry_with_versions, serving,
                                          tiny_models, topic_records)


@pytest.fixture(scope="session")
def tiny_results() -> list[TrainResult]:
    """Two differently seeded tiny models (for promote/rollback)."""
    return tiny_models()


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    return SimpleNamespace(MODEL=MODEL, make_settings=make_settings, registry_with_versions=registry_with_versions,
                           serving=serving, read_topic=read_topic, topic_records=topic_records, metric=metric)
