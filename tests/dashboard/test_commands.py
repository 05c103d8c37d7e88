"""`driftline dashboard` refuses clearly when there is no store, and serves only on loopback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from driftline.dashboard.commands import streamlit_argv

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([DRIFTLINE, "dashboard", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRIFTLINE_HOME": os.devnull})


def test_a_missing_store_is_one_clear_line(tmp_path):
    result = run("--db", f"sqlite:///{tmp_path / 'nothing.db'}", "--port", "1")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "driftline db upgrade" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "nothing.db").exists()  # refusing does not create an empty store


def test_a_store_without_tables_is_one_clear_line(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    result = run("--db", f"sqlite:///{empty}")
    assert result.returncode == 1 and "driftline db upgrade" in result.stderr


def test_bad_options_are_refused():
    assert run("--port", "0").returncode == 2
    assert run("--refresh-seconds", "-1").returncode == 2


def test_streamlit_is_headless_on_loopback():
    argv = streamlit_argv(8765)
    options = dict(zip(argv[5::2], argv[6::2]))
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4].endswith("dashboard/app.py")
    assert options["--server.address"] == "127.0.0.1" and options["--server.port"] == "8765"
    assert options["--server.headless"] == "true" and options["--browser.gatherUsageStats"] == "false"


def test_the_launcher_imports_no_streamlit_code():
    """Imported outside a Streamlit server, the app's cached functions log a warning each (18 lines at start)."""
    probe = ("import sys; from driftline.dashboard.commands import streamlit_env; from driftline.config import load_settings; "
             "streamlit_env(load_settings(), 5); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit'))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert "No runtime found" not in result.stderr
