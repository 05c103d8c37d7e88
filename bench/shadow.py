"""Benchmark of shadow rollouts: production requests/s and latency with and without a shadow candidate.

    .venv/bin/python bench/shadow.py [--device auto|cpu|cuda] [--seconds 12] [--rounds 6]
                                     [--concurrency 8,32] [--share 1.0] [--json results.json]

One real `driftline worker` (cache off, events logged to an embedded broker, as in production) serves
version 1 of a default-size model; version 2 is a second default-size model. Between rounds the
rollout plan is switched, through the store, between none and `shadow` of version 2 on `--share`
of requests, and each round waits until the worker's GET /model shows the plan it should serve. So
the cost compares one worker process with itself, rounds alternating (off first in even rounds, on
first in odd ones). Load: bench/worker.py's closed-loop client (`concurrency` keep-alive connections,
each sending the next request when the previous answer arrives). Printed per level: requests/s,
client-side p50/p99 with the shadow off and on, and the shadow answers and dropped copies counted by
the worker (/metrics) during the "on" rounds. Figures are printed, not asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftline.broker import EmbeddedBroker, free_port  # noqa: E402
from driftline.rollouts import shadow_plan  # noqa: E402
from driftline.store import db as store_db  # noqa: E402
from driftline.store.rollouts import clear_plan, set_plan  # noqa: E402
from driftline.worker.dataset import generate_inputs  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_worker", ROOT / "bench" / "worker.py")
bench_worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_worker)

MODEL = "credit-default"
SHADOW_METRICS = ("driftline_worker_shadow_answers_total", "driftline_worker_shadow_dropped_total")


def switch(db_url: str, port: int, share: float | None) -> None:
    """Set (share) or clear (None) the shadow plan, then wait until the worker serves it."""
    with store_db.session_scope(db_url) as session:
        if share is None:
            clear_plan(session, MODEL)
        else:
            set_plan(session, shadow_plan(MODEL, "2", share))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rollout = httpx.get(f"http://127.0.0.1:{port}/model").json()["rollout"]
        if (rollout is None) == (share is None) and (rollout is None or rollout["loaded"] == ["2"]):
            return
        time.sleep(0.05)
    raise SystemExit("the worker did not pick the plan up within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per level, on and off each")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds the seconds are split into")
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--share", type=float, default=1.0, help="share of requests shadowed")
    parser.add_argument("--train-rows", type=int, default=2_000)
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    bodies = [orjson.dumps({"features": row}) for row in generate_inputs(5_000, seed=99).to_dict("records")]
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    results: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(port=free_port()) as broker:
        db_url = f"sqlite:///{tmp}/driftline.db"
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": db_url,
               "DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        for seed in (1, 2):  # version 1 (production) and version 2 (the candidate)
            subprocess.run([*bench_worker.DRIFTLINE, "train", "--size", "default", "--rows", str(args.train_rows),
                            "--epochs", "1", "--seed", str(seed)], env=env, check=True, stdout=subprocess.DEVNULL)
        flags = ["--max-batch-size", "64", "--max-wait-ms", "2", "--events", "--alias-poll", "0.2"]
        with bench_worker.worker_process(env, flags, args.device) as (port, _pid):
            bench_worker.settle({"worker": (port, _pid, None)}, bodies)
            for level in levels:
                figures = {state: {"latencies": [], "rps_rounds": []} for state in ("off", "on")}
                shadow = dict.fromkeys(SHADOW_METRICS, 0.0)
                for round_ in range(args.rounds):
                    for state in (("off", "on") if round_ % 2 == 0 else ("on", "off")):
                        switch(db_url, port, args.share if state == "on" else None)
                        before = bench_worker.metric_values(port, SHADOW_METRICS)
                        lat, _errors, _done = asyncio.run(bench_worker.closed_loop(port, level,
                                                                                   args.seconds / args.rounds, bodies))
                        after = bench_worker.metric_values(port, SHADOW_METRICS)
                        if state == "on":
                            for name in SHADOW_METRICS:
                                shadow[name] += after[name] - before[name]
                        figures[state]["latencies"] += lat
                        figures[state]["rps_rounds"].append(len(lat) / (args.seconds / args.rounds))
                results[level] = {
                    state: {"rps": float(np.mean(f["rps_rounds"])),
                            "p50_ms": float(np.percentile(f["latencies"], 50) * 1000),
                            "p99_ms": float(np.percentile(f["latencies"], 99) * 1000),
                            "requests": len(f["latencies"])}
                    for state, f in figures.items()}
                results[level]["shadow"] = {"answers": shadow[SHADOW_METRICS[0]],
                                            "dropped": shadow[SHADOW_METRICS[1]]}
    print(f"shadow benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, device "
          f"{args.device}, {args.seconds:g} s per state and level in {args.rounds} rounds, share {args.share:g}, "
          f"cache off, events on, load average before {load_before}")
    print(f"{'level':<8}{'state':<8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for level, by_state in results.items():
        for state in ("off", "on"):
            r = by_state[state]
            print(f"c={level:<6}{state:<8}{r['rps']:>9.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
        off, on, sh = by_state["off"], by_state["on"], by_state["shadow"]
        offered = sh["answers"] + sh["dropped"]
        print(f"  shadow on: {100 * (on['rps'] / off['rps'] - 1):+.1f}% requests/s, p99 "
              f"{100 * (on['p99_ms'] / off['p99_ms'] - 1):+.1f}%; shadow answers {int(sh['answers'])}, dropped "
              f"{int(sh['dropped'])} ({100 * sh['dropped'] / offered if offered else 0:.1f}% of the copies)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
