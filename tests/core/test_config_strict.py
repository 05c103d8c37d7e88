"""Strict configuration: a typo in the TOML file, a section or a DRIFTLINE_* variable is an error naming it
and the likely intended name; numbers are range-checked; a channel routed without its endpoint is an error;
a per-feature threshold for a feature no baseline has is a warning when the scheduler starts."""
from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from driftline.alerts import AlertRules, load_rules
from driftline.baseline import compute_baseline
from driftline.config import OTHER_ENVIRONMENT_VARIABLES, Settings, check_environment, load_settings
from driftline.errors import UserError
from driftline.scheduler.evaluation_config import EvaluationConfig
from driftline.scheduler.jobs import SchedulerJobs
from driftline.toml_sections import SECTIONS
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, ModelVersion

ROOT = Path(__file__).resolve().parents[2]
# Misspelt names this file and the docs use on purpose, as examples of what is refused.
DELIBERATE_TYPOS = {"DRIFTLINE_DB_URL", "DRIFTLINE_WINDOW_SECOND", "DRIFTLINE_SLACK_WEBHOOK"}


@pytest.fixture
def toml(tmp_path):
    path = tmp_path / "driftline.toml"

    def write(text: str) -> Path:
        path.write_text(text)
        return path

    return write


def test_a_misspelt_routing_key_is_an_error_not_a_silent_end_to_paging(toml):
    path = toml('pagerduty_routng_key = "R0UTING-KEY"\n[alerts.channels]\npagerduty = "error"\n')
    with pytest.raises(UserError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert "unknown setting 'pagerduty_routng_key'" in message
    assert "did you mean 'pagerduty_routing_key'?" in message
    assert "R0UTING-KEY" not in message  # the value may be a secret


def test_an_unknown_section_is_named_with_the_closest_section(toml):
    with pytest.raises(UserError, match=re.escape("unknown section [drfit]; did you mean [drift]?")):
        load_settings(toml("[drfit]\npsi = 0.3\n"))
    with pytest.raises(UserError, match=re.escape("unknown section [pager]")):
        load_settings(toml("[pager]\nkey = 1\n"))


def test_every_known_section_loads(toml):
    settings = load_settings(toml("window_seconds = 30\n" + "".join(f"[{name}]\n" for name in SECTIONS)))
    assert settings.window_seconds == 30


def test_a_nested_typo_is_named_with_its_closest_key(toml):
    settings = load_settings(toml("[drift.features.income]\npsii = 0.3\n"))
    with pytest.raises(UserError, match=re.escape("'features.income.psii' (did you mean 'psi'?)")):
        EvaluationConfig.from_settings(settings)
    settings = load_settings(toml('[alerts.channels]\npagerdty = "error"\n'))
    with pytest.raises(UserError, match=re.escape("unknown channel 'pagerdty'; did you mean 'pagerduty'?")):
        load_rules(settings, settings.config_path)


def test_an_unknown_environment_variable_is_named_with_the_setting_it_resembles(monkeypatch):
    monkeypatch.setenv("DRIFTLINE_DB_URL", "postgresql+psycopg://u:pw@db/x")
    with pytest.raises(UserError, match=re.escape("unknown environment variable DRIFTLINE_DB_URL: no setting has "
                                                  "that name; did you mean DRIFTLINE_DB?")):
        load_settings()
    monkeypatch.delenv("DRIFTLINE_DB_URL")
    monkeypatch.setenv("driftline_window_second", "30")  # names are case-insensitive, as the settings' are
    with pytest.raises(UserError, match="driftline_window_second.*did you mean DRIFTLINE_WINDOW_SECONDS"):
        load_settings()


@pytest.mark.parametrize("name", sorted(OTHER_ENVIRONMENT_VARIABLES))
def test_variables_the_project_reads_besides_the_settings_are_not_typos(monkeypatch, name):
    monkeypatch.setenv(name, "1")
    check_environment()
    monkeypatch.setenv("DRIFTLINE_SLACK_WEBHOOK_URL", "https://hooks.example/x")  # a setting
    check_environment()


def test_every_driftline_variable_named_in_the_repository_is_known():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    known = {f"DRIFTLINE_{name.upper()}" for name in Settings.model_fields} | OTHER_ENVIRONMENT_VARIABLES
    named: dict[str, str] = {}
    for file in files:
        path = ROOT / file
        if path.suffix not in {".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".cfg", ""} or not path.is_file():
            continue
        for name in re.findall(r"\bDRIFTLINE_[A-Z][A-Z0-9_]*", path.read_text(errors="replace")):
            named.setdefault(name, file)
    unknown = {name: file for name, file in named.items() if name not in known | DELIBERATE_TYPOS}
    assert not unknown, f"add these to Settings or config.OTHER_ENVIRONMENT_VARIABLES: {unknown}"


@pytest.mark.parametrize(("text", "setting"), [
    ("window_seconds = 0\n", "window_seconds"),
    ("allowed_lateness_seconds = -5\n", "allowed_lateness_seconds"),
    ("topic_partitions = 0\n", "topic_partitions"),
    ("worker_port = 70000\n", "worker_port"),
])
def test_numbers_out_of_range_are_refused(toml, text, setting):
    with pytest.raises(UserError, match=f"invalid setting {setting}: Input should be (greater|less) than"):
        load_settings(toml(text))


def test_out_of_range_environment_values_are_refused(monkeypatch):
    monkeypatch.setenv("DRIFTLINE_WINDOW_SECONDS", "0")
    with pytest.raises(UserError, match="invalid setting window_seconds"):
        load_settings()


@pytest.mark.parametrize("text", [
    "[drift.features.income]\npsi = -0.1\n",
    '[drift.models."credit-default"]\nalpha = 1.5\n',
    "[drift]\ndataset_drift_share = 0\n",
    '[skew.models."credit-default"]\nparity_mismatch_rate = -1\n',
    '[latency.models."credit-default"]\np99_ms = -3\n',
])
def test_section_numbers_are_range_checked_when_read_also_per_feature_and_per_model(toml, text):
    with pytest.raises(UserError):
        EvaluationConfig.from_settings(load_settings(toml(text)))


def test_a_channel_routed_without_its_endpoint_is_an_error():
    with pytest.raises(UserError, match=r"routes 'error' alerts to pagerduty, but pagerduty_routing_key is not "
                                        r"set \(DRIFTLINE_PAGERDUTY_ROUTING_KEY\)"):
        AlertRules.from_mapping({"channels": {"pagerduty": "error"}}, channels=["slack"])
    # switched off on purpose, or left to the defaults: a channel without an endpoint is simply off
    assert AlertRules.from_mapping({"channels": {"pagerduty": "off"}}, channels=["slack"]).channels == {"slack": "info"}
    assert AlertRules.from_mapping(None, channels=["slack"]).channels == {"slack": "info"}


# --- the scheduler's start -----------------------------------------------------------------------

@pytest.fixture
def registered(db_url):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"income": rng.normal(50, 10, 500), "region": rng.choice(["north", "south"], 500)})
    baseline = compute_baseline(frame, predictions=rng.uniform(size=500))
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=500, summary=baseline.to_dict()))
    return db_url


def test_a_threshold_for_a_feature_no_baseline_has_is_a_warning_at_start(registered, toml, caplog):
    path = toml('[drift.features.incme]\npsi = 0.3\n[drift.features.income]\npsi = 0.3\n'
                '[drift.models.m.features.region]\npsi = 0.3\n[drift.models.m.features.age]\npsi = 0.3\n')
    with caplog.at_level(logging.WARNING, logger="driftline.scheduler"):
        SchedulerJobs(load_settings(path, db=registered))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("[drift.features.incme]" in w and "did you mean 'income'?" in w for w in warnings), warnings
    assert any("[drift.models.\"m\".features.age]" in w for w in warnings), warnings
    assert not any("features.income]" in w or "features.region]" in w for w in warnings), warnings


def test_the_scheduler_says_at_start_which_channels_are_live(sqlite_url, toml, caplog):
    path = toml('[alerts.channels]\nslack = "warning"\n')
    with caplog.at_level(logging.INFO, logger="driftline.scheduler"):
        SchedulerJobs(load_settings(path, db=sqlite_url, slack_webhook_url="https://hooks.example/s",
                                    pagerduty_routing_key="k" * 32))
    assert "alert channels: slack from warning, pagerduty from error" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="driftline.scheduler"):
        SchedulerJobs(load_settings(db=sqlite_url))
    assert "alert channels: none" in caplog.text


# --- driftline config check ----------------------------------------------------------------------

def config_check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("DRIFTLINE_")}
    return subprocess.run([str(Path(sys.executable).with_name("driftline")), "config", "check", *args],
                          capture_output=True, text=True, timeout=120, env={**clean, **(env or {})})


def test_config_check_prints_the_effective_settings_with_secrets_masked(toml):
    path = toml('window_seconds = 30\npagerduty_routing_key = "PD-SECRET-123456"\n'
                'db = "postgresql+psycopg://driftline:DB-PASSWORD@db:5432/x"\n'
                '[alerts.channels]\npagerduty = "warning"\n[drift]\npsi = 0.3\n')
    result = config_check("--config", str(path), env={"DRIFTLINE_SLACK_WEBHOOK_URL": "https://hooks.example/T0/SLACK-SECRET"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "valid (sections: [drift], [alerts])" in out
    assert "alert channels: slack from info, pagerduty from warning" in out
    assert "window_seconds = 30  # file" in out
    assert 'pagerduty_routing_key = "***"  # file' in out
    assert 'slack_webhook_url = "***"  # environment' in out
    assert "topic_partitions = 4  # default" in out
    assert 'db = "postgresql+psycopg://db:5432/x"  # file' in out  # URL credentials dropped (driftline.redact)
    for secret in ("PD-SECRET-123456", "DB-PASSWORD", "SLACK-SECRET"):
        assert secret not in out + result.stderr


@pytest.mark.parametrize(("text", "env", "message"), [
    ('pagerduty_routng_key = "k"\n', {}, "did you mean 'pagerduty_routing_key'?"),
    ("[alerts]\nfor_window = 3\n", {}, "unknown key 'for_window' (did you mean 'for_windows'?)"),
    ('[alerts.channels]\npagerduty = "error"\n', {}, "pagerduty_routing_key is not set"),
    ("window_seconds = 0\n", {}, "invalid setting window_seconds"),
    ("", {"DRIFTLINE_DB_URL": "sqlite:///x.db"}, "did you mean DRIFTLINE_DB?"),
    ("[retention]\nresult_days = -1\n", {}, "[retention] result_days"),
])
def test_config_check_fails_with_the_problem_named(toml, text, env, message):
    result = config_check("--config", str(toml(text)), env=env)
    assert result.returncode == 1, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_config_check_without_a_file_checks_the_environment_and_defaults():
    result = config_check()
    assert result.returncode == 0, result.stderr
    assert "no config file: valid" in result.stdout and "alert channels: none" in result.stdout
