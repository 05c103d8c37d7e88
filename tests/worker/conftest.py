"""Fixtures for the worker tests: tiny trained models. The helpers (settings, a registry with versions, a served
worker, a topic reader, /metrics) are plain functions in tests/support/worker_helpers.py."""
from __future__ import annotations

import pytest

from driftline.worker.training import TrainResult
from tests.support.worker_helpers import tiny_models


@pytest.fixture(scope="session")
def tiny_results() -> list[TrainResult]:
    """Two differently seeded tiny models (for promote/rollback)."""
    return tiny_models()
