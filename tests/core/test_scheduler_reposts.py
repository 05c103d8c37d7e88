"""The scheduler's wiring of Alertmanager re-posts: `driftline scheduler`'s own jobs (scheduler.commands.schedule_jobs),
run by a real APScheduler on the wall clock, post a firing alert to Alertmanager's API and post it again while it
fires, each time with a later endsAt, so Alertmanager never lets it expire."""
from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
from apscheduler.schedulers.background import BackgroundScheduler

from driftline.config import load_settings
from driftline.scheduler.commands import schedule_jobs
from driftline.scheduler.jobs import SchedulerJobs
from tests.support.drift_store import T0, WINDOW_MS, register, write_window
from tests.support.fake_services import FakeService
from tests.support.waiting import wait_until

ALERTS_PATH = "/hook/api/v2/alerts"


def _posts(service: FakeService) -> list:
    return [r for r in service.answered_ok if r.path == ALERTS_PATH]


def _drift_alert_posts(service: FakeService) -> list[dict]:
    """Every post of income's drift alert, in order (each post carries one alert group)."""
    return [alert for post in _posts(service) for alert in post.json()
            if alert["labels"]["alertname"] == "driftline_data_drift" and alert["labels"].get("feature") == "income"]


def _ends_at(alert: dict) -> datetime:
    return datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))


def test_the_scheduled_jobs_repost_a_firing_alert_to_alertmanager(sqlite_url, tmp_path):
    rng = np.random.default_rng(3)
    baseline = register(sqlite_url, "credit", "1", rng)
    write_window(sqlite_url, "credit", "1", baseline, T0, rng, shifts={"income": 25.0})  # closed long ago
    config = tmp_path / "driftline.toml"
    config.write_text("[alerts]\nfor_windows = 1\n")
    alertmanager = FakeService().start()
    scheduler = BackgroundScheduler(timezone="UTC")
    try:
        settings = load_settings(config_file=config, db=sqlite_url, window_seconds=WINDOW_MS // 1000,
                                 allowed_lateness_seconds=2, alertmanager_url=alertmanager.url)
        jobs = SchedulerJobs(settings)
        jobs.repost_interval = timedelta(seconds=1)  # the default is minutes; the wiring is what is tested
        schedule_jobs(scheduler, jobs, interval=0.5)
        assert {job.id for job in scheduler.get_jobs()} >= {"evaluate", "deliver:alertmanager", "retention"}
        scheduler.start()
        posted = wait_until(lambda: _drift_alert_posts(alertmanager) if len(_drift_alert_posts(alertmanager)) >= 2
                            else None, timeout=120, message="income's drift alert posted, then re-posted")
    finally:
        scheduler.shutdown(wait=True)
        alertmanager.stop()
    first, again = posted[:2]
    assert _ends_at(again) > _ends_at(first)  # re-posted while firing: the expiry moves on ...
    assert again["startsAt"] == first["startsAt"] and again["labels"] == first["labels"]  # ... the same alert
