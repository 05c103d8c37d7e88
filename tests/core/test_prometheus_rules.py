"""deploy/prometheus: the alerting rules pass `promtool check rules` and their unit tests (`promtool test rules`),
and the example scrape configuration passes `promtool check config`. promtool comes from the Debian package
`prometheus` (scripts/install-system-deps.sh installs it): without it these tests fail, saying so."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess:
    found = shutil.which("promtool")
    assert found, "promtool is missing: run scripts/install-system-deps.sh (Debian package prometheus)"
    return subprocess.run([found, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [("check", "rules", "driftline-rules.yml"),
                                  ("test", "rules", "driftline-rules.test.yml"),
                                  ("check", "config", "prometheus.yml")])
def test_promtool_accepts_the_shipped_files(args):
    result = promtool(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_rule_has_a_unit_test():
    alerts = set(re.findall(r"(?m)^\s*- alert: (\w+)", (DEPLOY / "driftline-rules.yml").read_text()))
    tested = set(re.findall(r"(?m)^\s*alertname: (\w+)", (DEPLOY / "driftline-rules.test.yml").read_text()))
    assert alerts and alerts == tested
