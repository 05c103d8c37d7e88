"""The supervisor behind `driftline up`: prefixed logs, restarts with backoff, rounds, clean stop."""
from __future__ import annotations

import io
import sys
import threading
import time

from driftline.supervisor import Component, Supervisor


def run_for(supervisor: Supervisor, seconds: float) -> None:
    stop = threading.Event()
    supervisor.run(stop, deadline=time.monotonic() + seconds)


def test_logs_are_prefixed_and_a_crashed_service_is_restarted():
    out = io.StringIO()
    supervisor = Supervisor(out=out, colors=False)
    crasher = supervisor.add(Component("crasher", [sys.executable, "-c", "print('hello'); raise SystemExit(3)"]))
    supervisor.start_all()
    run_for(supervisor, 2.5)
    text = out.getvalue()
    assert "crasher   | hello" in text
    assert "exited with code 3; restarting in 1s" in text
    assert crasher.restarts >= 1 and text.count("| hello") >= 2


def test_one_shot_jobs_finish_and_rounds_repeat():
    out = io.StringIO()
    supervisor = Supervisor(out=out, colors=False)
    once = supervisor.add(Component("once", [sys.executable, "-c", "pass"], restart=False))
    rounds = supervisor.add(Component("rounds", [sys.executable, "-c", "print('round')"], restart=True, repeat=True))
    supervisor.start_all()
    run_for(supervisor, 3.5)
    assert once.finished
    assert "once      | finished (exit code 0)" in out.getvalue()
    assert out.getvalue().count("rounds    | round") >= 2 and rounds.restarts == 0


def test_stop_all_terminates_children_and_their_children():
    out = io.StringIO()
    supervisor = Supervisor(out=out, colors=False)
    # A service that starts a grandchild: stopping must reach the whole process group.
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(p.pid, flush=True); time.sleep(60)")
    service = supervisor.add(Component("svc", [sys.executable, "-c", code]))
    supervisor.start_all()
    deadline = time.monotonic() + 10
    while "svc" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(out.getvalue().split("| ")[1].split()[0])
    process = service.process
    supervisor.stop_all()
    assert process.poll() is not None
    time.sleep(0.5)
    try:
        with open(f"/proc/{grandchild}/status") as fh:
            state = next(line for line in fh if line.startswith("State:"))
        assert "Z" in state  # only a zombie (already dead, not yet reaped by init) may remain
    except FileNotFoundError:
        pass
