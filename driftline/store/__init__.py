"""The store: SQLAlchemy models (models.py) and engine/session/migration helpers (db.py)."""
from driftline.store.db import check_connection, get_engine, require_migrated, session_scope, upgrade

__all__ = ["check_connection", "get_engine", "require_migrated", "session_scope", "upgrade"]
