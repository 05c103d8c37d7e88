"""Dashboard fixtures: one seeded store per test session, copied fresh for each test.

Seeding (tests/support/demo_store.py) takes half a minute on a busy machine, so it runs once per test run into
a template file that every test process reads; each test gets its own copy, as `sqlite_url` does for empty stores.
"""
from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import streamlit as st
from filelock import FileLock

from driftline.store import db as store_db
from tests.support.demo_store import SeedSummary, seed_store

# 120 windows of a minute per model: a few hundred windows in all, two hours of history.
SEED_WINDOWS = 120


@pytest.fixture(scope="session")
def _seeded_template(tmp_path_factory, worker_id) -> tuple[Path, SeedSummary]:
    """Results written by the scheduler's own evaluation job (the real detectors); seeded once per run, by the
    first test process that asks (the others wait for it and read the same file)."""
    # the folder above each xdist process's own is the run's (with -n 0 it would hold earlier runs' too)
    run_dir = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    path, written = run_dir / "dashboard-seed.db", run_dir / "dashboard-seed.pickle"
    with FileLock(run_dir / "dashboard-seed.lock"):
        if not written.exists():
            path.unlink(missing_ok=True)  # what a process that failed half-way left
            url = f"sqlite:///{path}"
            store_db.upgrade(url)
            summary = seed_store(url, windows=SEED_WINDOWS)
            store_db.get_engine(url).dispose()
            store_db._engines.pop(url, None)
            written.write_bytes(pickle.dumps(summary))
    return path, pickle.loads(written.read_bytes())


@pytest.fixture
def seeded(_seeded_template, tmp_path, monkeypatch) -> tuple[str, SeedSummary]:
    """(URL, what was written) of a fresh copy of the seeded store; DRIFTLINE_DB points at it."""
    template, summary = _seeded_template
    path = tmp_path / "seeded.db"
    shutil.copyfile(template, path)
    url = f"sqlite:///{path}"
    monkeypatch.setenv("DRIFTLINE_DB", url)
    return url, summary


@pytest.fixture(autouse=True)
def _fresh_streamlit_caches(monkeypatch):
    """Each test starts with empty Streamlit caches and refresh off (AppTest runs a fragment once anyway)."""
    st.cache_data.clear()
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_REFRESH_SECONDS", "0")
    yield
    st.cache_data.clear()
