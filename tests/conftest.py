"""Shared fixtures: a real embedded broker per test session, and fresh migrated databases.

Databases: the migrations run once per test session into a template (a SQLite file,
a PostgreSQL template database); each test gets a fresh copy, so tests never see
each other's rows. PostgreSQL is used whenever a server answers at 127.0.0.1:5432
(DRIFTLINE_TEST_PG overrides the admin URL); otherwise its cases are skipped with
the reason in the summary.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from driftline.broker import EmbeddedBroker, free_port
from driftline.config import ENV_TEST_PG
from driftline.store import db as store_db

# More test processes than cores (xdist workers, each `driftline up` a stack of processes): torch's and BLAS's
# thread pools of one thread per core spin against each other (`driftline train` of 80 000 rows took 88 s beside
# other tests instead of 39 s with one thread, and twice the CPU). One thread per process, here and in children.
_THREADS = os.environ.setdefault("OMP_NUM_THREADS", "1")
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # BLAS reads its own variable before OMP_NUM_THREADS
    os.environ.setdefault(_name, _THREADS)

PG_ADMIN_URL = os.environ.get(ENV_TEST_PG, "postgresql://postgres@127.0.0.1:5432/postgres")
RUN_ID = uuid.uuid4().hex[:8]


def _pg_connect(dbname: str | None = None):
    import psycopg

    url = PG_ADMIN_URL if dbname is None else PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{dbname}"
    return psycopg.connect(url, autocommit=True, connect_timeout=2)


def _pg_available() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        with _pg_connect():
            return None
    except Exception as exc:  # any failure means: not available here
        return f"PostgreSQL not reachable at {PG_ADMIN_URL.split('@')[-1]}: {str(exc).splitlines()[0]}"


PG_UNAVAILABLE = _pg_available()


def _sa_url(dbname: str) -> str:
    return PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1).rsplit("/", 1)[0] + f"/{dbname}"


@pytest.fixture(scope="session")
def broker():
    """Bootstrap servers of an embedded broker with the driftline topics (4 partitions each)."""
    with EmbeddedBroker(port=free_port(), partitions=4) as embedded:
        yield embedded.bootstrap_servers


@pytest.fixture(scope="session")
def embedded_broker_factory():
    """Start extra brokers (for restart tests); all are stopped at the end of the session."""
    started: list[EmbeddedBroker] = []

    def start(port: int | None = None, partitions: int = 4) -> EmbeddedBroker:
        embedded = EmbeddedBroker(port=port or free_port(), partitions=partitions).start()
        started.append(embedded)
        return embedded

    yield start
    for embedded in started:
        embedded.stop()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("db-template") / "template.db"
    url = f"sqlite:///{path}"
    store_db.upgrade(url)
    store_db.get_engine(url).dispose()
    return path


@pytest.fixture(scope="session")
def _drift_scenario_template(_sqlite_template, tmp_path_factory) -> Path:
    """A SQLite store in which the drift scenario was judged (tests.support.drift_store), made once per process
    for the tests that clone it into a fleet."""
    from tests.support.drift_store import evaluate_drift_scenario

    path = tmp_path_factory.mktemp("drift-template") / "drift.db"
    shutil.copyfile(_sqlite_template, path)
    evaluate_drift_scenario(f"sqlite:///{path}")
    store_db.dispose_engines()
    return path


@pytest.fixture(scope="session")
def _pg_template():
    if PG_UNAVAILABLE:
        pytest.skip(PG_UNAVAILABLE)
    name = f"driftline_tmpl_{RUN_ID}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _sa_url(name)
    store_db.upgrade(url)
    store_db.get_engine(url).dispose()
    yield name
    store_db.dispose_engines()
    with _pg_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(_sqlite_template, tmp_path) -> str:
    """A fresh, migrated SQLite store."""
    path = tmp_path / "driftline.db"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def postgres_url(_pg_template):
    """A fresh, migrated PostgreSQL database, dropped after the test."""
    name = f"driftline_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    with _pg_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template}"')
    url = _sa_url(name)
    yield url
    engine = store_db._engines.pop(url, None)
    if engine is not None:
        engine.dispose()
    with _pg_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def store_like(request, tmp_path):
    """`store_like(url)`: another fresh, migrated store of the kind of `url` (SQLite or PostgreSQL)."""
    made: list[str] = []

    def make(url: str) -> str:
        if url.startswith("sqlite"):
            path = tmp_path / f"store-{len(made)}.db"
            shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
            return f"sqlite:///{path}"
        name = f"driftline_{RUN_ID}_{uuid.uuid4().hex[:8]}"
        with _pg_connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{request.getfixturevalue("_pg_template")}"')
        made.append(name)
        return _sa_url(name)

    yield make
    for name in made:
        engine = store_db._engines.pop(_sa_url(name), None)
        if engine is not None:
            engine.dispose()
        with _pg_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request) -> str:
    """A fresh, migrated store; every test using it runs on SQLite and on PostgreSQL."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")


@pytest.fixture
def unique_id() -> str:
    """A fresh id for consumer groups and topics: the broker keeps a group's first settings."""
    return uuid.uuid4().hex[:12]


E2E_FOLDER = Path(__file__).parent / "e2e"
BROWSER_FILES = {"test_browser.py", "test_signon_browser.py"}


def _uses_module_fixture(item) -> bool:
    """Whether the test uses a module- or class-scoped fixture (built once per file in each test process)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(d.scope in ("module", "class") for chain in defs.values() for d in chain)


def pytest_itemcollected(item) -> None:
    """Markers, set as each test is collected (before pytest-xdist reads the groups into the test ids).

    `make test-fast` selects on: `e2e` for tests/e2e, `browser` for the Playwright tests, `postgres` for
    every test on the PostgreSQL store. Under pytest-xdist (`--dist loadgroup`), the tests of a file that
    builds a module-scoped fixture stay in one process (one build, not one per process), unless the test
    names its own `xdist_group`.
    """
    path = Path(str(item.fspath))
    if E2E_FOLDER in path.parents:
        item.add_marker(pytest.mark.e2e)
    if path.name in BROWSER_FILES:
        item.add_marker(pytest.mark.browser)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "postgres_url" in getattr(item, "fixturenames", ()) or params.get("db_url") == "postgresql":
        item.add_marker(pytest.mark.postgres)
    if item.get_closest_marker("xdist_group") is None and _uses_module_fixture(item):
        item.add_marker(pytest.mark.xdist_group(path.relative_to(Path(__file__).parent).as_posix()))


def pytest_collection_modifyitems(config, items) -> None:
    """The e2e tests first (stable sort, order otherwise kept): the longest tests start while the short ones
    fill the other test processes."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


def pytest_report_header(config) -> str:
    return "postgresql: " + ("available" if not PG_UNAVAILABLE else f"SKIPPED ({PG_UNAVAILABLE})")
