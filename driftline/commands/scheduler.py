"""`driftline scheduler`: evaluate closed windows, drive alerts, deliver notifications, apply retention.

One APScheduler BlockingScheduler per deployment. Every job is idempotent per
window, so a restarted scheduler simply picks up where the store says it was.
"""
from __future__ import annotations

import logging
import signal

import click
from sqlalchemy.exc import InterfaceError, OperationalError

from driftline.config import Settings, common_options
from driftline.logs import configure_logging
from driftline.store import db as store_db

log = logging.getLogger("driftline.scheduler")


class SchedulerJobs:
    """The scheduler's jobs, also callable one by one (tests, `--once`)."""

    def __init__(self, settings: Settings):
        from alerts import Channels, load_rules
        from alerts.channels.validation import check_channel_settings
        from driftline.evaluation import BaselineCache, EvaluationConfig
        from driftline.quarantine import RetryPolicy
        from driftline.retention import RetentionPolicy

        for warning in check_channel_settings(settings):
            log.warning("%s", warning)
        self.settings = settings
        self.config = EvaluationConfig.from_settings(settings)
        self.rules = load_rules(settings, settings.config_path)
        self.channels = Channels.from_settings(settings, timeout=self.rules.delivery.timeout)
        self.cache = BaselineCache()
        self.retry = RetryPolicy()
        self.retention = RetentionPolicy.from_settings(settings)

    def evaluate_due_windows(self, now_ms: int | None = None) -> int:
        """Evaluate every due window, each in its own transaction with its alert updates; returns how many
        succeeded. A window that raises is quarantined and retried later; the others go on."""
        from driftline.evaluation import due_windows
        from driftline.evaluation import now_ms as wall_now_ms

        now_ms = wall_now_ms() if now_ms is None else now_ms
        with store_db.session_scope(self.settings.db_url) as session:
            keys = due_windows(session, now_ms, self.settings.allowed_lateness_seconds * 1000)
        evaluated = 0
        for key in keys:
            try:
                status = self._evaluate_one(key)
            except (OperationalError, InterfaceError):
                raise  # the store itself failed: no window can be evaluated, the next run tries them all
            except Exception as exc:  # noqa: BLE001 - one window's failure must not stop the others
                self._quarantine(key, exc, now_ms)
                continue
            evaluated += 1
            log.info("evaluated %s v%s window %s: %s", key.model, key.version, key.window_start_ms, status)
        return evaluated

    def _evaluate_one(self, key) -> str:  # noqa: ANN001 - driftline.evaluation.WindowKey
        from alerts import apply_retrain_policy, process_window
        from driftline.evaluation import evaluate
        from driftline.quarantine import release
        from driftline.store.models import utcnow

        with store_db.session_scope(self.settings.db_url) as session:
            evaluation = evaluate(session, key, self.cache, self.config)
            session.flush()
            if evaluation.status != "no_baseline":
                now = utcnow()
                changed = process_window(session, key.model, key.version, key.window_start_ms,
                                         rules=self.rules, now=now)
                for alert in changed:
                    if now in (alert.fired_at, alert.resolved_at):  # a transition in this window
                        log.info("alert %s: %s v%s %s%s: %s", alert.state, alert.model, alert.version,
                                 alert.detector, f" {alert.feature}" if alert.feature else "", alert.summary)
                request = apply_retrain_policy(session, key.model, key.version, key.window_start_ms,
                                               policy=self.rules.retrain, now=now)
                if request is not None:
                    log.info("retraining requested for %s v%s: %s", key.model, key.version,
                             (request.reason or {}).get("reason", ""))
            release(session, key.model, key.version, key.window_start_ms)
            return evaluation.status

    def _quarantine(self, key, exc: Exception, now_ms: int) -> None:  # noqa: ANN001 - a WindowKey
        from driftline.quarantine import record_failure

        with store_db.session_scope(self.settings.db_url) as session:
            row = record_failure(session, key.model, key.version, key.window_start_ms, key.window_end_ms, exc,
                                 now_ms, secrets=self.settings.secret_values(), policy=self.retry)
            log.warning("window quarantined: %s v%s window %s (attempt %d, next try %s): %s: %s", key.model,
                        key.version, key.window_start_ms, row.attempts, f"{row.next_retry_at:%Y-%m-%d %H:%M:%S}Z",
                        row.error_type, row.error)

    def apply_retention(self, now_ms: int | None = None) -> dict[str, int]:
        """Prune rows past their retention, a bounded number per table per run; returns the counts."""
        from driftline.retention import prune

        counts = prune(self.settings.db_url, self.retention, now_ms=now_ms,
                       max_batches=self.retention.max_batches_per_run)
        if any(counts.values()):
            log.info("retention: pruned %s", ", ".join(f"{n} {table}" for table, n in counts.items() if n))
        return counts

    def deliver_notifications(self) -> None:
        from alerts import deliver_due

        deliver_due(self.settings.db_url, channels=self.channels, policy=self.rules.delivery)


@click.command()
@click.option("--interval", type=click.FloatRange(min=0.2), default=None,
              help="Seconds between evaluation runs (default: a fifth of the window, between 1 and 10 s).")
@click.option("--once", is_flag=True,
              help="Evaluate due windows, deliver due notifications and apply retention once, then exit.")
@common_options
def scheduler(interval: float | None, once: bool, settings: Settings) -> None:
    """Evaluate closed windows, deliver alerts, apply the retraining policy and retention."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    configure_logging(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    store_db.require_migrated(settings.db_url)
    jobs = SchedulerJobs(settings)
    if once:
        count = jobs.evaluate_due_windows()
        jobs.deliver_notifications()
        jobs.apply_retention()
        click.echo(f"evaluated {count} window(s)")
        return
    interval = interval or min(10.0, max(1.0, settings.window_seconds / 5))
    blocking = BlockingScheduler(timezone="UTC")
    # max_instances=1 + coalesce: a slow run is never overlapped by the next one.
    blocking.add_job(jobs.evaluate_due_windows, "interval", seconds=interval, id="evaluate",
                     max_instances=1, coalesce=True, next_run_time=_now())
    blocking.add_job(jobs.deliver_notifications, "interval", seconds=2, id="deliver",
                     max_instances=1, coalesce=True, next_run_time=_now())
    blocking.add_job(jobs.apply_retention, "interval", seconds=jobs.retention.interval_seconds, id="retention",
                     max_instances=1, coalesce=True, next_run_time=_now())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: blocking.shutdown(wait=False))
    log.info("scheduler started: evaluating every %.1fs on %s", interval, store_db.redacted_url(settings.db_url))
    blocking.start()
    log.info("scheduler stopped")


def _now():  # noqa: ANN202
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)

