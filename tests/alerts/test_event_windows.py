"""Every alert knows its event-time windows: where its evidence began and where it fired, in every payload."""
from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import orjson
from click.testing import CliRunner
from sqlalchemy import select

from driftline.alerts import AlertRules, fingerprint, group_key
from driftline.alerts.channels.alertmanager import render_alertmanager
from driftline.alerts.channels.pagerduty import render_pagerduty
from driftline.alerts.channels.slack import render_slack
from driftline.alerts.channels.webhook import render_webhook
from driftline.alerts.commands import alerts as alerts_command
from driftline.alerts.messages import alert_summary, group_message
from driftline.store.db import session_scope
from driftline.store.models import Alert, Notification
from driftline.store.queries import status_report
from driftline.vocabulary import DATA_DRIFT, LATENCY
from driftline.windows import WindowKey

CHANNELS = ["slack", "pagerduty", "webhook", "alertmanager"]
NOW = datetime(2026, 1, 5, 14, 10, tzinfo=timezone.utc)
W1403 = int(datetime(2026, 1, 5, 14, 3, tzinfo=timezone.utc).timestamp() * 1000)
W1405 = int(datetime(2026, 1, 5, 14, 5, tzinfo=timezone.utc).timestamp() * 1000)


def sequential_rules() -> AlertRules:
    # the default (sequential) policy for drift; everything at warning reaches every channel
    return AlertRules.from_mapping({"resolve_after_windows": 2, "channels": {c: "info" for c in CHANNELS}},
                                   channels=CHANNELS, dashboard_url="http://dash:8501")


def k_rules() -> AlertRules:
    return AlertRules.from_mapping({"policy": "for_windows", "for_windows": 2, "resolve_after_windows": 2},
                                   channels=["webhook"], dashboard_url="http://dash:8501")


def evidence_row(paging: bool, since_ms: int, feature: str = "income", segment: str = "",
                 breached: bool = False) -> dict:
    return dict(detector=DATA_DRIFT, feature=feature, metric="psi", value=0.12, threshold=0.2, breached=breached,
                segment=segment, details={"evidence": {"paging": paging, "e_value": 3.2e6 if paging else 40.0,
                                                       "line": 1e4, "since_window_start_ms": since_ms}})


def row(url, feature="income", detector=DATA_DRIFT, segment=""):
    with session_scope(url) as s:
        return s.scalar(select(Alert).where(Alert.fingerprint == fingerprint("credit", "1", detector, feature,
                                                                             segment)))


def windows(alert) -> tuple[int | None, int | None]:
    return alert.first_window_start_ms, alert.fired_window_start_ms


def payloads(url, kind="trigger") -> dict[str, dict]:
    with session_scope(url) as s:
        return {n.channel: n.payload for n in s.scalars(
            select(Notification).where(Notification.kind == kind).order_by(Notification.id))}


# --- the lifecycle sets them -----------------------------------------------------------------

def test_sequential_evidence_dates_the_episode_from_its_run_not_from_the_window_that_pages(
        db_url, write_window, run_window, clock):
    r = sequential_rules()
    for i in (0, 1):  # the evidence builds from window 0 on, still under its line: no alert yet
        write_window(db_url, i, features=[], extra=[evidence_row(False, clock.start(0), breached=i == 1)])
        run_window(db_url, i, r)
    assert row(db_url) is None
    write_window(db_url, 2, features=[], extra=[evidence_row(True, clock.start(0))])
    run_window(db_url, 2, r)
    fired = row(db_url)
    assert fired.state == "firing"
    assert windows(fired) == (clock.start(0), clock.start(2))
    # still firing, whatever a later window's evidence says: kept for the life of the episode
    write_window(db_url, 3, features=[], extra=[evidence_row(True, clock.start(1))])
    run_window(db_url, 3, r)
    assert windows(row(db_url)) == (clock.start(0), clock.start(2))

    # the notifications were rendered when queued, with the values already set
    sent = payloads(db_url)
    assert set(sent) == set(CHANNELS)
    line = sent["webhook"]["alerts"][0]
    assert (line["first_window_start_ms"], line["fired_window_start_ms"]) == (clock.start(0), clock.start(2))
    assert (line["first_window_start"], line["fired_window_start"]) == ("2026-01-05T12:00:00Z", "2026-01-05T12:02:00Z")
    details = sent["pagerduty"]["payload"]["custom_details"]["alerts"][0]
    assert (details["first_window_start_ms"], details["fired_window_start_ms"]) == (clock.start(0), clock.start(2))
    slack = "\n".join(b["text"]["text"] for b in sent["slack"]["blocks"] if b["type"] == "section" and "text" in b)
    assert "evidence from window 12:00 UTC, fired in window 12:02 UTC" in slack
    annotations = sent["alertmanager"]["alerts"][0]["annotations"]
    assert annotations["first_window_start"] == "2026-01-05T12:00:00Z"
    assert annotations["fired_window_start_ms"] == str(clock.start(2))

    for i in (4, 5):  # two windows whose evidence no longer pages: resolved, the windows kept as history
        write_window(db_url, i, features=[], extra=[evidence_row(False, clock.start(4))])
        run_window(db_url, i, r)
    resolved = row(db_url)
    assert resolved.state == "resolved" and windows(resolved) == (clock.start(0), clock.start(2))
    assert payloads(db_url, "resolve")["webhook"]["alerts"][0]["fired_window_start_ms"] == clock.start(2)

    # a new episode dates itself anew
    write_window(db_url, 6, features=[], extra=[evidence_row(True, clock.start(5))])
    run_window(db_url, 6, r)
    again = row(db_url)
    assert again.state == "firing" and windows(again) == (clock.start(5), clock.start(6))


def test_without_evidence_the_first_breaching_window_and_the_k_th_date_the_episode(
        db_url, write_window, run_window, clock):
    r = k_rules()
    pattern = [True, True, False, False, True, False, True, True]  # windows 0..7
    seen = []
    for i, hit in enumerate(pattern):
        write_window(db_url, i, drifted=["feature_00"] if hit else [])
        run_window(db_url, i, r)
        alert = row(db_url, "feature_00")
        seen.append((alert.state, *windows(alert)))
    s = clock.start
    assert seen == [
        ("pending", s(0), None),
        ("firing", s(0), s(1)),
        ("firing", s(0), s(1)),
        ("resolved", s(0), s(1)),  # the episode's history stays on the resolved alert
        ("pending", s(4), None),  # a new episode forgets the old one
        ("resolved", s(4), None),  # dropped: it never fired
        ("pending", s(6), None),
        ("firing", s(6), s(7)),
    ]


def test_a_segment_keeps_the_k_windows_rule_and_its_first_breaching_window(db_url, write_window, run_window, clock):
    r = sequential_rules()
    write_window(db_url, 3, features=[], extra=[evidence_row(False, clock.start(0), segment="region=north",
                                                             breached=True)])
    run_window(db_url, 3, r)
    assert windows(row(db_url, segment="region=north")) == (clock.start(3), None)


def test_alerts_list_json_and_status_report_carry_them(sqlite_url, write_window, run_window, clock):
    r = k_rules()
    for i in (0, 1):
        write_window(sqlite_url, i, drifted=["feature_00"])
        run_window(sqlite_url, i, r)
    result = CliRunner().invoke(alerts_command, ["list", "--json", "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    [listed] = orjson.loads(result.output)["alerts"]
    assert (listed["first_window_start_ms"], listed["fired_window_start_ms"]) == (clock.start(0), clock.start(1))
    assert (listed["first_window_start"], listed["fired_window_start"]) == ("2026-01-05T12:00:00Z",
                                                                            "2026-01-05T12:01:00Z")
    with session_scope(sqlite_url) as s:
        [status] = status_report(s)["alerts"]
    assert (status["first_window_start_ms"], status["fired_window_start_ms"]) == (clock.start(0), clock.start(1))
    assert status["fired_window_start"].startswith("2026-01-05T12:01:00")


# --- every channel shows them ------------------------------------------------------------------

def make_alert(first_ms: int | None = W1403, fired_ms: int | None = W1405, feature: str = "income",
               detector: str = DATA_DRIFT):
    return SimpleNamespace(
        fingerprint=fingerprint("credit", "3", detector, feature), detector=detector, feature=feature, value=0.31,
        threshold=0.2, severity="warning", state="firing", summary=alert_summary(detector, feature, "psi", 0.31, 0.2),
        details={"metric": "psi"}, started_at=NOW, fired_at=NOW, resolved_at=None, last_window_start_ms=W1405,
        first_window_start_ms=first_ms, fired_window_start_ms=fired_ms)


def message(kind: str = "trigger", alerts=None, window_start_ms: int = W1405):
    return group_message(kind, window=WindowKey("credit", "3", window_start_ms, window_start_ms + 60_000),
                         group=DATA_DRIFT, group_key=group_key("credit", "3", DATA_DRIFT),
                         alerts=alerts or [make_alert()], related_features=[], dashboard_url="http://dash:8501", now=NOW)


def slack_lines(payload: dict) -> str:
    return "\n".join(b["text"]["text"] for b in payload["blocks"] if b["type"] == "section" and "text" in b)


def test_slack_says_in_which_windows_the_evidence_began_and_the_alert_fired():
    text = slack_lines(render_slack(message()))
    assert "• *income* — psi `0.31` vs threshold `0.2` — evidence from window 14:03 UTC, fired in window 14:05 UTC" \
        in text
    # a window on another day than the message's names its date
    earlier = make_alert(first_ms=W1403 - 86_400_000)
    assert "evidence from window 2026-01-04 14:03 UTC, fired in window 14:05 UTC" in slack_lines(
        render_slack(message(alerts=[earlier])))
    # unknown (an alert older than the columns): nothing is made up
    assert "window" not in slack_lines(render_slack(message(alerts=[make_alert(None, None)])))


def test_pagerduty_custom_details_carry_them_per_alert():
    [details] = render_pagerduty(message())["payload"]["custom_details"]["alerts"]
    assert details["first_window_start_ms"] == W1403 and details["fired_window_start_ms"] == W1405
    assert details["first_window_start"] == "2026-01-05T14:03:00Z"
    assert details["fired_window_start"] == "2026-01-05T14:05:00Z"


def test_the_webhook_body_carries_them_per_alert():
    [line] = render_webhook(message(), "key-1")["alerts"]
    assert (line["first_window_start_ms"], line["fired_window_start_ms"]) == (W1403, W1405)
    assert (line["first_window_start"], line["fired_window_start"]) == ("2026-01-05T14:03:00Z",
                                                                        "2026-01-05T14:05:00Z")
    unknown = render_webhook(message(alerts=[make_alert(W1403, None)]), "key-2")["alerts"][0]
    assert unknown["fired_window_start_ms"] is None and unknown["fired_window_start"] is None


def test_alertmanager_has_them_as_annotations_and_never_as_labels():
    [alert] = render_alertmanager(message())["alerts"]
    assert alert["annotations"]["first_window_start"] == "2026-01-05T14:03:00Z"
    assert alert["annotations"]["fired_window_start"] == "2026-01-05T14:05:00Z"
    assert alert["annotations"]["first_window_start_ms"] == str(W1403)
    assert alert["annotations"]["fired_window_start_ms"] == str(W1405)
    assert all(isinstance(v, str) for v in alert["annotations"].values())  # Alertmanager takes strings only
    # labels are the alert's identity (re-posts deduplicate on them): a new episode must not make a new alert
    assert alert["labels"] == render_alertmanager(message(alerts=[make_alert(W1405, W1405 + 60_000)]))[
        "alerts"][0]["labels"]
    assert not any("window" in k for k in alert["labels"])
    pending = render_alertmanager(message(alerts=[make_alert(W1403, None)]))["alerts"][0]["annotations"]
    assert "fired_window_start" not in pending and "fired_window_start_ms" not in pending  # no null annotation


def test_a_latency_alert_without_evidence_still_has_them():
    latency = make_alert(feature="", detector=LATENCY)
    assert "evidence from window 14:03 UTC" in slack_lines(render_slack(message(alerts=[latency])))
