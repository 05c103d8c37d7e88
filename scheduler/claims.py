"""One scheduler per window: evaluating a window first claims it, so two schedulers on one store
never evaluate it at once (duplicate work, and the loser's failed insert left a quarantine row
that never cleared).

PostgreSQL: a transaction-level advisory lock keyed by the window (`pg_try_advisory_xact_lock`);
a scheduler that cannot take it skips the window, another one is on it, and the lock goes with
the transaction, also when its scheduler dies. SQLite has one writer at a time: the transaction
takes the write lock first (``BEGIN IMMEDIATE``) and a second scheduler waits its turn. Either
way the claimant then checks that the window is still due: the other scheduler may have
evaluated (or quarantined) it since the list of due windows was read.
"""
from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.scheduler.evaluation import due_windows
from driftline.windows import WindowKey


def lock_key(key: WindowKey) -> int:
    """A stable signed 64-bit advisory-lock key for the window (namespaced, so other locks never collide)."""
    name = "\x00".join(("driftline.window", key.model, key.version, str(key.window_start_ms)))
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def claim_window(session: Session, key: WindowKey, now_ms: int, lateness_ms: int,
                 idle_ms: int = defaults.IDLE_PARTITION_SECONDS * 1000) -> bool:
    """Claim `key` for this session's transaction (the first statement of it); False when another scheduler
    holds it or it is no longer due. The claim lasts until the transaction ends."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        if not session.scalar(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": lock_key(key)}):
            return False
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the store's write lock: later reads see the other's commit
    return bool(due_windows(session, now_ms, lateness_ms, window=key, idle_ms=idle_ms))
