"""Benchmark of the inference worker: requests/s and latency with and without dynamic batching and event logging.

    .venv/bin/python bench/worker.py [--device auto|cpu|cuda] [--seconds 5] [--concurrency 1,8,32,128]
                                     [--json results.json]

Three real `driftline worker` processes run side by side on one trained model, all with
the prediction cache off (every request reaches the model):

- batching:            --max-batch-size 64 --max-wait-ms 2, no event logging
- batch size 1:        --max-batch-size 1, no event logging
- batching + logging:  as "batching", with events sent to an embedded Kafka broker

For each concurrency level the three are measured in turn, in several interleaved rounds
(so a change in background load hits all three alike), by a closed-loop client: `concurrency`
keep-alive connections, each sending the next request as soon as the previous answer
arrives. The client is a minimal HTTP/1.1 writer/reader on asyncio streams rather than
httpx, because on a small machine the client shares the CPU with the worker and httpx's
per-request cost (~0.3 ms of Python) would be measured as the worker's.
Figures are printed, not asserted. Whole run: about 2 minutes at the defaults.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driftline.broker import EmbeddedBroker, free_port, wait_for_port  # noqa: E402
from worker.dataset import generate_inputs  # noqa: E402

DRIFTLINE = str(Path(sys.executable).with_name("driftline"))
CONFIGS = {
    "batching": ["--max-batch-size", "64", "--max-wait-ms", "2", "--no-events"],
    "batch size 1": ["--max-batch-size", "1", "--no-events"],
    "batching + logging": ["--max-batch-size", "64", "--max-wait-ms", "2", "--events"],
}
WARMUP_S = 0.5  # per round: connections opened, batches at steady size


@contextlib.contextmanager
def worker_process(env: dict[str, str], flags: list[str], device: str) -> Iterator[tuple[int, int]]:
    port = free_port()
    process = subprocess.Popen([DRIFTLINE, "worker", "--port", str(port), "--device", device, "--cache-size", "0",
                                "--no-labels", "--log-level", "warning", *flags], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        if not wait_for_port("127.0.0.1", port, 120, process):
            raise SystemExit(f"worker did not start: {process.stderr.read().decode()[-2000:]}")
        yield port, process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc; 0 where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def closed_loop(port: int, concurrency: int, seconds: float, bodies: list[bytes]) -> tuple[list[float], int, int]:
    """`concurrency` keep-alive connections sending back to back for `seconds` after a warm-up.

    Returns the latencies (s) of the requests sent after the warm-up, how many of those
    were not 200, and how many requests were answered in all (warm-up included).
    """
    head = b"POST /predict HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    start = time.perf_counter()
    measure_from, stop_at = start + WARMUP_S, start + WARMUP_S + seconds
    latencies: list[float] = []
    errors = answered = 0

    async def connection(offset: int) -> None:
        nonlocal errors, answered
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        k = offset
        try:
            while True:
                sent = time.perf_counter()
                if sent >= stop_at:
                    break
                body = bodies[k % len(bodies)]
                k += concurrency
                writer.write(head % len(body) + body)
                status = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                await reader.readexactly(length)
                answered += 1
                if sent >= measure_from:
                    latencies.append(time.perf_counter() - sent)
                    errors += not status.startswith(b"HTTP/1.1 200")
        finally:
            writer.close()

    await asyncio.gather(*(connection(i) for i in range(concurrency)))
    return latencies, errors, answered


def measure(workers: dict[str, tuple[int, int]], level: int, seconds: float, rounds: int,
            bodies: list[bytes]) -> dict[str, dict[str, float]]:
    """Each configuration in turn, `rounds` times, so slow drifts in background load hit all alike.

    Besides requests/s and latency, the worker process's CPU time per answered request:
    a cost measure that background load on a shared machine disturbs far less than throughput.
    """
    latencies: dict[str, list[float]] = {name: [] for name in workers}
    errors = dict.fromkeys(workers, 0)
    answered = dict.fromkeys(workers, 0)
    cpu = dict.fromkeys(workers, 0.0)
    for _ in range(rounds):
        for name, (port, pid) in workers.items():
            before = cpu_seconds(pid)
            lat, err, done = asyncio.run(closed_loop(port, level, seconds / rounds, bodies))
            cpu[name] += cpu_seconds(pid) - before
            latencies[name] += lat
            errors[name] += err
            answered[name] += done
    out = {}
    for name, lat in latencies.items():
        ms = np.asarray(lat) * 1000.0
        out[name] = {"rps": len(lat) / seconds, "p50_ms": float(np.percentile(ms, 50)),
                     "p99_ms": float(np.percentile(ms, 99)), "requests": len(lat), "errors": errors[name],
                     "cpu_ms_per_request": 1000.0 * cpu[name] / max(1, answered[name])}
    return out


def events_line(port: int) -> str:
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    values = {}
    for name in ("driftline_worker_events_sent_total", "driftline_worker_events_dropped_total",
                 "driftline_worker_events_buffered"):
        for line in text.splitlines():
            if line.startswith(name + " "):
                values[name.removeprefix("driftline_worker_events_")] = int(float(line.split()[1]))
    return ", ".join(f"{k} {v}" for k, v in values.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per configuration and level")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds the seconds are split into")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--train-rows", type=int, default=2_000,
                        help="rows to train the benchmark model on (speed does not depend on its quality)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the figures here too")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    bodies = [orjson.dumps({"features": row}) for row in generate_inputs(5_000, seed=99).to_dict("records")]

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(port=free_port()) as broker:
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db",
               "DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        subprocess.run([DRIFTLINE, "train", "--size", "default", "--rows", str(args.train_rows), "--epochs", "1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        results: dict[str, dict[int, dict[str, float]]] = {name: {} for name in CONFIGS}
        with contextlib.ExitStack() as stack:
            workers = {name: stack.enter_context(worker_process(env, flags, args.device))
                       for name, flags in CONFIGS.items()}
            for level in levels:
                for name, figures in measure(workers, level, args.seconds, args.rounds, bodies).items():
                    results[name][level] = figures
            logging_events = events_line(workers["batching + logging"][0])

    print(f"worker benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"device {args.device}, {args.seconds:g} s per point in {args.rounds} rounds, cache off, "
          f"load average before {load_before}")
    print(f"{'configuration':<20}" + "".join(f"{'c=' + str(c):>33}" for c in levels))
    print(f"{'':<20}" + "".join(f"{'req/s  p50 ms  p99 ms  cpu ms':>33}" for _ in levels))
    for name, by_level in results.items():
        cells = "".join(f"{r['rps']:>9.0f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.1f} {r['cpu_ms_per_request']:>7.3f}"
                        for r in by_level.values())
        print(f"{name:<20}{cells}")
    print("(cpu ms: the worker process's CPU time per answered request)")
    ratios = {}
    for level in levels:
        batching, single = results["batching"][level], results["batch size 1"][level]
        logged = results["batching + logging"][level]
        ratios[level] = {"batching_vs_batch1": batching["rps"] / single["rps"],
                         "logging_cost_rps": 1 - logged["rps"] / batching["rps"],
                         "logging_cost_cpu": logged["cpu_ms_per_request"] / batching["cpu_ms_per_request"] - 1}
        print(f"c={level:<4} batching / batch size 1 = {ratios[level]['batching_vs_batch1']:.2f}x   "
              f"logging cost: {100 * ratios[level]['logging_cost_rps']:+.1f}% of requests/s, "
              f"{100 * ratios[level]['logging_cost_cpu']:+.1f}% CPU per request")
    print(f"events with logging on: {logging_events}")
    errors = sum(r["errors"] for by_level in results.values() for r in by_level.values())
    print(f"non-200 answers: {errors}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": args.device, "results": results, "ratios": ratios,
                                                   "events": logging_events}, indent=2))


if __name__ == "__main__":
    main()
