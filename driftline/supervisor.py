"""Run several commands as supervised child processes with prefixed logs (for `driftline up`).

Each child gets its own process group and a parent-death signal, so neither Ctrl-C
in a terminal nor the supervisor dying leaves anything behind. A crashed child is
restarted with exponential backoff; stopping goes in reverse start order with
SIGTERM, then SIGKILL after a grace period.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, TextIO

PR_SET_PDEATHSIG = 1
RESTART_BACKOFF_MAX_S = 30.0
# A child that ran this long before crashing is considered healthy again: backoff resets.
HEALTHY_AFTER_S = 60.0


def set_parent_death_signal(signum: int = signal.SIGTERM) -> None:
    """Linux: this process gets `signum` when the thread that started it ends (elsewhere: nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    except OSError:
        pass


def child_python_env() -> dict[str, str]:
    """This process's environment, with the code it runs first on a Python child's path.

    A child started as `python -c "from collector... import ..."` must import this
    checkout's code even where the installed package points elsewhere (a clean clone
    run beside another one, a benchmark of an older commit).
    """
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def start_python_child(code: str, *args: str, **popen_options: Any) -> tuple[subprocess.Popen, Connection]:
    """A fresh Python interpreter running `code`, joined to this process by a socket pair.

    The child finds its end's file descriptor in ``sys.argv[1]`` (then `args`) and this
    checkout's code first on its path. A fresh interpreter rather than fork (the callers
    run threads, Kafka clients, torch) or multiprocessing's spawn (it re-runs the caller's
    ``__main__``, which for a script that builds a worker means a second server).
    """
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()), *args],
                                   pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=child_python_env(),
                                   **popen_options)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()  # the child holds the only other end: its exit means end-of-file here
    return process, Connection(ours.detach())


def die_with_parent() -> None:
    """For Popen(preexec_fn=...): the child gets SIGTERM when its parent dies, in a session of its own."""
    set_parent_death_signal(signal.SIGTERM)
    os.setsid()


@dataclass
class Component:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    restart: bool = True  # restart when it exits for any reason (services); False for one-shot jobs
    repeat: bool = False  # a job that runs in rounds: a clean exit starts the next round at once
    stop_timeout_s: float = 10.0
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    next_start_at: float | None = None
    finished: bool = False


class Supervisor:
    def __init__(self, out: TextIO = sys.stdout, colors: bool | None = None):
        self.components: list[Component] = []
        self.out = out
        self.colors = out.isatty() if colors is None else colors
        self._lock = threading.Lock()
        self._width = 10

    # --- logging -------------------------------------------------------------------
    def log(self, name: str, line: str) -> None:
        prefix = f"{name:<{self._width}}|"
        if self.colors:
            color = 31 + (sum(map(ord, name)) % 6)
            prefix = f"\033[{color}m{prefix}\033[0m"
        with self._lock:
            self.out.write(f"{prefix} {line}\n")
            self.out.flush()

    def _pump(self, component: Component, stream) -> None:  # noqa: ANN001 - a text pipe
        for line in stream:
            self.log(component.name, line.rstrip("\n"))
        stream.close()

    # --- lifecycle -----------------------------------------------------------------
    def add(self, component: Component) -> Component:
        self.components.append(component)
        self._width = max(self._width, len(component.name) + 1)
        return component

    def start(self, component: Component) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **component.env}
        component.process = subprocess.Popen(
            component.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, bufsize=1, preexec_fn=die_with_parent)
        component.started_at = time.monotonic()
        component.next_start_at = None
        threading.Thread(target=self._pump, args=(component, component.process.stdout), daemon=True,
                         name=f"log-{component.name}").start()

    def start_all(self) -> None:
        for component in self.components:
            if component.process is None:
                self.start(component)

    def poll(self) -> None:
        """Restart crashed services (with backoff); note finished one-shot jobs."""
        now = time.monotonic()
        for c in self.components:
            if c.finished:
                continue
            if c.process is not None and c.process.poll() is not None:
                code = c.process.returncode
                ran_for = now - c.started_at
                c.process = None
                if not c.restart:
                    c.finished = True
                    self.log(c.name, f"finished (exit code {code})")
                    continue
                if code == 0 and c.repeat:
                    c.next_start_at = now + 1.0
                    self.log(c.name, "finished; starting the next round")
                    continue
                if ran_for > HEALTHY_AFTER_S:
                    c.restarts = 0
                delay = min(RESTART_BACKOFF_MAX_S, 2.0 ** c.restarts)
                c.restarts += 1
                c.next_start_at = now + delay
                self.log(c.name, f"exited with code {code}; restarting in {delay:.0f}s (restart #{c.restarts})")
            elif c.process is None and c.next_start_at is not None and now >= c.next_start_at:
                self.start(c)

    def stop_all(self) -> None:
        """SIGTERM in reverse start order, wait, then SIGKILL what is left."""
        for c in reversed(self.components):
            c.finished = True
            process = c.process
            if process is None or process.poll() is not None:
                continue
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                process.wait(c.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.log(c.name, f"did not stop within {c.stop_timeout_s:.0f}s; killing")
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(5)
            self.log(c.name, "stopped")

    def run(self, stop: threading.Event, deadline: float | None = None,
            on_tick: Callable[[], None] | None = None) -> None:
        """Supervise until `stop` is set or the monotonic `deadline` passes, then stop everything."""
        try:
            while not stop.wait(0.5):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                self.poll()
                if on_tick is not None:
                    on_tick()
        finally:
            self.stop_all()
