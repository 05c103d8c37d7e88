"""Sustained load through the whole stack: `driftline up` at a fixed request rate for a bounded time.

Run by hand: `.venv/bin/python bench/load.py [--rate 300] [--duration 180]`. Prints, every 10 s, the events
stored, the collector's lag (from its /metrics) and each process's RSS; at the end the replay's p50/p99, the
largest lag, and each process's RSS first/last/max (flat memory: last ≈ first). Asserts nothing.
A fresh home with a small trained model is made in a temporary folder; all ports are free ones on 127.0.0.1.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from sqlalchemy import func, select

from driftline.broker import free_port
from driftline.store.db import session_scope
from driftline.store.models import DetectorResult, WindowStateRecord

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
COMPONENTS = ("worker", "collector", "scheduler", "replay")


def children(pid: int) -> dict[str, int]:
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        child, _, args = line.strip().partition(" ")
        for name in COMPONENTS:
            if f"driftline.cli {name}" in args:
                found[name] = int(child)
    return found


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def collector_lag(port: int) -> int | None:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return None
    values = [float(m.group(1)) for m in re.finditer(
        r'^driftline_collector_lag_messages\{[^}]*topic="driftline.inference"[^}]*\} ([0-9.e+]+)$', text, re.M)]
    return int(sum(values)) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--duration", type=float, default=180.0)
    parser.add_argument("--window-seconds", type=int, default=15)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="driftline-load-"))
    env = {**os.environ, "DRIFTLINE_HOME": str(home)}
    for name in ("DRIFTLINE_DB", "DRIFTLINE_BOOTSTRAP_SERVERS"):
        env.pop(name, None)
    print(f"home {home}; training a small model ...", flush=True)
    subprocess.run([DRIFTLINE, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([DRIFTLINE, "train", "--size", "small"], env=env, check=True, capture_output=True)
    metrics_port = free_port()
    env |= {"DRIFTLINE_WORKER_PORT": str(free_port()), "DRIFTLINE_WORKER_GRPC_PORT": str(free_port()), "DRIFTLINE_COLLECTOR_METRICS_PORT": str(metrics_port)}
    db_url = f"sqlite:///{home / 'driftline.db'}"
    proc = subprocess.Popen([DRIFTLINE, "up", "--scenario", "none", "--no-dashboard", "--rate", str(args.rate),
                             "--duration", str(args.duration), "--window-seconds", str(args.window_seconds),
                             "--warmup", "0", "--broker-port", str(free_port())],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    samples: dict[str, list[float]] = {name: [] for name in COMPONENTS}
    lags: list[int] = []
    started = time.monotonic()
    print(f"{'t(s)':>6} {'stored':>9} {'lag':>7} " + " ".join(f"{n + ' MB':>13}" for n in COMPONENTS))
    while proc.poll() is None and time.monotonic() - started < args.duration + 240:
        time.sleep(10)
        pids = children(proc.pid)
        for name, pid in pids.items():
            value = rss_mb(pid)
            if value is not None:
                samples[name].append(value)
        lag = collector_lag(metrics_port)
        if lag is not None:
            lags.append(lag)
        try:
            with session_scope(db_url) as s:
                stored = int(s.scalar(select(func.coalesce(func.sum(WindowStateRecord.events), 0))))
        except Exception:  # the store may be busy for a moment; the next sample reads it
            stored = -1
        print(f"{time.monotonic() - started:>6.0f} {stored:>9} {lag if lag is not None else '-':>7} "
              + " ".join(f"{samples[n][-1] if samples[n] else float('nan'):>13.0f}" for n in COMPONENTS), flush=True)
    proc.wait(120)
    with session_scope(db_url) as s:
        stored = int(s.scalar(select(func.coalesce(func.sum(WindowStateRecord.events), 0))))
        p99 = sorted(v for (v,) in s.execute(select(DetectorResult.value).where(
            DetectorResult.detector == "latency", DetectorResult.metric == "p99_ms")) if v is not None)
    print(f"\nrequested {args.rate:.0f} req/s; stored {stored} events, {stored / args.duration:.0f} events/s "
          f"over the {args.duration:.0f} s of traffic")
    if p99:
        print(f"worker p99 latency per window (server side, ms): median {p99[len(p99) // 2]:.1f}, "
              f"max {p99[-1]:.1f} over {len(p99)} windows")
    print(f"collector lag: max {max(lags) if lags else '-'} messages, last {lags[-1] if lags else '-'}")
    for name in COMPONENTS:
        values = samples[name]
        if values:
            print(f"{name:>10} RSS MB: first {values[0]:.0f}, last {values[-1]:.0f}, max {max(values):.0f}")


if __name__ == "__main__":
    main()
