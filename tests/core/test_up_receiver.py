"""`driftline up` runs the payload-logger receiver on loopback; a busy receiver port is refused in one line."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from driftline.broker import free_port

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))


def test_up_refuses_a_receiver_port_in_use_naming_the_ways_out(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "DRIFTLINE_HOME": str(tmp_path / "home"),
               "DRIFTLINE_SCHEDULER_METRICS_PORT": str(free_port()), "DRIFTLINE_RECEIVER_PORT": str(port)}
        result = subprocess.run([DRIFTLINE, "up", "--duration", "1"], capture_output=True, text=True, timeout=120,
                                env=env)
    assert result.returncode != 0
    assert f"port {port} (the receiver) is in use" in result.stderr
    assert "--receiver-port" in result.stderr and "--no-receiver" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "home").exists()
