"""The outbox's delivery: retries, Retry-After, timeouts, retry budget, leases, crashes, concurrency, order."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from driftline.alerts import Channels, DeliveryPolicy, deliver_due, requeue_failed
from driftline.alerts import outbox
from driftline.alerts.channels.pagerduty import PagerDutyChannel
from driftline.alerts.channels.slack import SlackChannel
from driftline.alerts.channels.webhook import WebhookChannel
from driftline.alerts.delivery import delivery_lanes, retry_delay
from driftline import defaults
from driftline.cli import cli
from driftline.store.db import session_scope
from driftline.store.models import Notification
from tests.support.fake_services import ROUTING_KEY, Trickler
from tests.support.fake_services import WEBHOOK_SECRET as SECRET
from tests.support.waiting import wait_until

T = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
POLICY = DeliveryPolicy(timeout=timedelta(seconds=1), lease=timedelta(seconds=5),
                        backoff_initial=timedelta(seconds=1), backoff_max=timedelta(seconds=10),
                        max_age=timedelta(minutes=2), max_attempts=25)
POLICY_30S = DeliveryPolicy(timeout=timedelta(seconds=30), lease=timedelta(seconds=60))


def channels(slack=None, pagerduty=None, webhook=None, timeout=1.0) -> Channels:
    return Channels(slack=SlackChannel(slack.url, timeout=timeout) if slack else None,
                    pagerduty=PagerDutyChannel(pagerduty.url, ROUTING_KEY, timeout=timeout) if pagerduty else None,
                    webhook=WebhookChannel(webhook.url, SECRET, timeout=timeout) if webhook else None)


def pd_trigger(key="group-1"):
    return {"event_action": "trigger", "dedup_key": key,
            "payload": {"summary": "[FIRING] credit v1: latency SLO breach", "source": "driftline:credit:1",
                        "severity": "critical", "timestamp": "2026-01-05T12:00:00Z", "custom_details": {}}}


def queue(url, channel, payload, key, *, group="group-1", kind="trigger", now=T) -> int:
    with session_scope(url) as s:
        row = outbox.enqueue(s, idempotency_key=key, channel=channel, kind=kind, payload=payload,
                             alert_fingerprint=group, now=now)
        s.flush()
        return row.id


def row(url, row_id) -> Notification:
    with session_scope(url) as s:
        return s.get(Notification, row_id)


def deliver(url, chans, at, **kw):
    return deliver_due(url, channels=chans, now=at, policy=kw.pop("policy", POLICY), rng=random.Random(7), **kw)


def test_500_then_202_is_sent_once_after_a_backoff(sqlite_url, fake_pagerduty):
    fake_pagerduty.script(500)
    chans = channels(pagerduty=fake_pagerduty)
    rid = queue(sqlite_url, "pagerduty", pd_trigger(), "k-500")
    report = deliver(sqlite_url, chans, T)
    assert report.retrying == [rid] and "HTTP 500" in report.errors[rid]
    first = row(sqlite_url, rid)
    assert (first.status, first.attempts, first.response_status) == ("pending", 1, 500)
    wait = first.next_attempt_at.replace(tzinfo=timezone.utc) - T
    assert timedelta(seconds=0.5) <= wait <= timedelta(seconds=1)
    assert deliver(sqlite_url, chans, T + wait - timedelta(milliseconds=1)).attempted == 0
    assert deliver(sqlite_url, chans, T + wait).sent == [rid]
    assert deliver(sqlite_url, chans, T + timedelta(hours=3)).attempted == 0
    done = row(sqlite_url, rid)
    assert (done.status, done.attempts, done.response_status) == ("sent", 2, 202)
    assert [r.status for r in fake_pagerduty.requests] == [500, 202]
    assert fake_pagerduty.incidents_opened == 1 and len(fake_pagerduty.events) == 1


def test_429_waits_exactly_for_retry_after(sqlite_url, fake_slack):
    fake_slack.script((429, {"Retry-After": "30"}, "rate_limited"))
    chans = channels(slack=fake_slack)
    rid = queue(sqlite_url, "slack", {"text": "hello", "blocks": []}, "k-429")
    assert deliver(sqlite_url, chans, T).retrying == [rid]
    assert row(sqlite_url, rid).next_attempt_at.replace(tzinfo=timezone.utc) == T + timedelta(seconds=30)
    assert deliver(sqlite_url, chans, T + timedelta(seconds=29)).attempted == 0
    assert deliver(sqlite_url, chans, T + timedelta(seconds=30)).sent == [rid]
    assert [r.status for r in fake_slack.requests] == [429, 200]


def test_a_timeout_is_retried(sqlite_url, fake_webhook):
    fake_webhook.script(("slow", 1.0))
    chans = channels(webhook=fake_webhook, timeout=0.3)
    rid = queue(sqlite_url, "webhook", {"hello": "world"}, "k-timeout")
    report = deliver(sqlite_url, chans, T)
    assert report.retrying == [rid] and "timed out" in report.errors[rid]
    # the retry meets a prompt server; a timeout no busy machine reaches, so only the retry is under test
    assert deliver(sqlite_url, channels(webhook=fake_webhook, timeout=30), T + timedelta(seconds=2)).sent == [rid]
    assert list(fake_webhook.delivered) == ["k-timeout"]


def test_down_longer_than_the_retry_budget_fails_visibly_and_is_sent_when_retried(db_url, fake_pagerduty):
    fake_pagerduty.script(*[503] * 100)
    chans = channels(pagerduty=fake_pagerduty)
    rid = queue(db_url, "pagerduty", pd_trigger(), "k-down")
    at = T
    for _ in range(60):
        deliver(db_url, chans, at)
        if row(db_url, rid).status == "failed":
            break
        at += timedelta(seconds=5)
    failed = row(db_url, rid)
    assert failed.status == "failed" and failed.last_error.startswith("gave up after")
    assert at - T <= POLICY.max_age and failed.attempts == len(fake_pagerduty.requests) >= 5
    assert deliver(db_url, chans, at + timedelta(hours=1)).attempted == 0  # failed rows wait for a person

    listed = CliRunner().invoke(cli, ["alerts", "list", "--json", "--db", db_url])
    assert listed.exit_code == 0, listed.output
    assert '"failed": 1' in listed.output and f'"id": {rid}' in listed.output

    fake_pagerduty.script_queue.clear()
    retried = CliRunner().invoke(cli, ["alerts", "retry", str(rid), "--db", db_url])
    assert retried.exit_code == 0 and f"requeued 1 notification(s): {rid}" in retried.output
    assert deliver_due(db_url, channels=chans, policy=POLICY).sent == [rid]  # wall clock: due now
    assert row(db_url, rid).status == "sent" and fake_pagerduty.incidents_opened == 1


def test_a_job_killed_after_claiming_leaves_rows_that_come_back_after_the_lease(db_url, fake_webhook):
    chans = channels(webhook=fake_webhook)
    ids = [queue(db_url, "webhook", {"n": i}, f"k-lease-{i}", group=f"g{i}") for i in range(3)]
    claim = outbox.claim_next(lambda: session_scope(db_url), now=T, lease=POLICY.lease)  # ... and then it dies
    assert claim.id == ids[0] and row(db_url, ids[0]).status == "sending"
    assert deliver(db_url, chans, T + timedelta(seconds=1)).sent == ids[1:]
    assert deliver(db_url, chans, T + timedelta(seconds=4)).attempted == 0  # lease still held
    assert deliver(db_url, chans, T + timedelta(seconds=5)).sent == [ids[0]]
    assert row(db_url, ids[0]).attempts == 2
    assert deliver(db_url, chans, T + timedelta(hours=1)).attempted == 0
    assert sorted(fake_webhook.delivered) == [f"k-lease-{i}" for i in range(3)] and fake_webhook.duplicates == 0
    # the dead job's late answer cannot overwrite the outcome
    assert outbox.record_failure(lambda: session_scope(db_url), claim, now=T, status_code=None, error="late",
                                 retry_at=None) is False
    assert row(db_url, ids[0]).status == "sent"


def test_a_crash_between_success_and_marking_sent_repeats_once_and_receivers_deduplicate(
        db_url, fake_pagerduty, fake_webhook, monkeypatch):
    chans = channels(pagerduty=fake_pagerduty, webhook=fake_webhook)
    pd_id = queue(db_url, "pagerduty", pd_trigger("incident-1"), "k-pd", group="a")
    wh_id = queue(db_url, "webhook", {"n": 1}, "k-wh", group="b")
    real = outbox.record_success

    def crash(*args, **kwargs):
        raise SystemExit("killed right after the HTTP answer")

    monkeypatch.setattr(outbox, "record_success", crash)
    with pytest.raises(SystemExit):
        deliver(db_url, chans, T)
    monkeypatch.setattr(outbox, "record_success", real)
    assert len(fake_pagerduty.requests) == 1 and row(db_url, pd_id).status == "sending"
    report = deliver(db_url, chans, T + timedelta(seconds=5))
    assert sorted(report.sent) == sorted([pd_id, wh_id])
    assert deliver(db_url, chans, T + timedelta(hours=1)).attempted == 0
    assert len(fake_pagerduty.requests) == 2 and fake_pagerduty.incidents_opened == 1
    assert [r.json()["dedup_key"] for r in fake_pagerduty.requests] == ["incident-1", "incident-1"]
    # the webhook's lane ran beside PagerDuty's and crashed the same way: its receiver deduplicated the repeat
    assert list(fake_webhook.delivered) == ["k-wh"] and len(fake_webhook.requests) == 2
    assert fake_webhook.duplicates == 1


def test_a_delivery_process_killed_mid_request_loses_nothing_and_sends_once(sqlite_url, fake_webhook, tmp_path):
    fake_webhook.script(("slow", 4.0))
    rid = queue(sqlite_url, "webhook", {"n": 1}, "k-killed", now=datetime.now(timezone.utc))
    script = tmp_path / "deliver.py"
    script.write_text(textwrap.dedent(f"""
        from datetime import timedelta
        from driftline.alerts import Channels, DeliveryPolicy, deliver_due
        from driftline.alerts.channels.webhook import WebhookChannel
        deliver_due({sqlite_url!r}, channels=Channels(webhook=WebhookChannel({fake_webhook.url!r}, {SECRET!r},
                    timeout=10)), policy=DeliveryPolicy(timeout=timedelta(seconds=10), lease=timedelta(seconds=30)))
    """))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    job = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        def sent() -> bool:
            assert job.poll() is None or fake_webhook.requests, "the delivery process exited without sending"
            return bool(fake_webhook.requests)

        wait_until(sent, message="the delivery process to send its request")
        assert fake_webhook.requests, "the delivery process never sent its request"
    finally:
        job.kill()
        job.wait(timeout=10)
    assert row(sqlite_url, rid).status == "sending" and fake_webhook.delivered == {}
    chans = channels(webhook=fake_webhook)
    now = datetime.now(timezone.utc)
    assert deliver(sqlite_url, chans, now).attempted == 0  # the dead job's lease still holds
    assert deliver(sqlite_url, chans, now + timedelta(seconds=31)).sent == [rid]
    assert list(fake_webhook.delivered) == ["k-killed"] and fake_webhook.duplicates == 0


def test_two_delivery_jobs_at_once_send_every_notification_exactly_once(db_url, fake_webhook):
    ids = [queue(db_url, "webhook", {"n": i}, f"k-par-{i}", group=f"g{i % 7}") for i in range(24)]
    fake_webhook.hold_until_concurrent = 2  # the first request is answered once another job's is in flight too
    chans = channels(webhook=fake_webhook, timeout=60)
    reports = []

    def job():
        reports.append(deliver_due(db_url, channels=chans, policy=POLICY, limit=100))

    threads = [threading.Thread(target=job) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    sent = sorted(i for r in reports for i in r.sent)
    assert sent == sorted(ids)
    assert fake_webhook.overlapped.is_set()  # the jobs really did overlap: each job sends one request at a time
    assert sum(1 for r in reports if r.sent) >= 2
    assert len(fake_webhook.requests) == 24 and fake_webhook.duplicates == 0
    with session_scope(db_url) as s:
        assert {n.status for n in s.scalars(select(Notification))} == {"sent"}


def test_a_resolve_never_overtakes_its_trigger(db_url, fake_pagerduty):
    fake_pagerduty.script(500)
    chans = channels(pagerduty=fake_pagerduty)
    trigger = queue(db_url, "pagerduty", pd_trigger("inc"), "k-trig", group="inc")
    resolve = queue(db_url, "pagerduty", {"event_action": "resolve", "dedup_key": "inc"}, "k-res", group="inc",
                    kind="resolve")
    assert deliver(db_url, chans, T).retrying == [trigger]
    assert deliver(db_url, chans, T + timedelta(milliseconds=100)).attempted == 0  # resolve waits for the trigger
    report = deliver(db_url, chans, T + timedelta(seconds=2))
    assert report.sent == [trigger, resolve]
    assert [r.json()["event_action"] for r in fake_pagerduty.requests] == ["trigger", "trigger", "resolve"]
    assert fake_pagerduty.open_incidents == {}


def test_a_row_for_a_channel_without_endpoint_fails_visibly(sqlite_url):
    rid = queue(sqlite_url, "slack", {"text": "x"}, "k-noslack")
    report = deliver(sqlite_url, Channels(), T)
    assert report.failed == [rid]
    assert "no endpoint configured for channel 'slack'" in row(sqlite_url, rid).last_error


def test_retrying_a_trigger_that_a_sent_resolve_superseded_is_skipped(sqlite_url, fake_pagerduty):
    fake_pagerduty.script(400)
    chans = channels(pagerduty=fake_pagerduty)
    trigger = queue(sqlite_url, "pagerduty", pd_trigger("inc"), "k-t", group="inc")
    resolve = queue(sqlite_url, "pagerduty", {"event_action": "resolve", "dedup_key": "inc"}, "k-r", group="inc",
                    kind="resolve")
    report = deliver(sqlite_url, chans, T)
    assert report.failed == [trigger] and report.sent == [resolve]
    with session_scope(sqlite_url) as s:
        assert requeue_failed(s, now=T) == ([], [trigger])


def test_backoff_is_exponential_with_jitter_and_capped():
    rng = random.Random(1)
    for attempts in range(1, 12):
        ceiling = min(10.0, 1.0 * 2 ** (attempts - 1))
        delays = [retry_delay(attempts, POLICY, rng).total_seconds() for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 10  # jittered, not a constant


def test_the_claim_query_skips_locked_rows_on_postgresql():
    from sqlalchemy.dialects import postgresql

    sql = str(outbox._due(T, []).compile(dialect=postgresql.dialect()))
    assert "FOR UPDATE OF notifications SKIP LOCKED" in sql


@pytest.mark.parametrize("retry_after", ["inf", "1e12", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_an_absurd_retry_after_neither_raises_nor_stops_the_run(sqlite_url, fake_slack, fake_webhook, retry_after):
    fake_slack.script((429, {"Retry-After": retry_after}, "rate_limited"))
    chans = channels(slack=fake_slack, webhook=fake_webhook)
    throttled = queue(sqlite_url, "slack", {"text": "hello", "blocks": []}, "k-inf", group="g-slack")
    other = queue(sqlite_url, "webhook", {"hello": "world"}, "k-other", group="g-webhook")
    budget = DeliveryPolicy(timeout=timedelta(seconds=1), lease=timedelta(seconds=5))  # the default two hours
    report = deliver(sqlite_url, chans, T, policy=budget)
    assert report.retrying == [throttled] and report.sent == [other]
    waiting = row(sqlite_url, throttled)
    assert waiting.status == "pending"
    assert waiting.next_attempt_at.replace(tzinfo=timezone.utc) == T + timedelta(
        seconds=defaults.ALERT_RETRY_AFTER_MAX_SECONDS)


def test_a_row_whose_handling_raises_is_retried_and_never_stops_the_others(db_url, fake_webhook, monkeypatch):
    chans = channels(webhook=fake_webhook)
    first = queue(db_url, "webhook", {"n": 1}, "k-first", group="g-1")
    second = queue(db_url, "webhook", {"n": 2}, "k-second", group="g-2")
    real = outbox.record_success
    calls = []

    def flaky(factory, claim, **kw):
        calls.append(claim.id)
        if claim.id == first:
            raise RuntimeError(f"store hiccup while recording {fake_webhook.url}?token=leaky")
        return real(factory, claim, **kw)

    monkeypatch.setattr(outbox, "record_success", flaky)
    report = deliver(db_url, chans, T)
    assert calls == [first, second] and report.sent == [second] and report.retrying == [first]
    broken = row(db_url, first)
    assert broken.status == "pending" and broken.attempts == 1  # not left 'sending' until its lease expires
    assert "RuntimeError" in broken.last_error and "leaky" not in broken.last_error
    assert fake_webhook.url not in broken.last_error
    monkeypatch.setattr(outbox, "record_success", real)
    assert deliver(db_url, chans, T + timedelta(minutes=1)).sent == [first]  # receivers dedupe the second POST
    assert row(db_url, first).status == "sent"


def test_a_stalled_webhook_never_delays_pagerduty(db_url, fake_pagerduty):
    trickler = Trickler(status_line=True, total=240).start()  # two minutes of one byte per half second
    chans = Channels(pagerduty=PagerDutyChannel(fake_pagerduty.url, ROUTING_KEY, timeout=5),
                     webhook=WebhookChannel(trickler.url, SECRET, timeout=30))
    now = datetime.now(timezone.utc)  # the job runs on the wall clock
    stalled = queue(db_url, "webhook", {"n": 1}, "k-stalled", group="g-webhook", now=now)  # older: first in line
    page = queue(db_url, "pagerduty", pd_trigger(), "k-page", group="g-page", now=now)
    reports = []
    job = threading.Thread(target=lambda: reports.append(deliver_due(db_url, channels=chans, policy=POLICY_30S)))
    job.start()
    try:
        wait_until(lambda: fake_pagerduty.events and trickler.started.is_set(),
                   message="PagerDuty to receive its page and the webhook's receiver its request")
        # the page went out while the webhook's receiver was still trickling its answer (finished stays set once set)
        assert not trickler.finished.is_set()
    finally:
        trickler.release()
        job.join(timeout=120)
        trickler.stop()
    assert not job.is_alive()
    assert reports[0].sent == [page] and reports[0].retrying == [stalled]  # released mid-answer: tried again
    assert row(db_url, page).status == "sent" and row(db_url, stalled).status == "pending"


def test_one_lane_delivers_only_its_channel(sqlite_url, fake_pagerduty, fake_webhook):
    chans = channels(pagerduty=fake_pagerduty, webhook=fake_webhook)
    page = queue(sqlite_url, "pagerduty", pd_trigger(), "k-lane-pd", group="a")
    hook = queue(sqlite_url, "webhook", {"n": 1}, "k-lane-wh", group="b")
    assert delivery_lanes(chans) == ["pagerduty", "webhook", "(unconfigured)"]
    assert deliver(sqlite_url, chans, T, lane="pagerduty").sent == [page]
    assert row(sqlite_url, hook).status == "pending" and fake_webhook.requests == []
    assert deliver(sqlite_url, chans, T, lane="webhook").sent == [hook]
