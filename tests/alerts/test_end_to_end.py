"""Alerting end to end: drift injected -> Slack, PagerDuty (through failures) and the retraining
webhook each receive exactly what they should, once; resolves follow; a no-drift run sends nothing."""
from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from driftline.alerts import AlertRules, Channels, deliver_due, group_key, load_rules
from driftline.alerts.channels.pagerduty import PagerDutyChannel
from driftline.cli import cli
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import Alert, Notification, RetrainRequest, Silence
from driftline.vocabulary import DATASET_DRIFT, LATENCY
from tests.support.fake_services import ROUTING_KEY

CONFIG = """
[alerts]
policy = "for_windows"
for_windows = 2
resolve_after_windows = 2

[alerts.delivery]
backoff_initial = "5s"
backoff_max = "30s"

[alerts.retrain]
windows = 3
cooldown = "6h"
"""


@pytest.fixture
def stack(tmp_path, settings_for, fake_slack, fake_pagerduty, fake_webhook, fake_retrain):
    config = tmp_path / "driftline.toml"
    config.write_text(CONFIG)
    settings = settings_for(slack=fake_slack, pagerduty=fake_pagerduty, webhook=fake_webhook, retrain=fake_retrain)
    rules = load_rules(settings, config_file=config)
    return rules, Channels.from_settings(settings, timeout=2)


def run(url, rules, chans, write_window, run_window, clock, windows):
    """The scheduler's loop: per window, evaluate (here: stored results), alerts, retrain policy, delivery."""
    for i, kwargs in windows:
        write_window(url, i, **kwargs)
        run_window(url, i, rules, retrain=True)
        for offset in (0, 20, 40):  # the delivery job runs every 20 seconds
            deliver_due(url, channels=chans, now=clock.now(i) + timedelta(seconds=offset), policy=rules.delivery)
    deliver_due(url, channels=chans, now=clock.now(windows[-1][0]) + timedelta(hours=1), policy=rules.delivery)


def test_drift_pages_once_through_failures_asks_for_one_retrain_and_resolves(
        db_url, stack, write_window, run_window, clock, fake_slack, fake_pagerduty, fake_webhook, fake_retrain):
    rules, chans = stack
    fake_pagerduty.script(500, (429, {"Retry-After": "20"}, {"status": "throttle event", "message": "Requests for"
                                                                  " this service are arriving too quickly"}))
    drifted = clock.features[:10]
    clean = {"drifted": [], "dataset": False, "latency_ms": 20.0}
    drift = {"drifted": drifted, "dataset": True, "latency_ms": 20.0}
    windows = [(i, clean) for i in range(3)] + [(i, drift) for i in range(3, 8)] + [(i, clean) for i in range(8, 12)]
    run(db_url, rules, chans, write_window, run_window, clock, windows)

    dataset_key = group_key("credit", "1", DATASET_DRIFT)
    # Slack: one trigger listing the ten drifted features, one resolve
    assert [r.status for r in fake_slack.requests] == [200, 200]
    trigger, resolve = (r.json() for r in fake_slack.requests)
    assert trigger["text"].startswith("[FIRING] dataset drift on credit v1: 10 features drifted")
    drifted_section = next(b["text"]["text"] for b in trigger["blocks"] if b["type"] == "section"
                           and b.get("text", {}).get("text", "").startswith("*Drifted features (10):*"))
    assert all(f"`{name}`" in drifted_section for name in drifted)
    assert resolve["text"].startswith("[RESOLVED]")

    # PagerDuty: 500, then 429 (Retry-After honoured), then accepted; one incident, resolved with the same key
    assert [r.status for r in fake_pagerduty.requests] == [500, 429, 202, 202]
    assert [(e["event_action"], e["dedup_key"]) for e in fake_pagerduty.events] == [("trigger", dataset_key),
                                                                                  ("resolve", dataset_key)]
    assert fake_pagerduty.incidents_opened == 1 and fake_pagerduty.open_incidents == {}
    event = fake_pagerduty.events[0]
    assert event["payload"]["severity"] == "error"
    assert event["payload"]["custom_details"]["drifted_features"] == drifted

    # the signed webhook: trigger and resolve, each once
    assert [b["kind"] for b in fake_webhook.delivered.values()] == ["trigger", "resolve"]
    assert fake_webhook.duplicates == 0 and all(r.status == 200 for r in fake_webhook.requests)

    # the retraining webhook: one request, after three consecutive drifted windows, then the cooldown
    assert len(fake_retrain.requests) == 1
    body = fake_retrain.requests[0].json()
    assert body["trigger"] == "drift" and body["features"] == drifted
    assert [w["start_ms"] for w in body["windows"]] == [clock.start(3), clock.start(4), clock.start(5)]

    with session_scope(db_url) as s:
        assert {n.status for n in s.scalars(select(Notification))} == {"sent"}
        pd_trigger = s.scalar(select(Notification).where(Notification.channel == "pagerduty",
                                                         Notification.kind == "trigger"))
        assert pd_trigger.attempts == 3
        retrain = s.scalars(select(RetrainRequest)).one()
        assert retrain.status == "running" and retrain.response["request_id"] == "1"
        assert {a.state for a in s.scalars(select(Alert))} == {"resolved"}


def test_a_run_without_drift_sends_nothing(db_url, stack, write_window, run_window, clock, fake_slack,
                                           fake_pagerduty, fake_webhook, fake_retrain):
    rules, chans = stack
    noise = [{"drifted": [clock.features[i % 14]] if i % 3 == 0 else [], "dataset": False, "latency_ms": 20.0}
             for i in range(12)]  # a lone noisy feature now and then never lasts K windows
    run(db_url, rules, chans, write_window, run_window, clock, list(enumerate(noise)))
    assert [f.requests for f in (fake_slack, fake_pagerduty, fake_webhook, fake_retrain)] == [[], [], [], []]
    with session_scope(db_url) as s:
        assert s.scalars(select(Notification)).all() == []
        assert s.scalars(select(RetrainRequest)).all() == []
        assert all(a.fired_at is None for a in s.scalars(select(Alert)))


def test_silence_list_and_expire_from_the_command_line(sqlite_url):
    runner = CliRunner()
    made = runner.invoke(cli, ["alerts", "silence", "--model", "credit", "--detector", LATENCY, "--for", "2h",
                               "--comment", "load test", "--created-by", "ana", "--db", sqlite_url])
    assert made.exit_code == 0, made.output
    assert made.output.startswith("silence #1 until ")
    listed = runner.invoke(cli, ["alerts", "list", "--db", sqlite_url])
    assert "#1 model=credit detector=latency until" in listed.output and "load test (ana)" in listed.output
    assert "No pending or firing alerts." in listed.output and "outbox: empty" in listed.output
    expired = runner.invoke(cli, ["alerts", "expire", "1", "--db", sqlite_url])
    assert expired.exit_code == 0 and "silence #1 expired" in expired.output
    assert "silences:" not in runner.invoke(cli, ["alerts", "list", "--db", sqlite_url]).output
    with session_scope(sqlite_url) as s:
        assert s.get(Silence, 1).comment == "load test"

    bad = runner.invoke(cli, ["alerts", "silence", "--model", "credit", "--for", "soon", "--comment", "x",
                              "--db", sqlite_url])
    assert isinstance(bad.exception, UserError) and "cannot read 'soon' as a duration" in str(bad.exception)
    missing = runner.invoke(cli, ["alerts", "expire", "42", "--db", sqlite_url])
    assert isinstance(missing.exception, UserError) and "no silence with id 42" in str(missing.exception)
    no_ids = runner.invoke(cli, ["alerts", "retry", "--db", sqlite_url])
    assert isinstance(no_ids.exception, UserError)


def test_a_page_lost_to_an_outage_is_triggered_again_at_the_repeat_interval(db_url, write_window, run_window,
                                                                          clock, fake_pagerduty):
    rules = AlertRules.from_mapping({"for_windows": 1, "repeat_interval": "3m",
                                     "delivery": {"timeout": "1s", "lease": "5s", "backoff_initial": "5s",
                                                  "backoff_max": "10s", "max_age": "30s"}},
                                    channels=["pagerduty"], dashboard_url="http://dash.example:8501")
    chans = Channels(pagerduty=PagerDutyChannel(fake_pagerduty.url, ROUTING_KEY, timeout=1))
    fake_pagerduty.script(*[503] * 10)  # PagerDuty is down for the whole first window's retry budget
    for i in range(5):  # a latency SLO breach (critical) in every window
        write_window(db_url, i, features=[], latency_ms=250.0)
        run_window(db_url, i, rules)
        for offset in (0, 20, 40):
            deliver_due(db_url, channels=chans, now=clock.now(i) + timedelta(seconds=offset), policy=rules.delivery)
        if i == 0:
            fake_pagerduty.script_queue.clear()  # PagerDuty is back
    key = group_key("credit", "1", LATENCY)
    with session_scope(db_url) as s:
        rows = [(n.kind, n.status) for n in s.scalars(select(Notification).order_by(Notification.id))]
    assert rows == [("trigger", "failed"), ("repeat", "sent")]  # the repeat came 3 windows (3 minutes) later
    assert [(e["event_action"], e["dedup_key"]) for e in fake_pagerduty.events] == [("trigger", key)]
    assert fake_pagerduty.incidents_opened == 1 and key in fake_pagerduty.open_incidents
