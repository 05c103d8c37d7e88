"""Channel payloads against the services' contracts, sent to local fakes that answer like them."""
from __future__ import annotations

import socket
from datetime import datetime, timezone
from email.utils import format_datetime
from types import SimpleNamespace

import pytest

from driftline.alerts.channels.http import parse_retry_after
from driftline.alerts.channels.pagerduty import PAGERDUTY_MAX_SUMMARY_CHARS, PagerDutyChannel, render_pagerduty
from driftline.alerts.channels.slack import (SLACK_MAX_BLOCKS, SLACK_MAX_HEADER_CHARS, SLACK_MAX_SECTION_CHARS,
                                             SlackChannel, render_slack)
from driftline.alerts.channels.webhook import WebhookChannel, render_webhook, verify
from driftline.alerts.fingerprint import fingerprint, group_key
from driftline.alerts.messages import alert_summary, group_message
from driftline import defaults, vocabulary
from driftline.vocabulary import DATA_DRIFT, LATENCY
from driftline.windows import WindowKey
from tests.support.fake_services import ROUTING_KEY, Trickler
from tests.support.waiting import wait_until

NOW = datetime(2026, 1, 5, 12, 30, tzinfo=timezone.utc)


def make_alert(feature: str, detector: str = DATA_DRIFT, value: float = 0.31, threshold: float = 0.2,
               severity: str = "warning", metric: str = "psi"):
    return SimpleNamespace(
        fingerprint=fingerprint("credit", "3", detector, feature), detector=detector, feature=feature, value=value,
        threshold=threshold, severity=severity, state="firing",
        summary=alert_summary(detector, feature, metric, value, threshold), details={"metric": metric},
        started_at=NOW, fired_at=NOW, resolved_at=None, last_window_start_ms=1_767_614_400_000)


def message(kind: str, alerts, group: str = DATA_DRIFT, related=()):
    return group_message(kind, window=WindowKey("credit", "3", 1_767_614_400_000, 1_767_614_460_000), group=group,
                         group_key=group_key("credit", "3", group), alerts=alerts,
                         related_features=list(related), dashboard_url="http://dash.example:8501", now=NOW)


# --- PagerDuty Events API v2 ----------------------------------------------------------

@pytest.mark.parametrize("severity", ["critical", "error", "warning", "info"])
def test_pagerduty_trigger_matches_the_events_v2_contract_field_by_field(severity):
    alerts = [make_alert("", LATENCY, 250.0, 100.0, severity, "p99_ms")]
    event = render_pagerduty(message("trigger", alerts, group=LATENCY))
    assert set(event) == {"event_action", "dedup_key", "payload", "links", "client", "client_url"}
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == fingerprint("credit", "3", LATENCY, "") and len(event["dedup_key"]) <= 255
    payload = event["payload"]
    assert set(payload) == {"summary", "source", "severity", "timestamp", "component", "group", "class",
                            "custom_details"}
    assert payload["summary"] == "[FIRING] credit v3: latency SLO breach: p99_ms 250 vs threshold 100"
    assert payload["source"] == "driftline:credit:3"
    assert payload["severity"] == severity
    assert datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00")) == NOW
    assert (payload["component"], payload["group"], payload["class"]) == ("credit", "3", LATENCY)
    details = payload["custom_details"]
    assert details["model"] == "credit" and details["version"] == "3"
    assert details["window_start"] == "2026-01-05T12:00:00Z" and details["window_end"] == "2026-01-05T12:01:00Z"
    assert details["alerts"] == [{"detector": LATENCY, "feature": "", "metric": "p99_ms", "value": 250.0,
                                  "threshold": 100.0, "severity": severity,
                                  "summary": "latency SLO breach: p99_ms 250 vs threshold 100",
                                  "fingerprint": fingerprint("credit", "3", LATENCY, ""),
                                  # this alert has no event-time windows (test_event_windows.py gives some)
                                  "first_window_start_ms": None, "first_window_start": None,
                                  "fired_window_start_ms": None, "fired_window_start": None}]
    assert event["links"] == [{"href": "http://dash.example:8501/?model=credit&version=3",
                               "text": "driftline dashboard"}]
    assert event["client"] == "driftline" and event["client_url"] == event["links"][0]["href"]


def test_pagerduty_resolve_uses_the_same_dedup_key_and_a_repeat_triggers_again_with_it():
    alerts = [make_alert(f"f{i}") for i in range(3)]
    trigger = render_pagerduty(message("trigger", alerts))
    assert render_pagerduty(message("resolve", alerts)) == {"event_action": "resolve",
                                                            "dedup_key": trigger["dedup_key"]}
    repeat = render_pagerduty(message("repeat", alerts))
    assert repeat["event_action"] == "trigger" and repeat["dedup_key"] == trigger["dedup_key"]



def test_pagerduty_summary_is_cut_to_1024_and_details_are_bounded():
    alerts = [make_alert("a_rather_long_feature_name_" + "x" * 200 + f"_{i}") for i in range(300)]
    event = render_pagerduty(message("trigger", alerts))
    assert len(event["payload"]["summary"]) <= PAGERDUTY_MAX_SUMMARY_CHARS
    details = event["payload"]["custom_details"]
    assert len(details["alerts"]) == defaults.PAGERDUTY_MAX_DETAIL_ALERTS
    assert details["alerts_not_listed"] == 300 - defaults.PAGERDUTY_MAX_DETAIL_ALERTS


def test_pagerduty_channel_adds_the_routing_key_and_the_fake_accepts_it(fake_pagerduty):
    channel = PagerDutyChannel(fake_pagerduty.url, ROUTING_KEY, timeout=2)
    alerts = [make_alert(f"f{i}", severity="error") for i in range(3)]
    trigger = render_pagerduty(message("trigger", alerts))
    result = channel.send(trigger, "trigger-key")
    assert (result.ok, result.status) == (True, 202)
    assert result.response == {"status": "success", "message": "Event processed", "dedup_key": trigger["dedup_key"]}
    sent = fake_pagerduty.requests[0].json()
    assert sent == {"routing_key": ROUTING_KEY, **trigger}
    assert fake_pagerduty.open_incidents.keys() == {trigger["dedup_key"]}
    assert channel.send(render_pagerduty(message("resolve", alerts)), "resolve-key").ok
    assert fake_pagerduty.open_incidents == {} and fake_pagerduty.incidents_opened == 1


def test_pagerduty_invalid_event_is_a_permanent_failure(fake_pagerduty):
    channel = PagerDutyChannel(fake_pagerduty.url, ROUTING_KEY, timeout=2)
    bad = render_pagerduty(message("trigger", [make_alert("f")]))
    bad["payload"]["severity"] = "page"
    result = channel.send(bad, "k1")
    assert (result.ok, result.status, result.retryable) == (False, 400, False)
    assert "payload.severity" in result.response["errors"][0]


# --- Slack ------------------------------------------------------------------------------

def _section_texts(body):
    return [b["text"]["text"] for b in body["blocks"] if b["type"] == "section" and "text" in b]


def test_slack_message_with_more_features_than_fit_stays_within_limits_and_says_how_many_more(fake_slack):
    names = [f"feature_{i:03d}_" + "w" * 100 for i in range(300)]
    body = render_slack(message("trigger", [make_alert(n) for n in names]))
    assert len(body["blocks"]) <= SLACK_MAX_BLOCKS
    assert all(len(t) <= SLACK_MAX_SECTION_CHARS for t in _section_texts(body))
    header = body["blocks"][0]["text"]["text"]
    assert len(header) <= SLACK_MAX_HEADER_CHARS
    listed = sum(t.count("\n• ") + t.startswith("• ") for t in _section_texts(body))
    assert listed == defaults.SLACK_MAX_LISTED_ALERTS
    contexts = " ".join(e["text"] for b in body["blocks"] if b["type"] == "context" for e in b["elements"])
    assert f"and {300 - listed} more" in contexts
    assert "<http://dash.example:8501/?model=credit&amp;version=3|" in contexts
    result = SlackChannel(fake_slack.url, timeout=2).send(body, "k")
    assert (result.ok, result.status, result.response) == (True, 200, "ok")


def test_slack_lines_that_overflow_one_section_are_split_and_names_are_escaped():
    names = [f"<f&{i}>" + "z" * 250 for i in range(30)]
    body = render_slack(message("trigger", [make_alert(n) for n in names]))
    texts = [t for t in _section_texts(body) if t.startswith("• ")]
    assert len(texts) >= 3 and all(len(t) <= SLACK_MAX_SECTION_CHARS for t in texts)
    joined = "\n".join(texts)
    assert "&lt;f&amp;0&gt;" in joined and "<f&0>" not in joined
    assert joined.count("• ") == 30


def test_slack_dataset_drift_lists_drifted_features_within_one_section():
    related = [f"column_{i:04d}" for i in range(1000)]
    body = render_slack(message("trigger", [make_alert("", vocabulary.DATASET_DRIFT, 0.8, 0.5, "error",
                                                        vocabulary.DRIFTED_SHARE)],
                                group=vocabulary.DATASET_DRIFT, related=related))
    drifted = next(t for t in _section_texts(body) if t.startswith("*Drifted features (1000):*"))
    assert len(drifted) <= SLACK_MAX_SECTION_CHARS
    shown = drifted.count("`column_")
    assert 100 < shown < 1000 and drifted.endswith(f" and {1000 - shown} more")
    fields = next(b for b in body["blocks"] if "fields" in b)["fields"]
    assert [f["text"].split("\n")[0] for f in fields] == ["*Model*", "*Version*", "*Detector*", "*Severity*",
                                                          "*Window*", "*Status*"]


def test_fake_slack_rejects_what_slack_rejects(fake_slack):
    too_many = {"text": "x", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51}
    channel = SlackChannel(fake_slack.url, timeout=2)
    result = channel.send(too_many, "k")
    assert (result.ok, result.status, result.retryable, result.response) == (False, 400, False, "invalid_blocks")


# --- signed webhook -------------------------------------------------------------------------

def test_webhook_is_signed_over_timestamp_and_body_and_carries_the_idempotency_key(fake_webhook):
    body = render_webhook(message("trigger", [make_alert("income")]), "trigger-abc")
    result = WebhookChannel(fake_webhook.url, "s3cret-for-tests", timeout=2).send(body, "trigger-abc")
    assert result.ok and result.status == 200
    request = fake_webhook.requests[0]
    assert request.headers["idempotency-key"] == "trigger-abc"
    assert request.headers["x-driftline-signature"].startswith("sha256=")
    assert verify("s3cret-for-tests", request.headers["x-driftline-timestamp"], request.body,
                  request.headers["x-driftline-signature"])
    assert not verify("s3cret-for-tests", request.headers["x-driftline-timestamp"], request.body + b" ",
                      request.headers["x-driftline-signature"])
    assert fake_webhook.delivered["trigger-abc"]["schema"] == "driftline.alert/v1"
    assert fake_webhook.delivered["trigger-abc"]["idempotency_key"] == "trigger-abc"


def test_webhook_with_the_wrong_secret_is_refused_for_good(fake_webhook):
    result = WebhookChannel(fake_webhook.url, "wrong", timeout=2).send({"a": 1}, "k")
    assert (result.ok, result.status, result.retryable) == (False, 401, False)
    assert fake_webhook.delivered == {}


# --- transport failures -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["slack", "pagerduty", "webhook"])
def test_a_timeout_is_a_retryable_failure(kind, fake_slack, fake_pagerduty, fake_webhook):
    fake = {"slack": fake_slack, "pagerduty": fake_pagerduty, "webhook": fake_webhook}[kind]
    fake.script(("slow", 1.0))
    channel = {"slack": lambda: SlackChannel(fake.url, timeout=0.3),
               "pagerduty": lambda: PagerDutyChannel(fake.url, ROUTING_KEY, timeout=0.3),
               "webhook": lambda: WebhookChannel(fake.url, "s3cret-for-tests", timeout=0.3)}[kind]()
    result = channel.send({"text": "x", "event_action": "resolve", "dedup_key": "d"}, "k")
    assert (result.ok, result.retryable) == (False, True)
    assert "timed out after 0.3s" in result.error


def test_a_refused_connection_is_a_retryable_failure():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = PagerDutyChannel(f"http://127.0.0.1:{port}/x", ROUTING_KEY, timeout=1).send({}, "k")
    assert (result.ok, result.retryable, result.status) == (False, True, None)
    result = SlackChannel(f"http://127.0.0.1:{port}/x", timeout=1).send({"text": "x"}, "k")
    assert (result.ok, result.retryable, result.status) == (False, True, None)


def test_retry_after_as_seconds_or_http_date():
    assert parse_retry_after("120") == 120.0
    when = datetime(2026, 1, 5, 12, 2, tzinfo=timezone.utc)
    assert parse_retry_after(format_datetime(when, usegmt=True), now=NOW.timestamp() - 30 * 60) == 120.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


@pytest.mark.parametrize("header", ["inf", "Infinity", "1e12", "1e400", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_an_absurd_retry_after_is_clamped_to_the_documented_maximum(header):
    assert parse_retry_after(header, now=NOW.timestamp()) == defaults.ALERT_RETRY_AFTER_MAX_SECONDS


@pytest.mark.parametrize("header, expected", [("nan", None), ("-1e12", 0.0), ("Mon, 01 Jan 1900 00:00:00 GMT", 0.0),
                                              ("Tue, 99 Foo 2026 25:61:61 GMT", None)])
def test_a_meaningless_retry_after_means_now_or_no_wait_given(header, expected):
    assert parse_retry_after(header, now=NOW.timestamp()) == expected


# --- one deadline per call ------------------------------------------------------------------

CHANNEL_KINDS = {"slack": lambda url, timeout: SlackChannel(url, timeout=timeout),
                 "pagerduty": lambda url, timeout: PagerDutyChannel(url, ROUTING_KEY, timeout=timeout),
                 "webhook": lambda url, timeout: WebhookChannel(url, "s3cret-for-tests", timeout=timeout)}


@pytest.mark.parametrize("kind", list(CHANNEL_KINDS))
def test_a_trickling_receiver_is_cut_at_the_call_deadline(kind, trickler):
    channel = CHANNEL_KINDS[kind](trickler.url, 1.0)
    result = channel.send({"text": "x", "event_action": "resolve", "dedup_key": "d"}, "k")
    assert not trickler.completed.is_set()  # returned while the receiver still trickled
    assert (result.ok, result.retryable, result.status) == (False, True, None)
    assert "timed out after 1s" in result.error
    wait_until(trickler.finished.is_set, message="the receiver to see the client hang up")
    assert trickler.bodies and not trickler.completed.is_set()  # it was cut off, not waited out


def test_a_trickled_body_after_a_2xx_is_cut_at_the_deadline_and_the_answer_counts():
    fake = Trickler(status_line=False, total=120).start()
    try:
        result = PagerDutyChannel(fake.url, ROUTING_KEY, timeout=1.0).send({"event_action": "resolve"}, "k")
        assert not fake.completed.is_set()
        assert (result.ok, result.status) == (True, 200)  # the receiver accepted: a retry would only repeat it
        assert set(result.response) == {"x"} and len(result.response) < 120
    finally:
        fake.stop()


def test_an_answer_is_read_up_to_the_documented_cap(fake_webhook):
    fake_webhook.script((500, {"Content-Type": "text/plain"}, "e" * (defaults.ALERT_RESPONSE_MAX_BYTES * 4)))
    result = WebhookChannel(fake_webhook.url, "s3cret-for-tests", timeout=5).send({"a": 1}, "k")
    assert (result.ok, result.status, result.retryable) == (False, 500, True)
    assert result.response == "e" * defaults.ALERT_RESPONSE_MAX_BYTES


# --- hostile values from traffic ------------------------------------------------------------

SCRIPT = "</script><script>alert(document.domain)</script>"
PHISH = "<!channel> <https://evil|Re-authenticate>"


def hostile_message():
    alert = make_alert(SCRIPT)
    alert.segment = f"region={PHISH}"
    alert.summary = alert_summary(DATA_DRIFT, SCRIPT, "psi", 0.31, 0.2, segment=alert.segment)
    return message("trigger", [alert], related=[PHISH])


def _mrkdwn_texts(body):
    texts = [body["text"]]
    for block in body["blocks"]:
        if block["type"] == "section":
            texts += [block["text"]["text"]] if "text" in block else [f["text"] for f in block["fields"]]
        if block["type"] == "context":
            texts += [e["text"] for e in block["elements"]]
    return texts


def test_hostile_values_reach_every_channel_as_text_never_as_markup(fake_slack, fake_pagerduty, fake_webhook):
    msg = hostile_message()
    assert PHISH in msg["title"]  # the segment value from traffic is in the title

    slack = render_slack(msg)
    for text in _mrkdwn_texts(slack):
        assert "<!channel" not in text and "<https://evil" not in text and "<script" not in text, text
    assert "&lt;!channel&gt;" in slack["text"]  # shown, as text
    assert SlackChannel(fake_slack.url, timeout=5).send(slack, "k").ok

    # PagerDuty and the webhook carry the values as JSON strings (data); they arrive intact and valid
    pd = render_pagerduty(msg)
    assert PagerDutyChannel(fake_pagerduty.url, ROUTING_KEY, timeout=5).send(pd, "k").ok
    assert PHISH in fake_pagerduty.events[0]["payload"]["summary"]
    assert fake_pagerduty.events[0]["payload"]["custom_details"]["alerts"][0]["feature"] == SCRIPT
    assert WebhookChannel(fake_webhook.url, "s3cret-for-tests", timeout=5).send(render_webhook(msg, "k"), "k").ok
    assert fake_webhook.delivered["k"]["alerts"][0]["feature"] == SCRIPT
    assert fake_webhook.delivered["k"]["segments"] == [f"region={PHISH}"]


def test_a_long_hostile_title_is_escaped_then_cut_never_inside_an_entity():
    msg = hostile_message()
    msg["title"] = "&" * (SLACK_MAX_SECTION_CHARS + 10)
    text = render_slack(msg)["text"]
    assert len(text) <= SLACK_MAX_SECTION_CHARS and text.endswith("&amp;…")


@pytest.mark.parametrize("header", ["sha256=é" + "0" * 63, "sha256=" + "ü" * 64, "\ud800", "", "sha256=", None,
                                    b"sha256=00"])
def test_verify_refuses_a_malformed_signature_without_raising(header):
    body = b'{"a":1}'
    assert verify("s3cret", "1767614400", body, header, now=1767614400) is False


@pytest.mark.parametrize("timestamp", ["nan", "inf", "", "١٧٦٧٦١٤٤٠٠x", "\ud800", None])
def test_verify_refuses_a_malformed_timestamp_without_raising(timestamp):
    assert verify("s3cret", timestamp, b"{}", "sha256=00", now=1767614400) is False
