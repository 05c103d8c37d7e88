"""The README and docs/configuration.md stay true: the thresholds table is generated from driftline/defaults.py,
and the README names every command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from driftline.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def test_thresholds_table_matches_defaults():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "thresholds_table.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_thresholds_table_lives_in_the_configuration_reference():
    assert "<!-- thresholds:start -->" in (ROOT / "docs" / "configuration.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "<!-- thresholds:start -->" not in readme and "docs/configuration.md" in readme


def test_readme_shows_the_two_commands_and_every_cli_command():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    missing = [name for name in COMMANDS if f"driftline {name}" not in text]
    assert missing == []


def test_the_first_ten_minutes_name_the_metrics_ports_that_up_serves_and_prometheus_scrapes():
    import re

    from driftline import defaults
    from driftline.config import Settings

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Your first ten minutes"):text.index("## Monitor your own model")]
    settings = Settings()
    ports = {"worker": settings.worker_port, "collector": settings.collector_metrics_port,
             "scheduler": defaults.UP_SCHEDULER_METRICS_PORT}
    scrape = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    for component, port in ports.items():
        assert re.search(rf"^\| {component} \| http://127\.0\.0\.1:{port}/metrics \|", section, re.M), component
        assert f'"127.0.0.1:{port}"' in scrape, component
    for path in ("deploy/prometheus/prometheus.yml", "deploy/grafana/driftline-monitoring.json",
                 "deploy/grafana/driftline-serving.json"):
        assert path in section and (ROOT / path).is_file()
