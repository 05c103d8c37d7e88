"""Retention: rows past their age, or timestamped too far in the future, are deleted in bounded batches.

Applied by the scheduler (every `RETENTION_INTERVAL_SECONDS`, at most
`RETENTION_MAX_BATCHES_PER_RUN` statements per table per run, so a big backlog never holds a
long lock) and by `driftline db prune [--dry-run]` (until nothing is left). Ages come from the
`[retention]` section of the --config TOML, defaults in driftline.defaults:

| table | pruned when |
|---|---|
| dead_letters | received more than `dead_letter_days` ago |
| window_states, window_quarantine | the window started more than `window_state_days` ago and is closed |
| window_evaluations, detector_results | the window started more than `result_days` ago and is closed |
| notifications | created more than `notification_days` ago, sent or failed, and its alert is not pending or firing |
| window rows, predictions, labels | timestamped more than `future_seconds` after now (a wrong clock, a hostile producer) |
| window_rollups | the hour or day ended more than `window_state_days` ago |
| result_rollups | the hour ended more than `result_days` ago |

Before deleting, each run compacts and rolls up (scheduler/compaction.py, scheduler/rollups.py): judged
windows' partial states are merged into one row per window; window states past `rollup_hourly_days` (at
least the scheduler's re-evaluation horizon, so any window that can still be judged again keeps its own
state) are merged into hourly rollups, those past `rollup_daily_days` into daily ones; detector results
past `result_rollup_days` (0: never) into hourly rollups, a model-day at a time. On PostgreSQL the detector
results are partitioned by day (driftline.store.partitions): each run makes the partitions of the days
ahead, and a day whose rows are all rolled up, or past `result_days`, is dropped whole instead of
deleted row by row. `--dry-run` counts the deletions only.

Never pruned: a window that is still open (its end plus the allowed lateness is after now,
and it starts less than `future_seconds` ahead), the window a pending or firing alert last
saw, and the notifications of a pending or firing alert. Predictions and labels age out
through the collector (`--prediction-retention-days`), which needs them for the label join.
A days setting of 0 keeps that table's rows for good.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import Field

from sqlalchemy import ColumnElement, and_, delete, exists, false, func, or_, select, tuple_

from driftline import defaults
from driftline.errors import UserError
from driftline.toml_sections import Table, given, parse_section
from driftline.store import partitions
from driftline.store.db import get_engine
from driftline.store.models import (Alert, DeadLetter, DetectorResult, LabelRecord, Notification, PredictionRecord,
                                    ResultRollup, WindowEvaluation, WindowQuarantine, WindowRollup,
                                    WindowStateRecord)
from driftline.scheduler.compaction import compactable_windows, merge_window
from driftline.scheduler.evaluation import REEVALUATION_HORIZON_MS
from driftline.scheduler.rollups import DAY, HOUR, ROLLUPS, STATES, drop_rolled_days, roll_results, roll_states
from driftline.vocabulary import ALERT_ACTIVE, NOTIFICATION_FAILED, NOTIFICATION_SENT

_Age = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Count = Annotated[int, Field(gt=0)]


class RetentionTable(Table):
    """The [retention] keys: ages at least 0 (0 keeps for good), counts and the interval above 0."""

    WHERE = "[retention]"

    dead_letter_days: _Age = defaults.RETENTION_DEAD_LETTER_DAYS
    window_state_days: _Age = defaults.RETENTION_WINDOW_STATE_DAYS
    result_days: _Age = defaults.RETENTION_RESULT_DAYS
    notification_days: _Age = defaults.RETENTION_NOTIFICATION_DAYS
    future_seconds: _Age = defaults.RETENTION_FUTURE_SECONDS
    batch_rows: _Count = defaults.RETENTION_BATCH_ROWS
    max_batches_per_run: _Count = defaults.RETENTION_MAX_BATCHES_PER_RUN
    interval_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = defaults.RETENTION_INTERVAL_SECONDS
    rollup_hourly_days: _Age = defaults.ROLLUP_HOURLY_DAYS
    rollup_daily_days: _Age = defaults.ROLLUP_DAILY_DAYS
    result_rollup_days: _Age = defaults.RESULT_ROLLUP_DAYS

    def model_post_init(self, _context: Any) -> None:
        horizon_days = REEVALUATION_HORIZON_MS / _DAY_MS
        for key in ("rollup_hourly_days", "result_rollup_days"):
            days = getattr(self, key)
            if 0 < days < horizon_days:
                raise UserError(f"{self.WHERE} {key} = {days:g}: windows are judged again for "
                                f"{horizon_days:g} days (late events, labels), so at least {horizon_days:g} (or 0: never)")
        if 0 < self.rollup_daily_days < self.rollup_hourly_days:
            raise UserError(f"{self.WHERE} rollup_daily_days = {self.rollup_daily_days:g} is below rollup_hourly_days "
                            f"= {self.rollup_hourly_days:g}: hours are rolled into days, so at least that (or 0)")


_DAY_MS = 86_400_000


class RetentionPolicy(RetentionTable):
    """The `[retention]` settings (every key optional) and the windows' allowed lateness."""

    # Not a [retention] key: the windows' allowed lateness, which decides when a window is closed.
    lateness_seconds: _Age = defaults.ALLOWED_LATENESS_SECONDS

    @classmethod
    def from_mapping(cls, mapping: Any, lateness_seconds: float) -> "RetentionPolicy":
        table = parse_section(RetentionTable, mapping, cls.WHERE)
        return cls(**given(table), lateness_seconds=lateness_seconds)

    @classmethod
    def from_settings(cls, settings: Any) -> "RetentionPolicy":
        return cls.from_mapping(settings.section("retention"), settings.allowed_lateness_seconds)

def prune(db_url: str, policy: RetentionPolicy, *, now_ms: int | None = None, max_batches: int | None = None,
          dry_run: bool = False) -> dict[str, int]:
    """Delete what `policy` no longer keeps, `policy.batch_rows` rows per transaction and at most
    `max_batches` transactions per table (None: until done); returns rows deleted per table.
    With `dry_run`, deletes nothing and returns how many rows would go."""
    import time

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    engine = get_engine(db_url)
    counts: dict[str, int] = {} if dry_run else roll_up(engine, policy, now_ms, max_batches)
    for model, condition in _targets(policy, now_ms):
        table = model.__table__
        if dry_run:
            with engine.connect() as conn:
                counts[table.name] = int(conn.scalar(select(func.count()).select_from(table).where(condition)) or 0)
            continue
        # the whole primary key: predictions and labels are keyed by (request_id, model)
        key = tuple_(*table.primary_key.columns)
        total, batches = 0, 0
        while max_batches is None or batches < max_batches:
            # ids first, then delete by id: one short transaction per batch on both SQLite and PostgreSQL
            with engine.begin() as conn:
                ids = [tuple(row) for row in conn.execute(select(*table.primary_key.columns).where(condition)
                                                          .limit(policy.batch_rows))]
                if ids:
                    conn.execute(delete(table).where(key.in_(ids)))
            total += len(ids)
            batches += 1
            if len(ids) < policy.batch_rows:
                break
        counts[table.name] = total
    return counts


def roll_up(engine: Any, policy: RetentionPolicy, now_ms: int, max_batches: int | None) -> dict[str, int]:
    """Compact judged windows, roll up old states and results, make and drop day partitions (module docstring);
    returns the rows merged or folded per "table:step", and the day partitions dropped (steps that did nothing left
    out)."""
    counts = {"window_states:merged": 0, "window_states:rolled_up": 0, "window_rollups:rolled_up": 0,
              "detector_results:rolled_up": 0, "detector_results:days_dropped": 0}
    runs = range(max_batches) if max_batches is not None else iter(int, 1)  # None: until done
    with engine.begin() as conn:
        partitions.ensure_days(conn, "detector_results", now_ms - _DAY_MS,
                               now_ms + defaults.PARTITION_DAYS_AHEAD * _DAY_MS)
    with engine.connect() as conn:
        since = now_ms - int(max(policy.rollup_hourly_days, policy.window_state_days) * _DAY_MS) - _DAY_MS
        windows = compactable_windows(conn, since, defaults.COMPACTION_WINDOWS_PER_RUN)
    for model, version, start in windows:
        with engine.begin() as conn:  # one window a transaction: its rows are locked briefly
            counts["window_states:merged"] += merge_window(conn, model, version, start)
    steps = []
    if policy.rollup_hourly_days > 0:
        steps.append(("window_states:rolled_up", lambda c: roll_states(
            c, STATES, HOUR, now_ms - int(policy.rollup_hourly_days * _DAY_MS), defaults.ROLLUPS_PER_RUN)))
    if policy.rollup_daily_days > 0:
        steps.append(("window_rollups:rolled_up", lambda c: roll_states(
            c, ROLLUPS, DAY, now_ms - int(policy.rollup_daily_days * _DAY_MS), defaults.ROLLUPS_PER_RUN)))
    if policy.result_rollup_days > 0:
        steps.append(("detector_results:rolled_up", lambda c: roll_results(
            c, now_ms - int(policy.result_rollup_days * _DAY_MS), defaults.ROLLUPS_PER_RUN)))
    for name, step in steps:
        for _ in runs:
            with engine.begin() as conn:
                done = step(conn)
            counts[name] += done
            if not done:
                break
    with engine.begin() as conn:
        counts["detector_results:days_dropped"] = drop_rolled_days(
            conn, now_ms - int(policy.result_rollup_days * _DAY_MS) if policy.result_rollup_days > 0 else 0,
            now_ms - int(policy.result_days * _DAY_MS) if policy.result_days > 0 else None)
    return {step: n for step, n in counts.items() if n}


def _targets(policy: RetentionPolicy, now_ms: int) -> list[tuple[Any, ColumnElement[bool]]]:
    now = datetime.fromtimestamp(now_ms / 1000.0, tz=timezone.utc)
    future_ms = now_ms + int(policy.future_seconds * 1000)
    lateness_ms = int(policy.lateness_seconds * 1000)

    def aged_window(model: Any, days: float) -> ColumnElement[bool]:
        old = (and_(model.window_start_ms < now_ms - int(days * _DAY_MS), model.window_end_ms + lateness_ms <= now_ms)
               if days > 0 else false())
        seen_by_active_alert = exists().where(Alert.state.in_(ALERT_ACTIVE), Alert.model == model.model,
                                              Alert.version == model.version,
                                              Alert.last_window_start_ms == model.window_start_ms)
        return and_(or_(old, model.window_start_ms > future_ms), ~seen_by_active_alert)

    def before(column: Any, days: float) -> ColumnElement[bool]:
        return column < now - timedelta(days=days) if days > 0 else false()

    notification_of_active_alert = exists().where(Alert.fingerprint == Notification.alert_fingerprint,
                                                  Alert.state.in_(ALERT_ACTIVE))
    return [
        (DeadLetter, before(DeadLetter.received_at, policy.dead_letter_days)),
        (WindowStateRecord, aged_window(WindowStateRecord, policy.window_state_days)),
        (WindowQuarantine, aged_window(WindowQuarantine, policy.window_state_days)),
        (WindowEvaluation, aged_window(WindowEvaluation, policy.result_days)),
        (DetectorResult, aged_window(DetectorResult, policy.result_days)),
        (Notification, and_(before(Notification.created_at, policy.notification_days),
                            Notification.status.in_((NOTIFICATION_SENT, NOTIFICATION_FAILED)), ~notification_of_active_alert)),
        (WindowRollup, WindowRollup.end_ms <= now_ms - int(policy.window_state_days * _DAY_MS)
         if policy.window_state_days > 0 else false()),
        (ResultRollup, ResultRollup.end_ms <= now_ms - int(policy.result_days * _DAY_MS)
         if policy.result_days > 0 else false()),
        (PredictionRecord, PredictionRecord.ts_ms > future_ms),
        (LabelRecord, LabelRecord.ts_ms > future_ms),
    ]
