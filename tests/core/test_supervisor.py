"""The supervisor behind `driftline up`: prefixed logs, restarts with backoff, rounds, clean stop."""
from __future__ import annotations

import io
import sys
import threading
from typing import Callable

from driftline.supervisor import Component, Supervisor
from tests.support.waiting import wait_until


def run_until(supervisor: Supervisor, condition: Callable[[], bool], what: str) -> None:
    """Supervise (in a thread) until `condition()` holds, then stop everything, as `driftline up` ends."""
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), name="supervisor", daemon=True)
    thread.start()
    try:
        wait_until(condition, message=what)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the supervisor did not stop within 30 s"


def _dead(pid: int) -> bool:
    """Gone, or only a zombie (already dead, not yet reaped by init)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "Z" in next(line for line in fh if line.startswith("State:"))
    except FileNotFoundError:
        return True


def test_logs_are_prefixed_and_a_crashed_service_is_restarted():
    out = io.StringIO()
    supervisor = Supervisor(out=out, colors=False)
    crasher = supervisor.add(Component("crasher", [sys.executable, "-c", "print('hello'); raise SystemExit(3)"]))
    supervisor.start_all()
    run_until(supervisor, lambda: crasher.restarts >= 1 and out.getvalue().count("| hello") >= 2,
              "the crasher to run twice")
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
    run_until(supervisor, lambda: once.finished and out.getvalue().count("rounds    | round") >= 2,
              "the one-shot job to finish and two rounds")
    assert once.finished
    assert "once      | finished (exit code 0)" in out.getvalue()
    assert out.getvalue().count("rounds    | round") >= 2 and rounds.restarts == 0


def test_stop_all_terminates_children_and_their_children():
    out = io.StringIO()
    supervisor = Supervisor(out=out, colors=False)
    # A service that starts a grandchild: stopping must reach the whole process group (both sleep until stopped).
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print(p.pid, flush=True); time.sleep(60)")
    service = supervisor.add(Component("svc", [sys.executable, "-c", code]))
    supervisor.start_all()
    wait_until(lambda: "svc" in out.getvalue(), timeout=10, interval=0.1,
               message="the service to print its child's pid")
    grandchild = int(out.getvalue().split("| ")[1].split()[0])
    process = service.process
    supervisor.stop_all()
    assert process.poll() is not None
    wait_until(lambda: _dead(grandchild), timeout=10, message=f"the grandchild {grandchild} to die")
