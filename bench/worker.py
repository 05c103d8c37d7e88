"""Benchmark of the inference worker: requests/s and latency with and without dynamic batching and event logging.

    .venv/bin/python bench/worker.py [--device auto|cpu|cuda] [--seconds 5] [--concurrency 1,8,32,128]
                                     [--configs NAME,NAME] [--json results.json]

Real `driftline worker` processes run side by side on one trained model, all with the
prediction cache off (every request reaches the model):

- batching:            --max-batch-size 64 --max-wait-ms 2, no event logging
- batch size 1:        --max-batch-size 1, no event logging
- batching + logging:  as "batching", with events sent to an embedded Kafka broker by a
                       producer in a child process (the worker's default)
- logging in-thread:   as "batching + logging", the producer on a thread in the worker

`--configs` picks some of them (e.g. `--configs "batching,batching + logging,logging in-thread"`
for the logging cost alone). For each concurrency level they are measured in turn, in several
interleaved rounds (so a change in background load hits all alike; the logging cost is also
given as the median of per-round ratios, and as their mean with a 95 % bootstrap interval), by a closed-loop client: `concurrency`
keep-alive connections, each sending the next request as soon as the previous answer
arrives. The client is a minimal HTTP/1.1 writer/reader on asyncio streams rather than
httpx, because on a small machine the client shares the CPU with the worker and httpx's
per-request cost (~0.3 ms of Python) would be measured as the worker's.
On a machine with 8 CPUs or more the load generator, the workers and the broker get CPUs of
their own (`--pin-cpus`). Figures are printed, not asserted. Whole run: about 2 minutes at the defaults.

`--forward-pass` instead times the model's forward pass alone on `--device` for batch sizes 1 to 256
(median of 200 after a warm-up; synchronised on CUDA): what batching can save, without HTTP.

`--logger-cost` instead measures `InferenceLogger` alone: CPU per event in this process, in
its child and in the broker, producer on a thread vs in a child process (about 2 minutes).
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

_SCRIPT = Path(sys.executable).with_name("driftline")
# Without the installed script (packages unpacked with `pip install --target`, as on the GPU machine), the module.
DRIFTLINE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "driftline"]
CONFIGS = {
    "batching": ["--max-batch-size", "64", "--max-wait-ms", "2", "--no-events"],
    "batch size 1": ["--max-batch-size", "1", "--no-events"],
    "batching + logging": ["--max-batch-size", "64", "--max-wait-ms", "2", "--events", "--event-producer", "process"],
    "logging in-thread": ["--max-batch-size", "64", "--max-wait-ms", "2", "--events", "--event-producer", "thread"],
}
WARMUP_S = 0.5  # per round: connections opened, batches at steady size


def cpu_sets(pin: str) -> dict[str, set[int]] | None:
    """With `--pin-cpus` (auto: where there are 8 CPUs or more), separate CPUs for the load generator (a
    quarter), the workers with their producer children (half) and the broker (a quarter): on a many-core
    machine the scheduler otherwise moves them across each other's cores, and the same configuration's
    requests/s varied +-11 % from round to round on the 16-core GPU machine (docs/worker.md)."""
    cpus = sorted(os.sched_getaffinity(0))
    if pin == "no" or (pin == "auto" and len(cpus) < 8):
        return None
    if len(cpus) < 4:
        raise SystemExit("--pin-cpus yes needs 4 CPUs or more")
    quarter = len(cpus) // 4
    return {"load": set(cpus[:quarter]), "workers": set(cpus[quarter:len(cpus) - quarter]),
            "broker": set(cpus[len(cpus) - quarter:])}


@contextlib.contextmanager
def worker_process(env: dict[str, str], flags: list[str], device: str,
                   cpus: set[int] | None = None) -> Iterator[tuple[int, int]]:
    port = free_port()
    process = subprocess.Popen([*DRIFTLINE, "worker", "--port", str(port), "--device", device, "--cache-size", "0",
                                "--no-labels", "--log-level", "warning", *flags], env=env,
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


def cpu_seconds(pid: int, exclude: int | None = None, children: bool = True) -> float:
    """User + system CPU time of a process (all its threads) and, with `children`, of its live children (but
    `exclude`), from /proc.

    The children count because the event producer can run in one: its CPU is the
    logging's cost as much as a thread's would be.
    """
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if (stat.parent.name == str(pid) or (children and fields[1] == str(pid))) and stat.parent.name != str(exclude):
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


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

    The order within a round alternates, so no configuration always follows the same one.
    Besides requests/s and latency, the worker process's CPU time per answered request:
    a cost measure that background load on a shared machine disturbs far less than throughput;
    and the mean batch size, on which that CPU time depends.
    `rps_rounds` keeps each round's requests/s, for ratios taken round by round.
    """
    latencies: dict[str, list[float]] = {name: [] for name in workers}
    rps_rounds: dict[str, list[float]] = {name: [] for name in workers}
    errors = dict.fromkeys(workers, 0)
    answered = dict.fromkeys(workers, 0)
    cpu = dict.fromkeys(workers, 0.0)
    own_cpu = dict.fromkeys(workers, 0.0)
    rows = dict.fromkeys(workers, 0.0)
    passes = dict.fromkeys(workers, 0.0)
    for round_ in range(rounds):
        order = list(workers.items())
        for name, (port, pid) in order if round_ % 2 == 0 else reversed(order):
            rows_before, passes_before = batch_totals(port)
            before, own_before = cpu_seconds(pid), cpu_seconds(pid, children=False)
            lat, err, done = asyncio.run(closed_loop(port, level, seconds / rounds, bodies))
            cpu[name] += cpu_seconds(pid) - before
            own_cpu[name] += cpu_seconds(pid, children=False) - own_before
            rows_after, passes_after = batch_totals(port)
            rows[name] += rows_after - rows_before
            passes[name] += passes_after - passes_before
            latencies[name] += lat
            rps_rounds[name].append(len(lat) / (seconds / rounds))
            errors[name] += err
            answered[name] += done
    out = {}
    for name, lat in latencies.items():
        ms = np.asarray(lat) * 1000.0
        out[name] = {"rps": len(lat) / seconds, "rps_rounds": rps_rounds[name], "p50_ms": float(np.percentile(ms, 50)),
                     "p99_ms": float(np.percentile(ms, 99)), "requests": len(lat), "errors": errors[name],
                     "cpu_ms_per_request": 1000.0 * cpu[name] / max(1, answered[name]),
                     "own_cpu_ms_per_request": 1000.0 * own_cpu[name] / max(1, answered[name]),
                     "mean_batch_size": rows[name] / max(1.0, passes[name])}
    return out


def logger_cost(bootstrap_servers: str, broker_pid: int, events: int, rate: float, rounds: int) -> None:
    """CPU per event of `InferenceLogger` here (the serving process), in its child and in the broker.

    Producer on a thread vs in a child process. Events are logged at `rate` per second
    from a paced loop; the same loop without logging, measured in the same rounds, is
    subtracted. Rounds alternate the three. The broker's CPU is Kafka's, not the
    logger's, but on a small machine it shares the CPU with the worker too.
    """
    from driftline.client import InferenceLogger

    row = generate_inputs(1, seed=5).to_dict("records")[0]
    latency = {"total": 4.2, "queue": 1.1, "compute": 2.0}
    loggers = {"none": None,
               "thread": InferenceLogger(bootstrap_servers, "bench", "1", device="cpu"),
               "process": InferenceLogger(bootstrap_servers, "bench", "1", device="cpu", producer_process=True)}
    time.sleep(3)  # producers connected, the child started
    own = dict.fromkeys(loggers, 0.0)
    children = dict.fromkeys(loggers, 0.0)
    broker = dict.fromkeys(loggers, 0.0)
    per_round = events // rounds
    for _ in range(rounds):
        for name, logger in loggers.items():
            own_before = time.process_time()
            children_before = cpu_seconds(os.getpid(), exclude=broker_pid) - own_before
            broker_before = cpu_seconds(broker_pid)
            started = time.perf_counter()
            for i in range(per_round):
                if logger is not None:
                    logger.log(row, 0.37, latency, inputs=row, version="1", batch_size=32, cache_hit=False)
                delay = started + (i + 1) / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            if logger is not None:
                logger.flush(30)
            own[name] += time.process_time() - own_before
            children[name] += cpu_seconds(os.getpid(), exclude=broker_pid) - time.process_time() - children_before
            broker[name] += cpu_seconds(broker_pid) - broker_before
    total = per_round * rounds
    print(f"logger CPU per event at {rate:g} events/s ({total} events each, {rounds} rounds), "
          "the paced loop's own cost subtracted:")
    for name in ("thread", "process"):
        stats = loggers[name].close()
        print(f"  producer {name:<8}: serving process {1e6 * (own[name] - own['none']) / total:6.1f} us, "
              f"child process {1e6 * (children[name] - children['none']) / total:6.1f} us, "
              f"broker {1e6 * (broker[name] - broker['none']) / total:6.1f} us "
              f"(sent {stats.sent}, failed {stats.failed}, dropped {stats.dropped})")


def forward_pass(device: str, batch_sizes: tuple[int, ...] = (1, 8, 64, 256), repeats: int = 200) -> None:
    """Median forward-pass time of the default model per batch size, inputs copied to the device and scores back.

    The same work as `LoadedVersion.predict` after the feature transform: what a batch costs
    the model itself. Weights are random; speed does not depend on them.
    """
    import torch

    from driftline.transform import FeatureTransform
    from worker.model import CreditMLP, resolve_device

    device = resolve_device(device)
    records = FeatureTransform().apply(generate_inputs(2_000, seed=3).to_dict("records"))
    transform = FeatureTransform.fit(records)
    net = CreditMLP(transform.encoded_width).to(device).eval()
    name = (torch.cuda.get_device_name(0) if device == "cuda"
            else f"{platform.machine()}, {torch.get_num_threads()} threads")
    print(f"forward pass of the default model ({device}: {name}; torch {torch.__version__}), median of {repeats}:")
    for size in batch_sizes:
        matrix = transform.encode(records[:size])
        timings = []
        with torch.inference_mode():
            for i in range(repeats + 20):
                started = time.perf_counter()
                torch.sigmoid(net(torch.from_numpy(matrix).to(device))).cpu().tolist()  # .cpu() synchronises
                if i >= 20:
                    timings.append(time.perf_counter() - started)
        per_batch = 1000 * float(np.median(timings))
        print(f"  batch {size:>4}: {per_batch:7.3f} ms per batch, {1000 * per_batch / size:8.1f} us per row")


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the mean of per-round figures (seeded: a rerun prints the same).

    One run's rounds scatter by +-10 % on a busy machine; the interval says whether a cost is
    shown to be under an aim (its upper end below it) or only consistent with it. numpy, not
    scipy.stats.bootstrap: the GPU machine's trimmed package set (bench/gpu_machine.sh) has no scipy.
    """
    if len(values) < 2:
        return float("nan"), float("nan")
    data = np.asarray(values, dtype=float)
    means = np.random.default_rng(0).choice(data, size=(10_000, len(data))).mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def events_line(port: int) -> str:
    values = metric_values(port, ("driftline_worker_events_sent_total", "driftline_worker_events_dropped_total",
                                  "driftline_worker_events_buffered"))
    return ", ".join(f"{name.removeprefix('driftline_worker_events_')} {int(value)}" for name, value in values.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per configuration and level")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds the seconds are split into")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated configurations to run")
    parser.add_argument("--train-rows", type=int, default=2_000,
                        help="rows to train the benchmark model on (speed does not depend on its quality)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the figures here too")
    parser.add_argument("--pin-cpus", choices=["auto", "yes", "no"], default="auto",
                        help="separate CPUs for the load generator, the workers and the broker (auto: with 8 CPUs "
                             "or more)")
    parser.add_argument("--logger-cost", action="store_true",
                        help="instead: CPU per event of InferenceLogger, producer on a thread vs in a child process")
    parser.add_argument("--forward-pass", action="store_true",
                        help="instead: the model's forward pass alone on --device, per batch size")
    args = parser.parse_args()
    if args.forward_pass:
        forward_pass(args.device)
        return
    if args.logger_cost:
        with EmbeddedBroker(port=free_port()) as broker:
            logger_cost(broker.bootstrap_servers, broker.process.pid, events=60_000, rate=2_000, rounds=6)
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    configs = {name: CONFIGS[name] for name in args.configs.split(",")}
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    bodies = [orjson.dumps({"features": row}) for row in generate_inputs(5_000, seed=99).to_dict("records")]
    pinned = cpu_sets(args.pin_cpus)
    if pinned:  # the broker starts on its CPUs (a child keeps its parent's), then this process moves to its own
        os.sched_setaffinity(0, pinned["broker"])

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(port=free_port()) as broker:
        if pinned:
            os.sched_setaffinity(0, pinned["load"])
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db",
               "DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        subprocess.run([*DRIFTLINE, "train", "--size", "default", "--rows", str(args.train_rows), "--epochs", "1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        results: dict[str, dict[int, dict[str, float]]] = {name: {} for name in configs}
        with contextlib.ExitStack() as stack:
            workers = {name: stack.enter_context(worker_process(env, flags, args.device,
                                                                pinned["workers"] if pinned else None))
                       for name, flags in configs.items()}
            for level in levels:
                for name, figures in measure(workers, level, args.seconds, args.rounds, bodies).items():
                    results[name][level] = figures
            logging_events = {name: events_line(workers[name][0]) for name in configs if "logging" in name}

    print(f"worker benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"device {args.device}, {args.seconds:g} s per point in {args.rounds} rounds, cache off, "
          f"load average before {load_before}"
          + ("; CPUs pinned: " + ", ".join(f"{role} {min(c)}-{max(c)}" for role, c in pinned.items()) if pinned else ""))
    print(f"{'configuration':<20}" + "".join(f"{'c=' + str(c):>40}" for c in levels))
    print(f"{'':<20}" + "".join(f"{'req/s  p50 ms  p99 ms  cpu ms  batch':>40}" for _ in levels))
    for name, by_level in results.items():
        cells = "".join(f"{r['rps']:>9.0f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.1f} {r['cpu_ms_per_request']:>7.3f}"
                        f" {r['mean_batch_size']:>6.1f}" for r in by_level.values())
        print(f"{name:<20}{cells}")
    print("(cpu ms: CPU time of the worker process and its children per answered request; batch: mean rows per "
          "forward pass)")
    ratios: dict[int, dict[str, float]] = {}
    for level in levels:
        ratios[level] = {}
        line = f"c={level:<4}"
        batching = results.get("batching", {}).get(level)
        single = results.get("batch size 1", {}).get(level)
        if batching and single:
            ratios[level]["batching_vs_batch1"] = batching["rps"] / single["rps"]
            line += f" batching / batch size 1 = {ratios[level]['batching_vs_batch1']:.2f}x"
        for name in (n for n in configs if "logging" in n and batching):
            logged = results[name][level]
            rps_cost = ratios[level][f"{name}: cost_rps"] = 1 - logged["rps"] / batching["rps"]
            # Round by round (each pair measured seconds apart), the median: robust to a burst
            # of background load that hits one configuration's turn in a few rounds.
            round_costs = [1 - a / b for a, b in zip(logged["rps_rounds"], batching["rps_rounds"])]
            median_cost = ratios[level][f"{name}: cost_rps_median_round"] = float(np.median(round_costs))
            low, high = mean_interval(round_costs)
            ratios[level][f"{name}: cost_rps_mean_round_95ci"] = [low, high]
            cpu_cost = logged["cpu_ms_per_request"] / batching["cpu_ms_per_request"] - 1
            ratios[level][f"{name}: cost_cpu"] = cpu_cost
            # The serving process alone (its threads, not the producer child): the part of the
            # cost that competes with serving for the GIL whatever the number of cores.
            own_extra_us = 1000 * (logged["own_cpu_ms_per_request"] - batching["own_cpu_ms_per_request"])
            ratios[level][f"{name}: extra_serving_process_us"] = own_extra_us
            line += (f"\n  cost of {name}: {100 * rps_cost:+.1f}% of requests/s (median of rounds "
                     f"{100 * median_cost:+.1f}%; mean of rounds {100 * np.mean(round_costs):+.1f}%, 95% interval "
                     f"{100 * low:+.1f}% to {100 * high:+.1f}%), {100 * cpu_cost:+.1f}% CPU per request, "
                     f"{own_extra_us:+.1f} us CPU per request in the serving process itself")
        print(line)
    for name, events in logging_events.items():
        print(f"events, {name}: {events}")
    errors = sum(r["errors"] for by_level in results.values() for r in by_level.values())
    print(f"non-200 answers: {errors}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": args.device, "results": results, "ratios": ratios,
                                                   "events": logging_events}, indent=2))


if __name__ == "__main__":
    main()
