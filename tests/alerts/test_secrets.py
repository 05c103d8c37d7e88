"""No URL, token, key or password in a log line, a stored error, CLI output; bad channel URLs refused at start."""
from __future__ import annotations

import logging
import socket
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from driftline.alerts import Channels, DeliveryPolicy, deliver_due
from driftline.alerts import outbox
from driftline.cli import cli
from driftline.config import Settings
from driftline.errors import UserError
from driftline.logs import HTTP_CLIENT_LOGGERS, quiet_http_clients
from driftline.redact import scrub
from driftline.store.db import redacted_url, session_scope
from driftline.store.models import Notification
from driftline.scheduler.jobs import SchedulerJobs

T = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
SLACK_TOKEN = "T0AAA/B0BBB/xOxOxOsecretpath42"


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queue(url, channel, key, payload=None):
    with session_scope(url) as s:
        outbox.enqueue(s, idempotency_key=key, channel=channel, kind="trigger", payload=payload or {"text": "x"},
                       alert_fingerprint=key, now=T)


def test_scrub_masks_configured_secrets_their_quoted_forms_and_url_credentials():
    text = ("ValueError: unknown url type: 'hooks.slack.com/services/T0AAA/B0BBB/xOxOxOsecretpath42' "
            "and https://user:pa55word@api.example/x?token=abc%2Fdef#frag and R0UTINGKEY%2Bplus")
    clean = scrub(text, [f"hooks.slack.com/services/{SLACK_TOKEN}", "R0UTINGKEY+plus"])
    for leak in ("secretpath42", "pa55word", "user:", "abc", "frag", "R0UTINGKEY"):
        assert leak not in clean
    assert "https://api.example/x?***" in clean and clean.startswith("ValueError: unknown url type: '***'")


@pytest.mark.parametrize("setting, value", [
    ("slack_webhook_url", f"hooks.slack.com/services/{SLACK_TOKEN}"),
    ("webhook_url", "ftp://hooks.example/secretpath42"),
    ("retrain_webhook_url", "http:///secretpath42"),
    ("pagerduty_url", "events.pagerduty.com/v2/enqueue?secretpath42"),
])
def test_a_channel_url_that_is_not_http_is_refused_at_start_naming_the_setting_not_the_value(sqlite_url, setting,
                                                                                            value):
    extra = {"pagerduty_routing_key": "R0UT1NGKEY0123456789abcdefABCDEF"} if setting == "pagerduty_url" else {}
    settings = Settings(db=sqlite_url, **{setting: value}, **extra)
    with pytest.raises(UserError) as raised:
        SchedulerJobs(settings)
    assert str(raised.value).startswith(f"{setting} is not an http(s) URL")
    assert "secretpath42" not in str(raised.value)


def test_unsigned_webhooks_are_a_warning_at_start(sqlite_url, caplog):
    caplog.set_level(logging.WARNING)
    SchedulerJobs(Settings(db=sqlite_url, webhook_url="https://hooks.example/in?token=secretpath42",
                           webhook_secret="s3cret"))
    assert "unsigned" not in caplog.text
    SchedulerJobs(Settings(db=sqlite_url, webhook_url="https://hooks.example/in?token=secretpath42"))
    assert "webhook_secret is not" in caplog.text and "unsigned" in caplog.text
    assert "secretpath42" not in caplog.text


@pytest.fixture
def quiet_clients():
    """HTTP client loggers as driftline's commands set them, reset afterwards."""
    quiet_http_clients()
    yield
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_a_failing_channel_leaves_no_secret_in_the_stored_error_the_log_or_alerts_list(sqlite_url, caplog,
                                                                                      quiet_clients):
    port = refused_port()
    settings = Settings(db=sqlite_url, slack_webhook_url=f"hooks.slack.com/services/{SLACK_TOKEN}",
                        webhook_url=f"http://user:pa55word@127.0.0.1:{port}/in?token=secretpath42",
                        webhook_secret="s3cret", pagerduty_routing_key="R0UT1NGKEY0123456789abcdefABCDEF",
                        pagerduty_url=f"http://127.0.0.1:{port}/enqueue?api_key=secretpath42")
    chans = Channels.from_settings(settings, timeout=1)
    for channel in ("slack", "webhook", "pagerduty"):
        queue(sqlite_url, channel, f"k-{channel}")
    caplog.set_level(logging.DEBUG)
    report = deliver_due(sqlite_url, channels=chans, now=T, policy=DeliveryPolicy(max_attempts=1))
    assert len(report.failed) == 3
    with session_scope(sqlite_url) as s:
        errors = [n.last_error for n in s.scalars(select(Notification))]
    listed = CliRunner().invoke(cli, ["alerts", "list", "--db", sqlite_url])
    listed_json = CliRunner().invoke(cli, ["alerts", "list", "--json", "--db", sqlite_url])
    assert listed.exit_code == 0 and "failed #1 slack" in listed.output
    for text in [*errors, caplog.text, listed.output, listed_json.output]:
        for leak in ("secretpath42", SLACK_TOKEN, "pa55word", "R0UT1NGKEY"):
            assert leak not in text, text


def test_the_scheduler_logs_no_webhook_url(sqlite_url, fake_webhook, caplog, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_WEBHOOK_URL", f"{fake_webhook.url}?token=secretpath42")
    monkeypatch.setenv("DRIFTLINE_WEBHOOK_SECRET", "s3cret-for-tests")
    queue(sqlite_url, "webhook", "k-log", {"hello": "world"})
    caplog.set_level(logging.DEBUG)
    try:
        result = CliRunner().invoke(cli, ["scheduler", "--once", "--db", sqlite_url])
        assert result.exit_code == 0, result.output
        assert all(logging.getLogger(name).level == logging.WARNING for name in HTTP_CLIENT_LOGGERS)
    finally:
        for name in HTTP_CLIENT_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
    assert list(fake_webhook.delivered) == ["k-log"]
    assert "secretpath42" not in caplog.text + result.output


@pytest.mark.parametrize("url, shown", [
    ("postgresql+psycopg://me:hunter2@db:5432/x?sslpassword=hunter3&sslmode=require",
     "postgresql+psycopg://me:***@db:5432/x?sslmode=require&sslpassword=***"),
    ("postgresql://db/x?password=hunter2", "postgresql://db/x?password=***"),
    ("postgresql://db/x?PWD=hunter2&token=hunter3", "postgresql://db/x?PWD=***&token=***"),
    ("postgresql+psycopg://me:hunter2@db:port/x", "postgresql+psycopg://<unparseable URL>"),
    ("me:hunter2 at db", "<unparseable URL>"),
    ("sqlite:////tmp/driftline.db", "sqlite:////tmp/driftline.db"),
])
def test_store_urls_are_shown_without_credentials_and_never_raw_when_unparseable(url, shown):
    assert redacted_url(url) == shown
