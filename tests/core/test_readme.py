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
