"""Benchmark of the inference worker: requests/s and latency with and without dynamic batching and event logging.

    .venv/bin/python bench/worker.py [--device auto|cpu|cuda] [--seconds 6] [--rounds 3] [--sets 1]
                                     [--concurrency 1,8,32,128] [--configs NAME,NAME] [--json results.json]

Real `driftline worker` processes run side by side on one trained model, all with the
prediction cache off (every request reaches the model):

- batching:            --max-batch-size 64 --max-wait-ms 2, no event logging
- batch size 1:        --max-batch-size 1, no event logging
- batching + logging:  as "batching", with events sent to an embedded Kafka broker by a
                       producer in a child process (the worker's default)
- logging in-thread:   as "batching + logging", the producer on a thread in the worker
- batching again:      (only when named) the same flags as "batching": the noise floor
- logging on/off:      (only when named) one "batching + logging" worker (bench/switched_worker.py)
                       whose logging is switched on and off between rounds, measured as two entries,
                       "logging on/off: on" and "...: off": the cost of logging in one process
- on/off control:      (only when named) the same with --no-events: its switch changes nothing

`--configs` picks some of them (e.g. `--configs "batching,batching + logging,logging in-thread"`
for the logging cost alone). For each concurrency level they are measured in turn, in several
interleaved rounds (so a change in background load hits all alike; the logging cost is also
given as the median of per-round ratios, and as their mean with a 95 % interval), by a closed-loop client: `concurrency`
keep-alive connections, each sending the next request as soon as the previous answer
arrives (bench/http_load.py; CPU figures from /proc by bench/procfs.py).
On a machine with 8 CPUs or more the load generator, the workers and the broker get CPUs of
their own (`--pin-cpus`). Figures are printed, not asserted. Whole run: about 2 minutes at the defaults.

Two processes of the same code differ: in an A/A run on the 2-core machine ("batching" against
"batching again", 60 s in 30 rounds) one pair differed by 7.6 % of requests/s, with a 95 % interval
over rounds that excluded zero. One set of workers therefore cannot show a cost of a few %, however
many rounds it runs. `--sets N` starts every configuration's worker afresh N times, one set after
another, and takes the cost's interval over the sets' means (Student's t), so that spread is in it.
"logging on/off" leaves that spread out: it compares each worker process with itself, logging on and
off in alternate rounds (requests answered with logging on are counted against events sent, which must
match). On the 2-core machine that narrowed the interval little: 2-s rounds of one process vary by
±10-15 % there, and that round noise dominates (bench/RESULTS.md). Each logging cost is also
broken down into CPU per request in the serving process, its event loop's thread (the one that limits
requests/s where cores are to spare), its producer child and the broker.

`--forward-pass` instead times the model's forward pass alone on `--device` for batch sizes 1 to 256
(median of 200 after a warm-up; synchronised on CUDA): what batching can save, without HTTP.

`--protocols` instead compares the Open Inference Protocol's two transports on one worker (cache and
events off): single-row infer over REST (/v2/models/NAME/infer, httpx) and over gRPC (ModelInfer, grpc.aio),
`--protocol-requests` requests per point at concurrency 8 and 32, requests/s, p50 and p99 (under a minute).
The client runs in this process for both, so its own cost (httpx or grpcio) is part of each figure.

`--capacity` instead checks the worker's capacity signals (bench/capacity.py): the load its recommended
replica count is built for (target utilisation x its measured service rate) against the knee of p99
latency as an open-loop offered load steps up, on one worker (`--seconds` per step; a few minutes).

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
from typing import Any

import numpy as np
import orjson

from driftline.broker import EmbeddedBroker, free_port
from driftline.worker.dataset import generate_inputs

from http_load import DRIFTLINE, batch_totals, closed_loop, metric_values, worker_process
from procfs import CPU_FIGURES, cpu_seconds, cpu_sets, cpu_snapshot, pin_children
CONFIGS = {
    "batching": ["--max-batch-size", "64", "--max-wait-ms", "2", "--no-events"],
    "batch size 1": ["--max-batch-size", "1", "--no-events"],
    "batching + logging": ["--max-batch-size", "64", "--max-wait-ms", "2", "--events", "--event-producer", "process"],
    "logging in-thread": ["--max-batch-size", "64", "--max-wait-ms", "2", "--events", "--event-producer", "thread"],
}
# Not run by default: the same flags as "batching" in another process. Its "cost" is the benchmark's
# noise floor: two processes of the same code differed by up to 7.6 % of requests/s (docs/worker.md).
CONFIGS["batching again"] = CONFIGS["batching"]
# Not run by default either: one worker process (bench/switched_worker.py) whose logging is switched on
# and off between rounds, measured as two entries, "<name>: on" and "<name>: off", so the logging cost
# compares a process with itself; "on/off control" is the same with --no-events (its switch changes
# nothing), the noise floor of that comparison.
CONFIGS["logging on/off"] = CONFIGS["batching + logging"]
CONFIGS["on/off control"] = CONFIGS["batching"]
SWITCHED = ("logging on/off", "on/off control")
DEFAULT_CONFIGS = [name for name in CONFIGS if name not in ("batching again", *SWITCHED)]
SWITCH_SETTLE_S = 0.05  # after signalling a switched worker, before the round's connections open
SETTLE_S = 2.0  # per worker, once its whole set has started (see settle)



def switch_logging(pid: int, on: bool | None) -> None:
    """Turn a switched worker's logging on or off (bench/switched_worker.py; None: not a switched worker)."""
    if on is not None:
        os.kill(pid, signal.SIGUSR1 if on else signal.SIGUSR2)
        time.sleep(SWITCH_SETTLE_S)


def settle(workers: dict[str, tuple[int, int, bool | None]], bodies: list[bytes],
           concurrency: int = 32) -> dict[str, int]:
    """Drive each freshly started worker for a while, unmeasured, before the first round; requests answered.

    A worker's port opens before its start is over (the producer child connecting, the last
    imports and allocations), and the first configuration of the first round paid for the
    others': in four runs of 8 sets, "batching" (started and measured first) came out 3.7 %
    slower than "batching again" (the same flags; 95 % interval 1.4-6.0 %) at c=32, the first
    level, and 1.6 % (no difference shown) at c=128, measured after it.
    """
    answered = {}
    for name, (port, pid, switch) in workers.items():
        switch_logging(pid, switch)
        answered[name] = asyncio.run(closed_loop(port, concurrency, SETTLE_S, bodies))[2]
    return answered


def round_order(workers: dict[str, tuple[int, int, bool | None]],
                round_: int) -> list[tuple[str, tuple[int, int, bool | None]]]:
    """The order of one round: the worker processes rotate by one place a round; a switched worker's two
    entries stay together, "on" first in even rounds and "off" first in odd ones, so neither always runs
    right after another process or always right after its own twin."""
    processes: dict[int, list[tuple[str, tuple[int, int, bool | None]]]] = {}
    for name, worker in workers.items():
        processes.setdefault(worker[1], []).append((name, worker))
    groups = list(processes.values())
    shift = round_ % len(groups)
    return [entry for group in groups[shift:] + groups[:shift] for entry in (group[::-1] if round_ % 2 else group)]


def measure(workers: dict[str, tuple[int, int, bool | None]], level: int, seconds: float, rounds: int,
            bodies: list[bytes], children_cpus: set[int] | None = None,
            broker_pid: int | None = None) -> dict[str, dict[str, Any]]:
    """Each configuration in turn, `rounds` times, so slow drifts in background load hit all alike.

    The order rotates from round to round (`round_order`), so every configuration runs in every place of
    a round equally often. (It used to alternate forwards and backwards: with three configurations the middle
    one never ran right after itself or after a long pause, and an A/A pair, the same flags in the
    middle and first place, came out 3.0-4.3 % apart at c=32 in three runs of 8 sets.)
    Besides requests/s and latency, the worker process's CPU time per answered request (with its
    children; without them; its event loop's thread alone) and the broker's: a cost measure that
    background load on a shared machine disturbs far less than throughput; and the mean batch size,
    on which that CPU time depends.
    `rps_rounds` keeps each round's requests/s, for ratios taken round by round. The figures are
    raw sums; `summarize` turns those of one or more sets of worker processes into rates.
    A switched worker's two entries (logging on, off) are measured like two workers, its switch
    turned before each, between rounds, when no request is in flight.
    """
    latencies: dict[str, list[float]] = {name: [] for name in workers}
    rps_rounds: dict[str, list[float]] = {name: [] for name in workers}
    errors = dict.fromkeys(workers, 0)
    answered = dict.fromkeys(workers, 0)
    cpu_times = {name: dict.fromkeys(CPU_FIGURES, 0.0) for name in workers}
    rows = dict.fromkeys(workers, 0.0)
    passes = dict.fromkeys(workers, 0.0)
    for round_ in range(rounds):
        for name, (port, pid, switch) in round_order(workers, round_):
            switch_logging(pid, switch)
            if children_cpus:
                pin_children(pid, children_cpus)
            rows_before, passes_before = batch_totals(port)
            before = cpu_snapshot(pid, broker_pid)
            lat, err, done = asyncio.run(closed_loop(port, level, seconds / rounds, bodies))
            for key, seconds_after in cpu_snapshot(pid, broker_pid).items():
                cpu_times[name][key] += seconds_after - before[key]
            rows_after, passes_after = batch_totals(port)
            rows[name] += rows_after - rows_before
            passes[name] += passes_after - passes_before
            latencies[name] += lat
            rps_rounds[name].append(len(lat) / (seconds / rounds))
            errors[name] += err
            answered[name] += done
    return {name: {"latencies": latencies[name], "seconds": seconds, "rps_rounds": rps_rounds[name],
                   "errors": errors[name], "answered": answered[name], **cpu_times[name], "rows": rows[name],
                   "passes": passes[name]} for name in workers}


def measured_entries(config: str) -> list[tuple[str, bool | None]]:
    """The entries a configuration is measured as: itself, or a switched worker's "<name>: on" and "<name>: off"
    (with the state its switch is turned to before each)."""
    return [(f"{config}: on", True), (f"{config}: off", False)] if config in SWITCHED else [(config, None)]


def summarize(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration at one level, `measure`'s figures of each set of worker processes pooled.

    `rps_sets` is each set's requests/s and `rps_rounds` each set's per-round requests/s: costs are
    taken round by round within a set, where both workers ran seconds apart.
    """
    def total(key: str) -> float:
        return sum(figures[key] for figures in sets)

    ms = np.asarray([latency for figures in sets for latency in figures["latencies"]]) * 1000.0
    answered = max(1.0, total("answered"))
    return {"rps": len(ms) / total("seconds"), "rps_sets": [len(f["latencies"]) / f["seconds"] for f in sets],
            "rps_rounds": [f["rps_rounds"] for f in sets], "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "requests": len(ms), "errors": int(total("errors")),
            "cpu_ms_per_request": 1000.0 * total("cpu") / answered,
            "own_cpu_ms_per_request": 1000.0 * total("own_cpu") / answered,
            "loop_cpu_ms_per_request": 1000.0 * total("loop_cpu") / answered,
            "broker_cpu_ms_per_request": 1000.0 * total("broker_cpu") / answered,
            "mean_batch_size": total("rows") / max(1.0, total("passes"))}


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

    from driftline.worker.feature_transform import FeatureTransform
    from driftline.worker.model import CreditMLP, resolve_device

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
    """Confidence interval of the mean of `values` (per-round or per-set costs).

    Student's t where scipy is installed; else (the GPU machine's trimmed package set,
    bench/gpu_machine.sh, has no scipy) a seeded percentile bootstrap, which comes out too narrow
    for a handful of values. The interval says whether a cost is shown to be under an aim (its
    upper end below it) or only consistent with it.
    """
    if len(values) < 2:
        return float("nan"), float("nan")
    data = np.asarray(values, dtype=float)
    try:
        from scipy import stats
    except ImportError:
        means = np.random.default_rng(0).choice(data, size=(10_000, len(data))).mean(axis=1)
        tail = 100 * (1 - confidence) / 2
        return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))
    half = stats.t.ppf((1 + confidence) / 2, len(data) - 1) * data.std(ddof=1) / np.sqrt(len(data))
    return float(data.mean() - half), float(data.mean() + half)


def cost_figures(compared: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """Requests/s lost by `compared` against `reference` (both `summarize`d at one level).

    Each round's cost compares the two workers measured seconds apart; each set's cost is the mean of
    its rounds. The interval is taken over sets when there are two or more: different processes of the
    same code differ by several % (an A/A run, two "batching" workers, differed by 7.6 % with a round
    interval excluding zero), so rounds of one pair of processes show the round noise, not that spread.
    """
    per_set = [[1 - a / b for a, b in zip(ours, theirs)]
               for ours, theirs in zip(compared["rps_rounds"], reference["rps_rounds"])]
    rounds = [cost for costs in per_set for cost in costs]
    set_means = [float(np.mean(costs)) for costs in per_set]
    low, high = mean_interval(set_means if len(set_means) > 1 else rounds)
    return {"cost_rps": 1 - compared["rps"] / reference["rps"], "cost_rps_median_round": float(np.median(rounds)),
            "cost_rps_mean": float(np.mean(set_means)), "cost_rps_sets": set_means,
            "cost_rps_mean_95ci": [low, high], "interval_over": "sets" if len(set_means) > 1 else "rounds",
            "cost_cpu": compared["cpu_ms_per_request"] / reference["cpu_ms_per_request"] - 1,
            # The serving process alone (its threads, not the producer child): the part of the
            # cost that competes with serving for the GIL whatever the number of cores.
            "extra_serving_process_us": 1000 * (compared["own_cpu_ms_per_request"]
                                                - reference["own_cpu_ms_per_request"]),
            # Of that, its event loop's thread: on a machine with cores to spare, the one that limits requests/s.
            "extra_event_loop_us": 1000 * (compared["loop_cpu_ms_per_request"]
                                           - reference["loop_cpu_ms_per_request"]),
            # Its children (the producer process).
            "extra_children_us": 1000 * (compared["cpu_ms_per_request"] - compared["own_cpu_ms_per_request"]
                                         - reference["cpu_ms_per_request"] + reference["own_cpu_ms_per_request"]),
            # The embedded broker, on the same machine here (a production Kafka is elsewhere).
            "extra_broker_us": 1000 * (compared["broker_cpu_ms_per_request"]
                                       - reference["broker_cpu_ms_per_request"])}


EVENT_METRICS = ("driftline_worker_events_sent_total", "driftline_worker_events_dropped_total",
                 "driftline_worker_events_buffered")


def _oip_rows(schema: list[dict[str, Any]], rows: list[dict[str, Any]]) -> tuple[list[bytes], list[Any]]:
    """Each row as an OIP REST body and a gRPC ModelInferRequest (one input per feature, shape [1, 1])."""
    from tritonclient.grpc import service_pb2

    bodies, messages = [], []
    for row in rows:
        inputs = [{"name": e["name"], "shape": [1, 1], "datatype": "FP64" if e["kind"] == "numeric" else "BYTES",
                   "data": [row[e["name"]]]} for e in schema]
        bodies.append(orjson.dumps({"inputs": inputs}))
        message = service_pb2.ModelInferRequest(model_name="credit-default")
        for e, tensor in zip(schema, inputs):
            entry = message.inputs.add(name=e["name"], datatype=tensor["datatype"], shape=[1, 1])
            if tensor["datatype"] == "FP64":
                entry.contents.fp64_contents.append(float(row[e["name"]]))
            else:
                entry.contents.bytes_contents.append(row[e["name"]].encode())
        messages.append(message)
    return bodies, messages


async def _closed_loop(call: Any, payloads: list[Any], concurrency: int, requests: int) -> tuple[float, list[float]]:
    """`requests` calls by `concurrency` callers, each sending its next as soon as its answer is in: (s, latencies)."""
    latencies: list[float] = []
    sent = 0

    async def caller() -> None:
        nonlocal sent
        while sent < requests:
            payload = payloads[sent % len(payloads)]
            sent += 1
            started = time.perf_counter()
            await call(payload)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


async def _protocol_points(port: int, grpc_port: int, bodies: list[bytes], messages: list[Any],
                           levels: tuple[int, ...], requests: int) -> dict[str, dict[int, dict[str, float]]]:
    import grpc
    import httpx
    from tritonclient.grpc import service_pb2_grpc

    results: dict[str, dict[int, dict[str, float]]] = {"v2 REST": {}, "v2 gRPC": {}}
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                                 limits=httpx.Limits(max_connections=max(levels))) as client, \
            grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)

        async def rest(body: bytes) -> None:
            answer = await client.post("/v2/models/credit-default/infer", content=body, headers=headers)
            answer.raise_for_status()

        async def grpc_call(message: Any) -> None:
            await stub.ModelInfer(message)

        for level in levels:
            for name, call, payloads in (("v2 REST", rest, bodies), ("v2 gRPC", grpc_call, messages)):
                await _closed_loop(call, payloads, level, min(requests, 200))  # warm-up: connections, caches
                seconds, latencies = await _closed_loop(call, payloads, level, requests)
                results[name][level] = {"rps": len(latencies) / seconds,
                                        "p50_ms": 1000 * float(np.percentile(latencies, 50)),
                                        "p99_ms": 1000 * float(np.percentile(latencies, 99))}
    return results


def protocols(device: str, requests: int, train_rows: int, levels: tuple[int, ...] = (8, 32)) -> None:
    """OIP REST against gRPC on one worker: requests/s, p50 and p99 at each concurrency level."""
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db"}
        subprocess.run([*DRIFTLINE, "train", "--size", "default", "--rows", str(train_rows), "--epochs", "1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        grpc_port = free_port()
        flags = ["--max-batch-size", "64", "--max-wait-ms", "2", "--no-events", "--grpc-port", str(grpc_port)]
        with worker_process(env, flags, device) as (port, _pid):
            import httpx

            schema = httpx.get(f"http://127.0.0.1:{port}/model").json()["features"]
            bodies, messages = _oip_rows(schema, generate_inputs(2_000, seed=99).to_dict("records"))
            results = asyncio.run(_protocol_points(port, grpc_port, bodies, messages, levels, requests))
    print(f"OIP REST vs gRPC: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, device {device}, "
          f"{requests} single-row requests per point, cache and events off, load average before {load_before}")
    print(f"{'protocol':<10}" + "".join(f"{'c=' + str(c):>26}" for c in levels))
    print(f"{'':<10}" + "".join(f"{'req/s  p50 ms  p99 ms':>26}" for _ in levels))
    for name, by_level in results.items():
        print(f"{name:<10}" + "".join(f"{r['rps']:>12.0f} {r['p50_ms']:>6.2f} {r['p99_ms']:>6.1f}"
                                      for r in by_level.values()))


def capacity(device: str, seconds: float, train_rows: int, json_out: str | None) -> None:
    """One worker (batching, cache and events off); bench/capacity.py's check, its window as long as a step."""
    from capacity import capacity_check, report

    from driftline import serving_defaults

    bodies = [orjson.dumps({"features": row}) for row in generate_inputs(5_000, seed=99).to_dict("records")]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(f"[capacity]\nwindow_seconds = {seconds}\n")
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db",
               "DRIFTLINE_CONFIG": str(config)}
        subprocess.run([*DRIFTLINE, "train", "--size", "default", "--rows", str(train_rows), "--epochs", "1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        with worker_process(env, CONFIGS["batching"], device) as (port, _pid):
            asyncio.run(closed_loop(port, 8, 1.0, bodies))  # warm-up: the first batches are slow
            result = capacity_check(port, bodies, seconds, light_rps=30.0,
                                    target=serving_defaults.WORKER_TARGET_UTILIZATION)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, device {device}, {seconds:g} s "
          f"per step, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    report(result)
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="measured seconds per configuration and level, per set of worker processes")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds the seconds are split into")
    parser.add_argument("--sets", type=int, default=1,
                        help="sets of worker processes, started afresh one after another and pooled: what logging "
                             "costs is taken over sets, as processes of the same code differ by several %%")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"comma-separated configurations to run, of: {', '.join(CONFIGS)}")
    parser.add_argument("--train-rows", type=int, default=2_000,
                        help="rows to train the benchmark model on (speed does not depend on its quality)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the figures here too")
    parser.add_argument("--pin-cpus", choices=["auto", "yes", "no"], default="auto",
                        help="separate CPUs for the load generator, the workers and the broker (auto: with 8 CPUs "
                             "or more; with 2-3, yes gives the worker the first CPU alone)")
    parser.add_argument("--logger-cost", action="store_true",
                        help="instead: CPU per event of InferenceLogger, producer on a thread vs in a child process")
    parser.add_argument("--forward-pass", action="store_true",
                        help="instead: the model's forward pass alone on --device, per batch size")
    parser.add_argument("--protocols", action="store_true",
                        help="instead: Open Inference Protocol REST against gRPC at concurrency 8 and 32")
    parser.add_argument("--protocol-requests", type=int, default=3_000, help="requests per --protocols point")
    parser.add_argument("--capacity", action="store_true",
                        help="instead: the recommended replicas against the measured knee of p99 vs offered load")
    args = parser.parse_args()
    if args.capacity:
        capacity(args.device, args.seconds, args.train_rows, args.json_out)
        return
    if args.protocols:
        protocols(args.device, args.protocol_requests, args.train_rows)
        return
    if args.forward_pass:
        forward_pass(args.device)
        return
    if args.logger_cost:
        with EmbeddedBroker(port=free_port()) as broker:
            logger_cost(broker.bootstrap_servers, broker.process.pid, events=60_000, rate=2_000, rounds=6)
        return
    levels = [int(c) for c in args.concurrency.split(",")]
    unknown = [name for name in args.configs.split(",") if name not in CONFIGS]
    if unknown or args.sets < 1:
        raise SystemExit(f"unknown configuration {unknown[0]!r}; known: {', '.join(CONFIGS)}" if unknown
                         else "--sets must be 1 or more")
    configs = {name: CONFIGS[name] for name in args.configs.split(",")}
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    bodies = [orjson.dumps({"features": row}) for row in generate_inputs(5_000, seed=99).to_dict("records")]
    pinned = cpu_sets(args.pin_cpus)
    if pinned:  # the broker starts on its CPUs (a child keeps its parent's), then this process moves to its own
        os.sched_setaffinity(0, pinned["broker"])

    entries = [name for config in configs for name, _switch in measured_entries(config)]
    measured: dict[str, dict[int, list[dict[str, Any]]]] = {name: {level: [] for level in levels} for name in entries}
    # Event counts of every logging configuration, and the requests it answered with logging on (the two
    # should match: every request logged, and a switched worker's none while off).
    events = {name: {**dict.fromkeys(EVENT_METRICS, 0.0), "requests answered with logging on": 0}
              for name, flags in configs.items() if "--events" in flags}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(port=free_port()) as broker:
        if pinned:
            os.sched_setaffinity(0, pinned["load"])
        env = {**os.environ, "DRIFTLINE_HOME": tmp, "DRIFTLINE_DB": f"sqlite:///{tmp}/driftline.db",
               "DRIFTLINE_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
        subprocess.run([*DRIFTLINE, "train", "--size", "default", "--rows", str(args.train_rows), "--epochs", "1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        for set_number in range(1, args.sets + 1):
            with contextlib.ExitStack() as stack:
                workers: dict[str, tuple[int, int, bool | None]] = {}
                for config, flags in configs.items():
                    port, pid = stack.enter_context(worker_process(env, flags, args.device,
                                                                   pinned["workers"] if pinned else None,
                                                                   switched=config in SWITCHED))
                    workers.update({name: (port, pid, switch) for name, switch in measured_entries(config)})
                answered = settle(workers, bodies)
                for level in levels:
                    for name, figures in measure(workers, level, args.seconds, args.rounds, bodies,
                                                 pinned.get("children") if pinned else None,
                                                 broker.process.pid).items():
                        measured[name][level].append(figures)
                        answered[name] += figures["answered"]
                for config, totals in events.items():
                    names = [name for name, switch in measured_entries(config) if switch is not False]
                    port, pid, switch = workers[names[0]]
                    switch_logging(pid, switch)  # the event metrics are there only while logging is on
                    for metric, value in metric_values(port, EVENT_METRICS).items():
                        totals[metric] += value
                    totals["requests answered with logging on"] += sum(answered[name] for name in names)
            if args.sets > 1:
                print(f"set {set_number} of {args.sets} of worker processes measured", file=sys.stderr, flush=True)
    results = {name: {level: summarize(sets) for level, sets in by_level.items()} for name, by_level in measured.items()}

    print(f"worker benchmark: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"device {args.device}, {args.seconds:g} s per point in {args.rounds} rounds"
          + (f", {args.sets} sets of worker processes" if args.sets > 1 else "")
          + f", cache off, load average before {load_before}"
          + ("; CPUs pinned: " + ", ".join(f"{role} {min(c)}-{max(c)}" for role, c in pinned.items()) if pinned else ""))
    print(f"{'configuration':<20}" + "".join(f"{'c=' + str(c):>40}" for c in levels))
    print(f"{'':<20}" + "".join(f"{'req/s  p50 ms  p99 ms  cpu ms  batch':>40}" for _ in levels))
    for name, by_level in results.items():
        cells = "".join(f"{r['rps']:>9.0f} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.1f} {r['cpu_ms_per_request']:>7.3f}"
                        f" {r['mean_batch_size']:>6.1f}" for r in by_level.values())
        print(f"{name:<20}{cells}")
    print("(cpu ms: CPU time of the worker process and its children per answered request; batch: mean rows per "
          "forward pass)")
    ratios: dict[int, dict[str, Any]] = {}
    for level in levels:
        ratios[level] = {}
        line = f"c={level:<4}"
        batching = results.get("batching", {}).get(level)
        single = results.get("batch size 1", {}).get(level)
        if batching and single:
            ratios[level]["batching_vs_batch1"] = batching["rps"] / single["rps"]
            line += f" batching / batch size 1 = {ratios[level]['batching_vs_batch1']:.2f}x"
        for name in (n for n in entries if n not in ("batching", "batch size 1") and not n.endswith(": off")):
            # A switched worker's "on" is compared with its own "off"; every other worker with "batching".
            reference = results[name.removesuffix(": on") + ": off"][level] if name.endswith(": on") else batching
            if reference is None:
                continue
            cost = cost_figures(results[name][level], reference)
            ratios[level].update({f"{name}: {key}": value for key, value in cost.items()})
            low, high = cost["cost_rps_mean_95ci"]
            what = ("the noise floor: same flags as batching" if name == "batching again"
                    else "the noise floor: the switch changes nothing" if name.startswith("on/off control")
                    else "cost against the same process with logging off" if name.endswith(": on") else "cost")
            line += (f"\n  {name} ({what}): {100 * cost['cost_rps']:+.1f}% of requests/s (median of rounds "
                     f"{100 * cost['cost_rps_median_round']:+.1f}%; mean {100 * cost['cost_rps_mean']:+.1f}%, 95% "
                     f"interval over {cost['interval_over']} {100 * low:+.1f}% to {100 * high:+.1f}%), "
                     f"{100 * cost['cost_cpu']:+.1f}% CPU per request; CPU per request "
                     f"{cost['extra_serving_process_us']:+.1f} us in the serving process itself (its event loop "
                     f"{cost['extra_event_loop_us']:+.1f} us), "
                     f"{cost['extra_children_us']:+.1f} us in its producer child, {cost['extra_broker_us']:+.1f} us in "
                     "the broker")
            if len(cost["cost_rps_sets"]) > 1:
                line += "\n    per set: " + ", ".join(f"{100 * c:+.1f}%" for c in cost["cost_rps_sets"])
        print(line)
    for name, totals in events.items():
        print(f"events, {name}: " + ", ".join(f"{metric.removeprefix('driftline_worker_events_')} {int(value)}"
                                              for metric, value in totals.items()))
    errors = sum(r["errors"] for by_level in results.values() for r in by_level.values())
    print(f"non-200 answers: {errors}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": args.device, "results": results, "ratios": ratios,
                                                   "events": events}, indent=2))


if __name__ == "__main__":
    main()
