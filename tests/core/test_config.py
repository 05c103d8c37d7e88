"""Settings precedence: CLI option > environment > TOML file > default."""
from __future__ import annotations

import pytest

from driftline.config import load_settings
from driftline.errors import UserError


def test_defaults(monkeypatch):
    monkeypatch.delenv("DRIFTLINE_DB", raising=False)
    monkeypatch.delenv("DRIFTLINE_CONFIG", raising=False)
    settings = load_settings()
    assert settings.window_seconds == 60
    assert settings.db_url.startswith("sqlite:///") and settings.db_url.endswith("driftline.db")


def test_precedence(tmp_path, monkeypatch):
    toml = tmp_path / "driftline.toml"
    toml.write_text('db = "sqlite:///from-file.db"\nwindow_seconds = 30\nbootstrap_servers = "file:1"\n')
    monkeypatch.delenv("DRIFTLINE_DB", raising=False)
    settings = load_settings(toml)
    assert (settings.db, settings.window_seconds, settings.bootstrap_servers) == ("sqlite:///from-file.db", 30, "file:1")
    monkeypatch.setenv("DRIFTLINE_WINDOW_SECONDS", "15")
    monkeypatch.setenv("DRIFTLINE_DB", "sqlite:///from-env.db")
    settings = load_settings(toml)
    assert (settings.db, settings.window_seconds) == ("sqlite:///from-env.db", 15)
    settings = load_settings(toml, db="sqlite:///from-cli.db", bootstrap_servers=None)
    assert (settings.db, settings.window_seconds, settings.bootstrap_servers) == ("sqlite:///from-cli.db", 15, "file:1")


def test_bad_values_are_user_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTLINE_WINDOW_SECONDS", "soon")
    with pytest.raises(UserError, match="window_seconds"):
        load_settings()
    monkeypatch.delenv("DRIFTLINE_WINDOW_SECONDS")
    bad = tmp_path / "bad.toml"
    bad.write_text("window_seconds = [")
    with pytest.raises(UserError, match="cannot read settings"):
        load_settings(bad)
