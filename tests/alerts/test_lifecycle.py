"""The alert lifecycle on SQLite and PostgreSQL: K/M, no flapping, grouping, inhibition, repeats, silences."""
from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from driftline.alerts import AlertRules, fingerprint, group_key
from driftline.alerts.silences import create_silence
from driftline.alerts.state import advance
from driftline.store.db import session_scope
from driftline.store.models import Alert, Notification
from driftline.vocabulary import DATASET_DRIFT, DATA_DRIFT, LATENCY
from driftline.windows import WindowKey

ALL_CHANNELS = ["slack", "pagerduty", "webhook"]


def rules(**overrides) -> AlertRules:
    # the K-windows rule on purpose: these tests drive the lifecycle with stored verdicts, not evidence
    mapping = {"policy": "for_windows", "for_windows": 2, "resolve_after_windows": 2, **overrides}
    return AlertRules.from_mapping(mapping, channels=ALL_CHANNELS, dashboard_url="http://dash:8501")


def notifications(url):
    with session_scope(url) as s:
        return [(n.channel, n.kind, n.alert_fingerprint, n.payload) for n in
                s.scalars(select(Notification).order_by(Notification.id))]


def alert(url, detector=DATA_DRIFT, feature="feature_00", version="1"):
    with session_scope(url) as s:
        return s.scalar(select(Alert).where(Alert.fingerprint == fingerprint("credit", version, detector, feature)))


@pytest.mark.parametrize("state, breaches, clean, breached, expected", [
    (None, 0, 0, True, ("pending", 1, 0, "started")),
    ("pending", 1, 0, True, ("firing", 2, 0, "fired")),
    ("pending", 1, 0, False, ("resolved", 0, 1, "dropped")),
    ("firing", 5, 0, False, ("firing", 0, 1, None)),
    ("firing", 0, 1, False, ("resolved", 0, 2, "resolved")),
    ("firing", 0, 1, True, ("firing", 1, 0, None)),
    ("resolved", 0, 2, True, ("pending", 1, 0, "started")),
    ("resolved", 0, 2, False, ("resolved", 0, 2, None)),
])
def test_state_machine_with_k2_m2(state, breaches, clean, breached, expected):
    step = advance(state, breaches, clean, breached, for_windows=2, resolve_after_windows=2)
    assert (step.state, step.consecutive_breaches, step.consecutive_clean, step.event) == expected


def test_k_equal_one_fires_at_once():
    assert advance(None, 0, 0, True, for_windows=1, resolve_after_windows=3).state == "firing"


def test_k_breaches_fire_m_clean_windows_resolve_and_one_clean_window_does_not(db_url, write_window, run_window):
    r = rules()
    pattern = [True, True, False, True, False, False]  # windows 0..5
    states = []
    for i, hit in enumerate(pattern):
        write_window(db_url, i, drifted=["feature_00"] if hit else [])
        run_window(db_url, i, r)
        states.append(alert(db_url).state)
        if i == 0:
            assert notifications(db_url) == []
    assert states == ["pending", "firing", "firing", "firing", "firing", "resolved"]
    sent = notifications(db_url)
    assert [(c, k) for c, k, _, _ in sent] == [("slack", "trigger"), ("webhook", "trigger"),
                                                ("slack", "resolve"), ("webhook", "resolve")]
    key = group_key("credit", "1", DATA_DRIFT)
    assert {fp for _, _, fp, _ in sent} == {key}
    webhook_trigger = sent[1][3]
    assert webhook_trigger["status"] == "firing" and webhook_trigger["severity"] == "warning"
    assert [a["feature"] for a in webhook_trigger["alerts"]] == ["feature_00"]
    assert webhook_trigger["alerts"][0]["value"] == pytest.approx(0.31)
    assert webhook_trigger["alerts"][0]["threshold"] == pytest.approx(0.2)
    assert sent[3][3]["status"] == "resolved"
    final = alert(db_url)
    assert final.fired_at is not None and final.resolved_at is not None and final.consecutive_clean == 2


def test_isolated_breaches_never_fire_and_send_nothing(db_url, write_window, run_window):
    r = rules()
    for i, hit in enumerate([True, False, True, False, True, False]):
        write_window(db_url, i, drifted=["feature_03"] if hit else [])
        run_window(db_url, i, r)
    assert notifications(db_url) == []
    row = alert(db_url, feature="feature_03")
    assert row.state == "resolved" and row.fired_at is None


def test_processing_a_window_twice_or_late_changes_nothing(db_url, write_window, run_window):
    r = rules()
    for i in range(3):
        write_window(db_url, i, drifted=["feature_00"])
    run_window(db_url, 0, r)
    run_window(db_url, 1, r)
    before = (alert(db_url).consecutive_breaches, notifications(db_url))
    run_window(db_url, 1, r)
    run_window(db_url, 0, r)  # an older window, e.g. re-evaluated after late events
    assert (alert(db_url).consecutive_breaches, notifications(db_url)) == before
    assert before[0] == 2 and len(before[1]) == 2


def test_ten_drifted_features_make_one_notification_per_channel_listing_them(db_url, write_window, run_window):
    drifted = [f"feature_{i:02d}" for i in range(10)]
    r = rules()
    for i in range(2):
        write_window(db_url, i, drifted=drifted)
        run_window(db_url, i, r)
    sent = notifications(db_url)
    assert [(c, k) for c, k, _, _ in sent] == [("slack", "trigger"), ("webhook", "trigger")]
    body = sent[1][3]
    assert [a["feature"] for a in body["alerts"]] == drifted
    assert body["title"].startswith("[FIRING] data drift on 10 features of credit v1")
    slack_text = "\n".join(b["text"]["text"] for b in sent[0][3]["blocks"] if b["type"] == "section" and "text" in b)
    assert all(f"*{name}*" in slack_text for name in drifted)


def test_dataset_drift_inhibits_its_per_feature_notifications(db_url, write_window, run_window):
    drifted = [f"feature_{i:02d}" for i in range(10)]
    r = rules()
    for i in range(2):
        write_window(db_url, i, drifted=drifted, dataset=True)
        run_window(db_url, i, r)
    sent = notifications(db_url)
    dataset_key = group_key("credit", "1", DATASET_DRIFT)
    assert dataset_key == fingerprint("credit", "1", DATASET_DRIFT, "")
    # dataset drift is an error: Slack, PagerDuty and the webhook; the per-feature group says nothing
    assert [(c, k, fp) for c, k, fp, _ in sent] == [(c, "trigger", dataset_key) for c in ALL_CHANNELS]
    webhook = sent[2][3]
    assert [a["detector"] for a in webhook["alerts"]] == [DATASET_DRIFT]
    assert webhook["related_features"] == drifted
    assert sent[1][3]["payload"]["custom_details"]["drifted_features"] == drifted
    assert alert(db_url, feature="feature_05").state == "firing"
    assert alert(db_url, feature="feature_05").last_notified_at is None
    for i in range(2, 4):
        write_window(db_url, i, drifted=[], dataset=False)
        run_window(db_url, i, r)
    after = notifications(db_url)[3:]
    assert [(c, k, fp) for c, k, fp, _ in after] == [(c, "resolve", dataset_key) for c in ALL_CHANNELS]
    assert after[1][3] == {"event_action": "resolve", "dedup_key": dataset_key}


def test_latency_slo_breach_is_its_own_group(db_url, write_window, run_window):
    r = rules()
    for i in range(2):
        write_window(db_url, i, drifted=["feature_01", "feature_02"], latency_ms=250.0)
        run_window(db_url, i, r)
    sent = notifications(db_url)
    latency_key = group_key("credit", "1", LATENCY)
    assert latency_key == fingerprint("credit", "1", LATENCY, "")
    by_group = {}
    for channel, _, fp, _ in sent:
        by_group.setdefault(fp, []).append(channel)
    assert by_group == {group_key("credit", "1", DATA_DRIFT): ["slack", "webhook"],
                        latency_key: ["slack", "pagerduty", "webhook"]}
    pd = next(p for c, _, _, p in sent if c == "pagerduty")
    assert pd["payload"]["severity"] == "critical" and pd["dedup_key"] == latency_key
    assert "p99_ms 250 vs threshold 100" in pd["payload"]["summary"]


def test_still_firing_groups_repeat_after_the_repeat_interval(db_url, write_window, run_window):
    r = rules(repeat_interval="5m")
    for i in range(12):
        write_window(db_url, i, drifted=["feature_00"], dataset=None, latency_ms=300.0)
        run_window(db_url, i, r)
    sent = notifications(db_url)
    latency_key = group_key("credit", "1", LATENCY)
    kinds = [(k, c) for c, k, fp, _ in sent if fp == latency_key]
    # fires at window 1; window i is processed at minute i + 1.5, so repeats at windows 6 and 11
    # repeats go to PagerDuty too (a trigger with the same dedup_key): a page lost to an outage comes back
    assert kinds == [("trigger", "slack"), ("trigger", "pagerduty"), ("trigger", "webhook"),
                     ("repeat", "slack"), ("repeat", "pagerduty"), ("repeat", "webhook"),
                     ("repeat", "slack"), ("repeat", "pagerduty"), ("repeat", "webhook")]
    with session_scope(db_url) as s:
        windows = [n.payload["window"]["start_ms"] for n in s.scalars(
            select(Notification).where(Notification.kind == "repeat", Notification.channel == "webhook",
                                       Notification.alert_fingerprint == latency_key))]
    from_start = [(w - windows[0]) // 60_000 for w in windows]
    assert from_start == [0, 5]


def test_silence_mutes_until_expiry_and_never_holds_back_a_resolve(db_url, write_window, run_window, clock):
    r = rules()
    with session_scope(db_url) as s:
        create_silence(s, model="credit", detector=LATENCY, duration=timedelta(minutes=4),
                       comment="planned load test", now=clock.t0)
    for i in range(3):  # fires at window 1 (processed at minute 2.5), silence ends at minute 4
        write_window(db_url, i, latency_ms=300.0)
        run_window(db_url, i, r)
    assert alert(db_url, LATENCY, "").state == "firing"
    assert notifications(db_url) == []
    write_window(db_url, 3, latency_ms=300.0)
    run_window(db_url, 3, r)  # minute 4.5: the silence has expired, the alert still fires
    assert [(c, k) for c, k, _, _ in notifications(db_url)] == [("slack", "trigger"), ("pagerduty", "trigger"),
                                                                ("webhook", "trigger")]
    with session_scope(db_url) as s:
        create_silence(s, model="credit", duration=timedelta(hours=1), comment="muting everything",
                       now=clock.now(3))
    for i in range(4, 6):
        write_window(db_url, i, latency_ms=20.0)
        run_window(db_url, i, r)
    assert [(c, k) for c, k, _, _ in notifications(db_url)][3:] == [("slack", "resolve"), ("pagerduty", "resolve"),
                                                                    ("webhook", "resolve")]


def test_windows_without_evidence_hold_state(db_url, write_window, run_window, clock):
    r = rules()
    write_window(db_url, 0, drifted=["feature_00"])
    write_window(db_url, 1, drifted=["feature_00"])
    run_window(db_url, 0, r)
    run_window(db_url, 1, r)
    write_window(db_url, 2, status="insufficient_data")
    write_window(db_url, 3, features=[], latency_ms=20.0)  # the drift detector reported nothing
    write_window(db_url, 4, features=["feature_01"])  # it reported, but not feature_00: clean
    run_window(db_url, 2, r)
    run_window(db_url, 3, r)
    held = alert(db_url)
    assert (held.state, held.consecutive_clean, held.last_window_start_ms) == ("firing", 0, clock.start(1))
    run_window(db_url, 4, r)
    assert alert(db_url).consecutive_clean == 1 and alert(db_url).state == "firing"


def test_alerts_of_a_version_that_stopped_serving_resolve_as_stale(db_url, write_window, run_window):
    r = rules()
    for i in range(2):
        write_window(db_url, i, version="1", latency_ms=400.0)
        run_window(db_url, i, r, version="1")
    assert alert(db_url, LATENCY, "", version="1").state == "firing"
    for i in range(2, 5):  # version 2 serves from window 2 on
        write_window(db_url, i, version="2", latency_ms=20.0)
        run_window(db_url, i, r, version="2")
    old = alert(db_url, LATENCY, "", version="1")
    assert old.state == "resolved" and "stale" in old.details["resolved_reason"]
    resolves = [(c, fp) for c, k, fp, _ in notifications(db_url) if k == "resolve"]
    assert resolves == [(c, group_key("credit", "1", LATENCY)) for c in ALL_CHANNELS]


def test_disabled_detector_raises_no_alert(db_url, write_window, run_window):
    r = rules(detectors={LATENCY: {"enabled": False}})
    for i in range(3):
        write_window(db_url, i, latency_ms=400.0)
        run_window(db_url, i, r)
    assert alert(db_url, LATENCY, "") is None and notifications(db_url) == []


def test_unevaluated_window_is_a_clear_error(db_url):
    from driftline.alerts import process_window

    with session_scope(db_url) as s, pytest.raises(LookupError, match="has not been evaluated"):
        process_window(s, WindowKey("credit", "1", 123, 60_123), rules=rules(), now=__import__("datetime").datetime.now())


def _evidence_row(feature: str, paging: bool, e_value: float, since_ms: int, breached: bool = False,
                  segment: str = "") -> dict:
    return dict(detector=DATA_DRIFT, feature=feature, metric="psi", value=0.12, threshold=0.2, breached=breached,
                segment=segment, details={"evidence": {"paging": paging, "e_value": e_value, "line": 1e4,
                                                       "since_window_start_ms": since_ms}})


def test_the_sequential_policy_fires_on_the_evidence_says_how_strong_and_resolves_after_m_quiet_windows(
        db_url, write_window, run_window, clock):
    sequential = AlertRules.from_mapping({"resolve_after_windows": 2}, channels=ALL_CHANNELS)  # the default policy
    # window 0: the window alone breached, the evidence is still under its line: nothing
    write_window(db_url, 0, features=[], extra=[_evidence_row("income", False, 40.0, clock.start(0), breached=True)])
    run_window(db_url, 0, sequential)
    assert alert(db_url, feature="income") is None
    # window 1: under the per-window floor, yet the evidence since window 0 crossed: it fires at once
    write_window(db_url, 1, features=[], extra=[_evidence_row("income", True, 3.2e6, clock.start(0))])
    run_window(db_url, 1, sequential)
    fired = alert(db_url, feature="income")
    assert fired.state == "firing"
    assert fired.summary.endswith("; evidence e=3.2e+06 over its line 1e+04 since window 2026-01-05T12:00:00Z")
    # a segment's per-window breaches keep the K-windows rule (K = 3 by default): one breach only pends
    write_window(db_url, 2, features=[], extra=[_evidence_row("income", True, 5e6, clock.start(0)),
                                               _evidence_row("income", False, 1.0, 0, breached=True,
                                                             segment="region=north")])
    run_window(db_url, 2, sequential)
    with session_scope(db_url) as s:
        north = s.scalar(select(Alert).where(Alert.segment == "region=north"))
        assert north.state == "pending"
    for i in (3, 4):  # two windows whose evidence no longer pages: resolved
        write_window(db_url, i, features=[], extra=[_evidence_row("income", False, 50.0, clock.start(3))])
        run_window(db_url, i, sequential)
    assert alert(db_url, feature="income").state == "resolved"
