"""One registry of alert channels: each follows the Channel protocol, and the docs describe exactly what it holds."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from driftline.alerts import AlertRules, Channels
from driftline.alerts.channels.protocol import Channel
from driftline.alerts.channels.registry import CHANNEL_TYPES, NOTIFY_CHANNELS, configured_channels, default_routes
from driftline.alerts.severities import SEVERITIES
from driftline.config import Settings
from driftline.store.db import session_scope
from driftline.store.models import Notification

ROOT = Path(__file__).resolve().parents[2]
ALERTS_MD = (ROOT / "docs" / "alerts.md").read_text()
CONFIGURATION_MD = (ROOT / "docs" / "configuration.md").read_text()
EXTENDING_MD = (ROOT / "docs" / "extending.md").read_text()
MEMBERS = ("name", "title", "settings", "min_severity", "check", "from_settings", "render", "send", "close")


def channel_table() -> dict[str, tuple[list[str], str]]:
    """docs/alerts.md's channel table: name -> (settings, lowest severity by default)."""
    section = ALERTS_MD.split("### Channels", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = (re.findall(r"`(\w+)`", cells[2]), cells[3])
    return rows


def test_the_protocol_names_every_member_a_channel_has_and_every_registered_channel_has_them():
    declared = set(Channel.__annotations__) | {n for n in vars(Channel) if not n.startswith("_")}
    assert declared == set(MEMBERS)
    for name, channel in CHANNEL_TYPES.items():
        assert channel.name == name and channel.title and channel.settings, name
        assert all(callable(getattr(channel, member)) for member in MEMBERS[4:]), name
        assert channel.min_severity is None or channel.min_severity in SEVERITIES, name


def test_the_channel_table_of_the_alerts_docs_is_the_registry():
    table = channel_table()
    assert list(table) == list(CHANNEL_TYPES)
    for name, channel in CHANNEL_TYPES.items():
        settings, severity = table[name]
        assert settings == list(channel.settings), name
        assert severity == (channel.min_severity or "(none)"), name
    assert default_routes() == {name: table[name][1] for name in NOTIFY_CHANNELS}


def test_every_channel_setting_is_a_setting_documented_in_the_configuration_reference():
    secrets = CONFIGURATION_MD.split("Secrets (", 1)[1].split(")", 1)[0]
    for channel in CHANNEL_TYPES.values():
        for setting in channel.settings:
            assert setting in Settings.model_fields, setting
            assert f"`{setting}`" in CONFIGURATION_MD.split("## Settings", 1)[1], setting
            if Settings.model_fields[setting].annotation in (SecretStr, SecretStr | None):
                assert f"`{setting}`" in secrets, f"{setting} is a secret: list it with the others"


def test_the_extending_guide_names_the_protocol_and_the_registry():
    section = EXTENDING_MD.split("## Adding an alert channel", 1)[1].split("\n## ", 1)[0]
    for member in MEMBERS:
        assert f"`{member}" in section, member
    assert "CHANNEL_TYPES" in section and "driftline.alerts.channels.protocol" in section


def test_only_the_retraining_webhook_receives_no_alerts_and_an_unknown_sender_is_refused():
    assert set(CHANNEL_TYPES) - set(NOTIFY_CHANNELS) == {"retrain"}
    with pytest.raises(ValueError, match="unknown alert channel.*sms"):
        Channels(sms=object())
    assert Channels().enabled() == [] and Channels().teams is None


def test_a_page_is_queued_for_every_configured_channel_as_that_channel_renders_it(sqlite_url, write_window, run_window):
    settings = Settings(teams_webhook_url="https://example.invalid/workflows/x?sig=s", smtp_host="127.0.0.1",
                        smtp_from="driftline@example.com", email_to="oncall@example.com")
    assert configured_channels(settings) == ["teams", "email"]
    rules = AlertRules.from_mapping({"detectors": {"latency": {"for_windows": 1}}},
                                    channels=configured_channels(settings))
    write_window(sqlite_url, 0, latency_ms=250.0)
    run_window(sqlite_url, 0, rules)
    with session_scope(sqlite_url) as s:
        rows = {n.channel: n for n in s.query(Notification)}
        assert sorted(rows) == ["email", "teams"] and {n.kind for n in rows.values()} == {"trigger"}
        assert rows["teams"].payload["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
        assert rows["email"].payload["subject"].startswith("[FIRING] credit v1: latency SLO breach")
