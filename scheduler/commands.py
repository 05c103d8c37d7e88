"""`driftline scheduler`: run the scheduler's jobs (driftline.scheduler.jobs) on an interval, or once.

One APScheduler BlockingScheduler per deployment; the jobs are idempotent per window.
"""
from __future__ import annotations

import logging
import signal
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import click

from driftline.config import Settings, common_options
from driftline.errors import UserError
from driftline.logs import configure_logging
from driftline.store import db as store_db
from driftline.scheduler.jobs import SchedulerJobs
from driftline.scheduler.metrics import SchedulerMetrics, detail_patterns

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

log = logging.getLogger("driftline.scheduler")


@click.command()
@click.option("--interval", type=click.FloatRange(min=0.2), default=None,
              help="Seconds between evaluation runs (default: a fifth of the window, between 1 and 10 s).")
@click.option("--once", is_flag=True,
              help="Evaluate due windows, judge rollouts, deliver due notifications and apply retention once, then exit.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None,
              help="Port of the Prometheus /metrics server on 127.0.0.1: the monitoring results in the store "
                   "(0: none; default: DRIFTLINE_SCHEDULER_METRICS_PORT or 0).")
@common_options
def scheduler(interval: float | None, once: bool, metrics_port: int | None, settings: Settings) -> None:
    """Evaluate closed windows, judge rollouts, deliver alerts, apply the retraining policy and retention."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    configure_logging(logging.INFO)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    store_db.require_migrated(settings.db_url)
    jobs = SchedulerJobs(settings)
    if once:
        count = jobs.evaluate_and_analyse()
        jobs.deliver_notifications()
        jobs.apply_retention()
        click.echo(f"evaluated {count} window(s)")
        return
    interval = interval or min(10.0, max(1.0, settings.window_seconds / 5))
    blocking = BlockingScheduler(timezone="UTC")
    schedule_jobs(blocking, jobs, interval)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: blocking.shutdown(wait=False))
    metrics = _serve_metrics(settings, settings.scheduler_metrics_port if metrics_port is None else metrics_port)
    log.info("scheduler started: evaluating every %.1fs on %s", interval, store_db.redacted_url(settings.db_url))
    try:
        blocking.start()
    finally:
        if metrics is not None:
            metrics.stop()
    log.info("scheduler stopped")


def schedule_jobs(scheduler: BaseScheduler, jobs: SchedulerJobs, interval: float) -> None:
    """The scheduler's jobs on `scheduler`: evaluation (with rollout analysis and Alertmanager re-posts) every
    `interval` seconds, delivery per channel lane every 2 s, retention on its own interval."""
    # max_instances=1 + coalesce: a slow run is never overlapped by the next one.
    scheduler.add_job(jobs.evaluate_and_analyse, "interval", seconds=interval, id="evaluate",
                      max_instances=1, coalesce=True, next_run_time=_now())
    for lane in jobs.delivery_lanes():  # a job per channel: a stalled receiver delays only its own channel
        scheduler.add_job(jobs.deliver_notifications, "interval", seconds=2, args=[lane], id=f"deliver:{lane}",
                          max_instances=1, coalesce=True, next_run_time=_now())
    scheduler.add_job(jobs.apply_retention, "interval", seconds=jobs.retention.interval_seconds, id="retention",
                      max_instances=1, coalesce=True, next_run_time=_now())


def _serve_metrics(settings: Settings, port: int) -> SchedulerMetrics | None:
    """The /metrics server on loopback, or None when the port is 0."""
    if not port:
        return None
    metrics = SchedulerMetrics(settings.db_url, segments=settings.scheduler_metrics_segments,
                               detail_models=detail_patterns(settings.scheduler_metrics_detail_models),
                               idle_ms=settings.idle_partition_seconds * 1000)
    try:
        bound = metrics.serve(port)
    except OSError as exc:
        raise UserError(f"cannot serve the scheduler's metrics on 127.0.0.1:{port}: {exc.strerror or exc}; "
                        "pick another --metrics-port (0: none)") from None
    log.info("metrics at http://127.0.0.1:%d/metrics", bound)
    return metrics


def _now() -> datetime:
    return datetime.now(timezone.utc)

