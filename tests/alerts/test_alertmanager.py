"""The Alertmanager channel: rendering, routing, re-posts while firing, and a real Alertmanager on loopback."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from driftline.alerts import AlertRules, Channels, group_key, repost_firing
from driftline.alerts.channels.alertmanager import AlertmanagerChannel, alertmanager_urls, render_alertmanager
from driftline.alerts.channels.validation import check_channel_settings
from driftline.alerts.silences import create_silence
from driftline.config import Settings
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import Notification
from driftline.vocabulary import DATA_DRIFT, LATENCY
from tests.support.waiting import wait_until

AM = "alertmanager"


def rules(**overrides) -> AlertRules:
    mapping = {"for_windows": 1, "resolve_after_windows": 1, **overrides}
    return AlertRules.from_mapping(mapping, channels=["slack", AM], dashboard_url="http://dash:8501")


def rows(url, channel=AM):
    with session_scope(url) as s:
        return [(n.kind, n.alert_fingerprint, n.payload) for n in
                s.scalars(select(Notification).where(Notification.channel == channel).order_by(Notification.id))]


def message(kind="trigger", **line):
    alert = {"fingerprint": "f" * 64, "detector": DATA_DRIFT, "feature": "income", "segment": "", "metric": "psi",
             "value": 0.31, "threshold": 0.2, "severity": "warning", "state": "firing",
             "summary": "data drift on income: psi 0.31 vs threshold 0.2", "started_at": "2026-01-05T12:00:00Z",
             "fired_at": "2026-01-05T12:01:00Z", "resolved_at": None, "last_window_start": None, **line}
    return {"kind": kind, "model": "credit", "version": "3", "title": "[FIRING] credit v3: data drift",
            "dashboard_url": "http://dash:8501/?model=credit&version=3", "created_at": "2026-01-05T12:10:00Z",
            "alerts": [alert]}


def test_render_labels_annotations_and_resolve_ends_at():
    firing = render_alertmanager(message())["alerts"][0]
    assert firing["labels"] == {"alertname": "driftline_data_drift", "model": "credit", "version": "3",
                                "detector": DATA_DRIFT, "feature": "income", "severity": "warning"}
    assert firing["annotations"]["summary"].startswith("data drift on income")
    assert firing["annotations"]["dashboard"] == "http://dash:8501/?model=credit&version=3"
    assert firing["startsAt"] == "2026-01-05T12:01:00Z" and "endsAt" not in firing  # set when sent
    segment = render_alertmanager(message(segment="region=north", feature=""))["alerts"][0]["labels"]
    assert segment["segment"] == "region=north" and "feature" not in segment
    resolved = render_alertmanager(message("resolve", resolved_at="2026-01-05T12:20:00Z"))["alerts"][0]
    assert resolved["endsAt"] == "2026-01-05T12:20:00Z"


def test_urls_are_comma_separated_bases_and_bad_ones_are_refused():
    assert alertmanager_urls(" http://a:9093/ , http://b:9093/api/v2/alerts,") == [
        "http://a:9093/api/v2/alerts", "http://b:9093/api/v2/alerts"]
    check_channel_settings(Settings(alertmanager_url="http://a:9093,http://b:9093"))
    with pytest.raises(UserError, match="alertmanager_url is not an http"):
        check_channel_settings(Settings(alertmanager_url="http://a:9093,secret-host:9093"))
    assert Channels.from_settings(Settings(alertmanager_url="http://a:9093")).enabled() == [AM]


def test_routed_by_severity_like_the_other_channels():
    r = AlertRules.from_mapping({"channels": {AM: "error"}}, channels=[AM])
    assert r.channels_for("warning") == [] and r.channels_for("critical") == [AM]
    with pytest.raises(UserError, match="alertmanager_url is not set"):
        AlertRules.from_mapping({"channels": {AM: "error"}}, channels=["slack"])


def test_trigger_and_resolve_are_queued_for_alertmanager(db_url, write_window, run_window):
    r = rules()
    write_window(db_url, 0, latency_ms=250.0, features=[])
    run_window(db_url, 0, r)
    write_window(db_url, 1, latency_ms=20.0, features=[])
    run_window(db_url, 1, r)
    queued = rows(db_url)
    assert [kind for kind, _, _ in queued] == ["trigger", "resolve"]
    assert queued[0][2]["alerts"][0]["labels"]["alertname"] == "driftline_latency"
    assert queued[1][2]["alerts"][0]["endsAt"]


def test_firing_groups_are_reposted_to_alertmanager_only_each_interval(db_url, write_window, run_window, clock):
    r = rules()
    write_window(db_url, 0, latency_ms=250.0, features=[])
    run_window(db_url, 0, r)
    start = clock.now(0)
    key = group_key("credit", "1", LATENCY)
    with session_scope(db_url) as s:  # the trigger was just written: nothing to re-post yet
        assert repost_firing(s, rules=r, now=start + timedelta(seconds=60)) == []
    with session_scope(db_url) as s:
        assert repost_firing(s, rules=r, now=start + timedelta(minutes=5)) == [key]
    with session_scope(db_url) as s:
        assert repost_firing(s, rules=r, now=start + timedelta(minutes=6)) == []
    assert [kind for kind, _, _ in rows(db_url)] == ["trigger", "repeat"]
    assert [kind for kind, _, _ in rows(db_url, "slack")] == ["trigger"]  # slack keeps its repeat_interval
    with session_scope(db_url) as s:  # a silenced group is not re-posted (Alertmanager lets it expire)
        create_silence(s, model="credit", detector=LATENCY, feature=None, duration=timedelta(hours=1),
                       comment="known", created_by="test", now=start + timedelta(minutes=6))
    with session_scope(db_url) as s:
        assert repost_firing(s, rules=r, now=start + timedelta(minutes=20)) == []


def test_no_reposts_without_the_channel(db_url, write_window, run_window, clock):
    r = AlertRules.from_mapping({"for_windows": 1}, channels=["slack"])
    write_window(db_url, 0, latency_ms=250.0, features=[])
    run_window(db_url, 0, r)
    with session_scope(db_url) as s:
        assert repost_firing(s, rules=r, now=clock.now(0) + timedelta(hours=1)) == []


# --- a real Alertmanager (Debian's prometheus-alertmanager) on loopback --------------------------------

BINARY = shutil.which("prometheus-alertmanager")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def alertmanager(tmp_path):
    if BINARY is None:
        pytest.skip("prometheus-alertmanager is not installed (scripts/install-system-deps.sh installs it)")
    (tmp_path / "am.yml").write_text("route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n")
    port = _free_port()
    log = open(tmp_path / "am.log", "wb")
    proc = subprocess.Popen([BINARY, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"alertmanager exited: {(tmp_path / 'am.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    try:
        wait_until(ready, timeout=60, message="alertmanager to be ready")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _alerts(base: str, active: bool) -> list[dict]:
    query = "active=true&silenced=false&inhibited=false" if active else "active=false&silenced=false&inhibited=false"
    with urllib.request.urlopen(f"{base}/api/v2/alerts?{query}&unprocessed=true", timeout=10) as answer:
        return [a for a in json.load(answer) if a["labels"].get("model") == "credit"]


def test_a_real_alertmanager_shows_the_alert_while_firing_and_resolves_it(alertmanager):
    channel = AlertmanagerChannel(f"{alertmanager},http://127.0.0.1:9")  # the second one is down: ok if one takes it
    fired = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    iso = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    result = channel.send(render_alertmanager(message(fired_at=iso(fired))), "key-1")
    assert result.ok, result.error
    firing = wait_until(lambda: _alerts(alertmanager, active=True), timeout=30, message="the alert in Alertmanager")
    assert len(firing) == 1
    alert = firing[0]
    assert alert["labels"] == {"alertname": "driftline_data_drift", "model": "credit", "version": "3",
                               "detector": DATA_DRIFT, "feature": "income", "severity": "warning"}
    assert alert["annotations"]["dashboard"] == "http://dash:8501/?model=credit&version=3"
    assert alert["status"]["state"] == "active"
    assert datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00")) > datetime.now(timezone.utc)

    resolved_at = iso(datetime.now(timezone.utc) - timedelta(seconds=1))
    result = channel.send(render_alertmanager(message("resolve", fired_at=iso(fired), resolved_at=resolved_at)),
                          "key-2")
    assert result.ok, result.error
    wait_until(lambda: not _alerts(alertmanager, active=True), timeout=30, message="the alert to leave the active list")
    channel.http.close()
