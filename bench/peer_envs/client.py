"""Talk to a benchmark peer that lives in its own venv (Alibi Detect, NannyML): one JSON request a line.

The peer's worker script (alibi_mmd.py, nannyml_drift.py beside this file) runs under the peer venv's interpreter
and answers each request with one JSON line; the benchmark sends it files it wrote (.npy, .parquet), so every
method judges the same windows in one run while the peers' dependencies never meet driftline's.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

HERE = Path(__file__).resolve().parent


class PeerProcess:
    def __init__(self, python: str, script: str, *args: str) -> None:
        if not Path(python).exists():
            sys.exit(f"{python} does not exist: create the peer's venv first (bash bench/peer_envs/*.sh)")
        self.process = subprocess.Popen([python, str(HERE / script), *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer worker {self.process.args} ended (exit {self.process.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the peer worker answered: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def serve(handle: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
    """The worker's side of the protocol: each stdin line a request, `handle`'s answer one stdout line (an
    error answer where it returns None: a request it does not know, or one before its reference was fitted)."""
    for line in sys.stdin:
        request = json.loads(line)
        answer = handle(request)
        if answer is None:
            answer = {"error": f"unknown request or no reference fitted: {sorted(request)}"}
        print(json.dumps(answer), flush=True)
    return 0
