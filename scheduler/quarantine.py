"""Window quarantine: a window whose evaluation fails is set aside, not allowed to stop the others.

The scheduler evaluates each due window in its own transaction. When one raises (a state
blob that cannot be decoded, a detector that fails), the transaction is rolled back and the
window gets a `window_quarantine` row: the error's type and message (configured secrets
replaced by ***, cut to `QUARANTINE_ERROR_CHARS`), the number of failed attempts and the
time of the next try. `due_windows` skips the window until then; the delay doubles per
failure between `QUARANTINE_RETRY_MIN_SECONDS` and `QUARANTINE_RETRY_MAX_SECONDS`. The
first evaluation that succeeds deletes the row, in the same transaction as its results.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from driftline import defaults
from driftline.redact import scrub
from driftline.store.models import WindowQuarantine
from driftline.windows import WindowKey

_TYPE_CHARS = 200  # the column's width


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff of a quarantined window's retries."""

    min_seconds: float = defaults.QUARANTINE_RETRY_MIN_SECONDS
    max_seconds: float = defaults.QUARANTINE_RETRY_MAX_SECONDS
    error_chars: int = defaults.QUARANTINE_ERROR_CHARS

    def delay_seconds(self, attempts: int) -> float:
        """Seconds before the next try after `attempts` failures: min, 2 min, 4 min, ... up to max."""
        # the exponent is capped so a window failing for months cannot overflow the float
        return min(self.max_seconds, self.min_seconds * 2.0 ** min(max(attempts - 1, 0), 60))


def describe(exc: BaseException, secrets: Iterable[str], limit: int) -> tuple[str, str]:
    """(type, message) of an exception as it may be stored and shown: secrets scrubbed, length bounded."""
    kind = type(exc).__qualname__
    module = type(exc).__module__
    if module not in ("builtins", "__main__"):
        kind = f"{module}.{kind}"
    message = scrub(str(exc), secrets)
    if len(message) > limit:
        message = message[: max(limit - 1, 0)] + "…"
    return kind[:_TYPE_CHARS], message


def record_failure(session: Session, key: WindowKey, exc: BaseException, now_ms: int, *,
                   secrets: Iterable[str] = (), policy: RetryPolicy = RetryPolicy()) -> WindowQuarantine:
    """Quarantine the window (or count one more failure of a quarantined one) and set its next try."""
    row = session.scalar(select(WindowQuarantine).where(
        WindowQuarantine.model == key.model, WindowQuarantine.version == key.version,
        WindowQuarantine.window_start_ms == key.window_start_ms))
    now = datetime.fromtimestamp(now_ms / 1000.0, tz=timezone.utc)
    if row is None:
        row = WindowQuarantine(model=key.model, version=key.version, window_start_ms=key.window_start_ms,
                               attempts=0, first_failed_at=now)
        session.add(row)
    row.window_end_ms = key.window_end_ms
    row.error_type, row.error = describe(exc, secrets, policy.error_chars)
    row.attempts += 1
    row.last_failed_at = now
    row.next_retry_at = now + timedelta(seconds=policy.delay_seconds(row.attempts))
    return row


def release(session: Session, key: WindowKey) -> None:
    """The window was evaluated: it leaves quarantine (a no-op when it was never in it)."""
    session.execute(delete(WindowQuarantine).where(
        WindowQuarantine.model == key.model, WindowQuarantine.version == key.version,
        WindowQuarantine.window_start_ms == key.window_start_ms))
