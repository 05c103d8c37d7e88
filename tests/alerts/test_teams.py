"""Microsoft Teams: the Workflows webhook's Adaptive Card, sent to a local fake that answers like the service."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from driftline.alerts import Channels, DeliveryPolicy, deliver_due, load_rules
from driftline.alerts import outbox
from driftline.alerts.channels.teams import ADAPTIVE_CARD, TEAMS_MAX_MESSAGE_BYTES, TeamsChannel, render_teams
from driftline.alerts.channels.validation import check_channel_settings
from driftline.config import Settings
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import Notification
from tests.alerts.test_channels import NOW, PHISH, SCRIPT, hostile_message, make_alert, message
from tests.support.fake_teams import FakeTeams

POLICY = DeliveryPolicy(timeout=timedelta(seconds=2), lease=timedelta(seconds=10),
                        backoff_initial=timedelta(seconds=1), backoff_max=timedelta(seconds=10),
                        max_age=timedelta(minutes=5), max_attempts=5)


@pytest.fixture
def fake_teams():
    fake = FakeTeams().start()
    yield fake
    fake.stop()


def texts(card) -> list[str]:
    """Every Markdown text of a card: TextBlocks and FactSet values."""
    found = []
    for element in card["body"]:
        if element["type"] == "TextBlock":
            found.append(element["text"])
        if element["type"] == "FactSet":
            found += [fact["value"] for fact in element["facts"]]
    return found


def test_a_trigger_is_a_message_with_one_adaptive_card_that_the_workflow_posts(fake_teams):
    alerts = [make_alert("income"), make_alert("age", value=0.5)]
    body = render_teams(message("trigger", alerts, related=["income", "age"]))
    assert set(body) == {"type", "attachments"} and body["type"] == "message"
    (attachment,) = body["attachments"]
    assert attachment == {"contentType": ADAPTIVE_CARD, "contentUrl": None, "content": attachment["content"]}
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.2")
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    title, facts = card["body"][0], card["body"][1]
    assert title["text"] == "\\[FIRING\\] data drift on credit v3: 2 features drifted \\(age, income\\)"
    assert title["color"] == "Attention"
    assert {f["title"]: f["value"] for f in facts["facts"]} == {
        "Model": "credit", "Version": "3", "Detector": "data drift", "Severity": "warning",
        "Window": "2026-01-05T12:00:00Z → 2026-01-05T12:01:00Z", "Status": "firing"}
    assert "**Drifted features (2):** age, income" in texts(card)
    assert "**income** — psi 0.31 vs threshold 0.2" in texts(card)
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Open the driftline dashboard",
                                "url": "http://dash.example:8501/?model=credit&version=3"}]

    result = TeamsChannel(fake_teams.url, timeout=5).send(body, "k")
    assert (result.ok, result.status) == (True, 202)
    assert fake_teams.flow_failures == [] and fake_teams.cards == [card]
    assert fake_teams.requests[0].headers["content-type"].startswith("application/json")


def test_a_resolve_is_green_and_marks_each_line_resolved():
    card = render_teams(message("resolve", [make_alert("income")]))["attachments"][0]["content"]
    assert card["body"][0]["color"] == "Good" and card["body"][0]["text"].startswith("\\[RESOLVED\\]")
    assert texts(card)[-1].endswith("— resolved")


def test_more_alerts_than_fit_stay_under_teams_size_limit_and_say_how_many_more(fake_teams):
    alerts = [make_alert(f"feature_{i:04d}_" + "x" * 250) for i in range(400)]
    body = render_teams(message("trigger", alerts))
    assert len(json.dumps(body, ensure_ascii=False).encode()) <= TEAMS_MAX_MESSAGE_BYTES
    more = texts(body["attachments"][0]["content"])[-1]
    listed = sum(1 for text in texts(body["attachments"][0]["content"]) if text.startswith("**feature"))
    assert 0 < listed < 400 and more == f"…and {400 - listed} more: see them all on the dashboard"
    assert TeamsChannel(fake_teams.url, timeout=5).send(body, "k").ok
    assert fake_teams.flow_failures == [] and len(fake_teams.cards) == 1


# Markdown that would make a link, a mention or emphasis, unescaped
LIVE_MARKDOWN = re.compile(r"(?<!\\)\[[^\]]*(?<!\\)\]\(|<at>|(?<!\\)\*\*[^*]*<|^-\s")


def test_hostile_values_reach_teams_as_text_never_as_a_link_a_mention_or_markup(fake_teams):
    msg = hostile_message()
    msg["related_features"] = ["[Re-authenticate](https://evil)", "<at>everyone</at>", "- list\n# heading"]
    body = render_teams(msg)
    for text in texts(body["attachments"][0]["content"]):
        assert not LIVE_MARKDOWN.search(text), text
        assert "<" not in text and "\n" not in text, text
    shown = " ".join(texts(body["attachments"][0]["content"]))
    assert "\\[Re-authenticate\\]\\(https://evil\\)" in shown and "‹at>everyone‹/at>" in shown
    assert PHISH not in shown and SCRIPT not in shown  # both hold "<": made inert
    assert TeamsChannel(fake_teams.url, timeout=5).send(body, "k").ok and fake_teams.flow_failures == []


@pytest.mark.parametrize("answer, retryable, retry_after", [
    ((429, {"Retry-After": "7"}, {"error": {"code": "WorkflowTriggerIsThrottled"}}), True, 7.0),
    ((502, {}, {"error": {"code": "BadGateway"}}), True, None),
    ((400, {}, {"error": {"code": "InvalidRequestContent"}}), False, None),
])
def test_teams_failures_are_classified_like_the_service_means_them(fake_teams, answer, retryable, retry_after):
    fake_teams.script(answer)
    result = TeamsChannel(fake_teams.url, timeout=5).send(render_teams(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.status, result.retryable, result.retry_after) == (False, answer[0], retryable,
                                                                                  retry_after)


def test_a_revoked_signature_is_refused_for_good_and_the_url_never_reaches_the_error(fake_teams):
    url = fake_teams.url.replace(fake_teams.signature, "revoked-signature")
    chans = Channels(teams=TeamsChannel(url, timeout=5), secrets=(url,))
    result = chans.teams.send(render_teams(message("trigger", [make_alert("a")])), "k")
    assert (result.ok, result.status, result.retryable) == (False, 401, False)
    assert "DirectApiAuthorizationRequired" in result.error
    assert "revoked-signature" not in chans.scrub(f"{result.error} at {url}")


def test_a_slow_workflow_is_cut_at_the_delivery_deadline(trickler):
    result = TeamsChannel(trickler.url, timeout=1.0).send(render_teams(message("trigger", [make_alert("a")])), "k")
    assert not trickler.completed.is_set()
    assert (result.ok, result.retryable) == (False, True) and "timed out after 1s" in result.error


def test_through_settings_routing_and_the_outbox_a_throttled_card_is_retried_in_its_own_lane(sqlite_url, fake_teams):
    settings = Settings(teams_webhook_url=fake_teams.url)
    rules = load_rules(settings)
    assert rules.channels == {"teams": "info"} and rules.channels_for("info") == ["teams"]
    chans = Channels.from_settings(settings, timeout=2)
    assert chans.enabled() == ["teams"] and isinstance(chans.teams, TeamsChannel)
    with session_scope(sqlite_url) as s:
        outbox.enqueue(s, idempotency_key="k-teams", channel="teams", kind="trigger", alert_fingerprint="g",
                       payload=render_teams(message("trigger", [make_alert("income")])), now=NOW)
    fake_teams.script((429, {"Retry-After": "30"}, {"error": {"code": "WorkflowTriggerIsThrottled"}}))
    first = deliver_due(sqlite_url, channels=chans, now=NOW, policy=POLICY, lane="teams")
    assert first.retrying and not fake_teams.cards
    second = deliver_due(sqlite_url, channels=chans, now=NOW + timedelta(seconds=30), policy=POLICY, lane="teams")
    assert second.sent == first.retrying and len(fake_teams.cards) == 1
    with session_scope(sqlite_url) as s:
        row = s.query(Notification).one()
        assert (row.status, row.attempts, row.response_status) == ("sent", 2, 202)
    chans.close()


def test_teams_routed_without_its_url_or_with_a_bad_one_stops_the_start_naming_the_setting(tmp_path):
    config = tmp_path / "driftline.toml"
    config.write_text('[alerts.channels]\nteams = "error"\n')
    with pytest.raises(UserError, match=r"routes 'error' alerts to teams, but teams_webhook_url is not set"):
        load_rules(Settings(), config)
    with pytest.raises(UserError, match=r"^teams_webhook_url is not an http\(s\) URL") as raised:
        check_channel_settings(Settings(teams_webhook_url="prod-01.westus.logic.azure.com/workflows/x?sig=s3cr3t"))
    assert "s3cr3t" not in str(raised.value)
