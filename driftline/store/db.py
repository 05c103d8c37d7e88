"""Engines, sessions and migrations for the store (SQLite by default, PostgreSQL in production)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from driftline.errors import UserError
from driftline.private_files import private_dir, touch_private


def _migrations_dir() -> Path:
    """The alembic scripts (package driftline.migrations): driftline/migrations/ once installed
    from a wheel, the repository's top-level migrations/ in a checkout (an editable install)."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "migrations"
    return installed if (installed / "env.py").is_file() else package.parent / "migrations"


MIGRATIONS_DIR = _migrations_dir()

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API connection
    cursor = dbapi_connection.cursor()
    # WAL lets the dashboard read while the collector writes; the busy timeout
    # makes concurrent writers (collector, scheduler, worker) wait instead of failing.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # 64 MiB of page cache instead of 2: the collector inserts predictions under random
    # request ids, and once their primary-key index outgrows the cache each insert reads
    # pages back, more than doubling the cost per row. Only pages actually touched take memory.
    cursor.execute("PRAGMA cache_size=-65536")
    # Checkpoint the WAL every ~40 MB instead of ~4 MB: a page the collector's inserts touch
    # over and over is copied back once per checkpoint, and each checkpoint syncs.
    cursor.execute("PRAGMA wal_autocheckpoint=10000")
    cursor.close()


def get_engine(url: str) -> Engine:
    """One engine per URL per process (engines pool connections; creating one per call leaks them)."""
    with _lock:
        engine = _engines.get(url)
        if engine is not None:
            return engine
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise UserError(f"invalid database URL {redacted_url(url)!r}; expected e.g. sqlite:///path/driftline.db "
                            "or postgresql+psycopg://user@host:5432/db") from None
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:" and not parsed.query.get("uri"):
                # created 0600 (folder 0700) before SQLite opens it: SQLite gives its -wal and -shm
                # files the database file's mode, and the store holds every logged request
                private_dir(Path(parsed.database).parent)
                touch_private(parsed.database)
            engine = create_engine(url, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            try:
                engine = create_engine(url, pool_pre_ping=True, connect_args=_connect_args(parsed.get_backend_name()))
            except NoSuchModuleError:  # an unknown scheme, or a driver that is not installed
                raise UserError(f"unsupported database URL {redacted_url(url)!r}: no SQLAlchemy dialect for "
                                f"{parsed.drivername!r}; use sqlite:///path/driftline.db "
                                "or postgresql+psycopg://user@host:5432/db") from None
        _engines[url] = engine
        return engine


def _connect_args(backend: str) -> dict:
    return {"connect_timeout": 5} if backend == "postgresql" else {}


def dispose_engines() -> None:
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


# Query parameters of a database URL whose value is a credential (libpq's sslpassword, a
# password passed as ?password=, tokens of cloud drivers): shown as *** like the password.
SECRET_QUERY_KEYS = frozenset({"password", "pass", "passwd", "pwd", "token", "secret", "key", "sslpassword",
                               "access_token", "api_key", "apikey"})


def redacted_url(url: str) -> str:
    """`url` as it may be shown or logged: the password and any credential query value replaced by ***.

    A URL that cannot be parsed is never shown raw (it may hold a password in a
    place the parser could not find): only its scheme, or "<unparseable URL>".
    """
    try:
        parsed = make_url(url)
        query = {k: ("***" if k.lower() in SECRET_QUERY_KEYS else v) for k, v in parsed.query.items()}
        return parsed.set(query=query).render_as_string(hide_password=True).replace("=%2A%2A%2A", "=***")
    except Exception:  # noqa: BLE001 - whatever the parser chokes on, the raw text is never printed
        scheme = url.split("://", 1)[0] if "://" in url else ""
        safe = scheme.replace("+", "").replace(".", "").replace("-", "")
        return f"{scheme}://<unparseable URL>" if scheme and safe.isalnum() else "<unparseable URL>"


def check_connection(url: str) -> None:
    """Raise a UserError that says what to do when the database cannot be reached."""
    try:
        with get_engine(url).connect():
            pass
    except OperationalError as exc:
        cause = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise UserError(f"cannot connect to the database {redacted_url(url)} ({cause}); "
                        "check --db / DRIFTLINE_DB and that the server is running") from None


@contextlib.contextmanager
def session_scope(url_or_engine: str | Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    engine = get_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    session = sessionmaker(engine, expire_on_commit=False)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str):  # noqa: ANN201 - alembic.config.Config
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # Percent signs in passwords would be read as interpolation by ConfigParser.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Run the migrations up to `revision` (idempotent)."""
    from alembic import command

    check_connection(url)
    command.upgrade(alembic_config(url), revision)


def is_migrated(url: str) -> bool:
    return inspect(get_engine(url)).has_table("alembic_version")


def require_migrated(url: str) -> None:
    """Fail with a clear instruction when the store has not been created yet."""
    check_connection(url)
    if not is_migrated(url):
        raise UserError(f"the store at {redacted_url(url)} has no tables yet; run `driftline db upgrade` first")
