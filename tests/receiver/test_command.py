"""`driftline receiver` applies the worker's bind rule: loopback freely, any other address only with a token."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from driftline.listen import token_problem

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))


def test_a_non_loopback_bind_without_a_token_is_refused_naming_the_setting(sqlite_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLINE_")}
    result = subprocess.run([DRIFTLINE, "receiver", "--host", "0.0.0.0", "--port", "0", "--db", sqlite_url],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "DRIFTLINE_RECEIVER_TOKEN" in result.stderr and "0.0.0.0" in result.stderr


@pytest.mark.parametrize("host, token, refused", [
    ("127.0.0.1", None, False), ("localhost", None, False), ("::1", None, False),
    ("0.0.0.0", None, True), ("10.0.0.5", "", True), ("10.0.0.5", "s3cret", False),
])
def test_the_bind_rule(host, token, refused):
    assert (token_problem(host, token, "X") is not None) is refused
