"""The benchmarks' load side: worker processes on free ports and a closed-loop HTTP/1.1 client.

The client is a minimal HTTP/1.1 writer/reader on asyncio streams rather than httpx: on a small
machine the client shares the CPU with the worker, and httpx's per-request Python cost would be
measured as the worker's.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from driftline.broker import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).with_name("driftline")
# Without the installed script (packages unpacked with `pip install --target`, as on the GPU machine), the module.
DRIFTLINE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "driftline"]
WARMUP_S = 0.5  # per round: connections opened, batches at steady size
PREDICT_HEAD = (b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n")


@contextlib.contextmanager
def worker_process(env: dict[str, str], flags: list[str], device: str, cpus: set[int] | None = None,
                   switched: bool = False) -> Iterator[tuple[int, int]]:
    """A worker on a free port, (port, pid) while the block runs; `switched`: bench/switched_worker.py's."""
    port = free_port()
    command = [sys.executable, str(ROOT / "bench" / "switched_worker.py")] if switched else [*DRIFTLINE, "worker"]
    process = subprocess.Popen([*command, "--port", str(port), "--device", device, "--cache-size", "0",
                                "--no-labels", "--log-level", "warning", "--grpc-port", "0", *flags], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    try:
        if not wait_for_port("127.0.0.1", port, 120, process):
            raise SystemExit(f"worker did not start: {process.stderr.read().decode()[-2000:]}")
        yield port, process.pid
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited already (a failed start)
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def metric_values(port: int, names: tuple[str, ...]) -> dict[str, float]:
    """The worker's unlabelled metrics of these names, read from its /metrics (absent ones are 0)."""
    import httpx

    values = dict.fromkeys(names, 0.0)
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
        name, _, value = line.partition(" ")
        if name in values:
            values[name] = float(value)
    return values


def batch_totals(port: int) -> tuple[float, float]:
    """(rows, forward passes) so far, from the worker's batch-size histogram: their ratio over a round is the
    mean batch size, which moves CPU per request (a forward pass of 64 rows costs far less than 64 of one)."""
    values = metric_values(port, ("driftline_worker_batch_size_sum", "driftline_worker_batch_size_count"))
    return values["driftline_worker_batch_size_sum"], values["driftline_worker_batch_size_count"]


async def post_predict(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes) -> bool:
    """One POST /predict on a keep-alive connection, its answer read to the end; whether it was a 200."""
    writer.write(PREDICT_HEAD % len(body) + body)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status.startswith(b"HTTP/1.1 200")


async def closed_loop(port: int, concurrency: int, seconds: float, bodies: list[bytes]) -> tuple[list[float], int, int]:
    """`concurrency` keep-alive connections sending back to back for `seconds` after a warm-up.

    Returns the latencies (s) of the requests sent after the warm-up, how many of those
    were not 200, and how many requests were answered in all (warm-up included).
    """
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
                ok = await post_predict(reader, writer, bodies[k % len(bodies)])
                k += concurrency
                answered += 1
                if sent >= measure_from:
                    latencies.append(time.perf_counter() - sent)
                    errors += not ok
        finally:
            writer.close()

    await asyncio.gather(*(connection(i) for i in range(concurrency)))
    return latencies, errors, answered
