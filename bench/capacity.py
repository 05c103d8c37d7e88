"""The capacity check of `bench/worker.py --capacity`: the worker's recommended replicas against the knee of
its measured p99 latency as the offered load grows.

One `driftline worker` (batching, cache and events off; its signal window as long as a step). An open-loop
client offers requests at a fixed rate (each request is due at its time; its latency is counted from then,
so a client that has to wait for a free connection counts the wait: no coordinated omission):

1. at a light load the worker's own figures are scraped: utilisation rho and service rate mu, which predict
   the load one replica carries at the target utilisation, target x mu;
2. the offered load then steps up (fractions of that mu) and, at each step, p99 and the worker's live
   `driftline_worker_recommended_replicas` (rho / target at that load) are measured. The knee is the last
   load whose p99 stays under KNEE_FACTOR x the light load's p99 with the answers keeping up; the crossing is
   the load where the live recommendation reaches 1 replica (interpolated between steps).

Printed: every step, the knee, the crossing and knee / crossing (at least 1: an autoscaler following the
recommendation adds a replica before the knee), and how far the light load's prediction was from the knee.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from http_load import post_predict

KNEE_FACTOR = 3.0  # p99 this many times the light load's: past the knee
KEEP_UP = 0.95  # answered / offered below this: the worker no longer keeps up
# offered load, as fractions of the light load's service rate (which batching may raise and contention lower)
STEPS = (0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0)
SIGNALS = ("driftline_worker_utilization", "driftline_worker_service_rate", "driftline_worker_recommended_replicas",
           "driftline_worker_arrival_rate")


async def open_loop(port: int, rate: float, seconds: float, bodies: list[bytes], connections: int = 64
                    ) -> dict[str, Any]:
    """Offer `rate` requests/s for `seconds`; latencies from each request's due time."""
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(connections):
        free.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    latencies: list[float] = []
    errors = 0
    tasks = set()

    async def send(due: float, body: bytes) -> None:
        nonlocal errors
        reader, writer = await free.get()
        try:
            ok = await post_predict(reader, writer, body)
            latencies.append(time.perf_counter() - due)
            errors += not ok
        finally:
            free.put_nowait((reader, writer))

    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send(due, bodies[i % len(bodies)]))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    offered_s = time.perf_counter() - start
    await asyncio.wait(tasks, timeout=30) if tasks else None
    while not free.empty():
        _, writer = free.get_nowait()
        writer.close()
    latencies.sort()
    pick = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan"))
    return {"offered_rps": rate, "answered_rps": len(latencies) / max(offered_s, 1e-9), "p50_ms": pick(0.5),
            "p99_ms": pick(0.99), "errors": errors, "sent": n, "answered": len(latencies)}


def signals(port: int) -> dict[str, float]:
    """The worker's capacity gauges (labelled by model and device), NaN where absent."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    out = {name.removeprefix("driftline_worker_"): float("nan") for name in SIGNALS}
    for family in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics").text):
        for sample in family.samples:
            if sample.name in SIGNALS:
                out[sample.name.removeprefix("driftline_worker_")] = sample.value
    return out


def step(port: int, rate: float, seconds: float, bodies: list[bytes]) -> dict[str, Any]:
    figures = asyncio.run(open_loop(port, rate, seconds, bodies))
    figures.update(signals(port))
    return figures


def capacity_check(port: int, bodies: list[bytes], seconds: float, light_rps: float, target: float) -> dict[str, Any]:
    light = step(port, light_rps, seconds, bodies)
    mu = light["service_rate"]
    if not mu > 0:
        raise SystemExit(f"the worker reported no service rate at {light_rps} req/s: {light}")
    rows = [dict(light, fraction=None)]
    knee = crossing = knee_utilization = None
    for fraction in STEPS:
        row = step(port, fraction * mu, seconds, bodies)
        row["fraction"] = fraction
        previous, rows = rows[-1], rows + [row]
        if crossing is None and row["recommended_replicas"] >= 1.0:  # where the recommendation asks for a 2nd
            low, high = previous["recommended_replicas"], row["recommended_replicas"]
            share = (1.0 - low) / (high - low) if high > low else 1.0
            crossing = previous["offered_rps"] + share * (row["offered_rps"] - previous["offered_rps"])
        broken = (row["p99_ms"] > KNEE_FACTOR * light["p99_ms"]
                  or row["answered_rps"] < KEEP_UP * row["offered_rps"])
        if knee is None and broken:
            knee = previous["offered_rps"]
            knee_utilization = previous["utilization"]
        if knee is not None and crossing is not None:
            break
    return {"light_rps": light_rps, "light_p99_ms": light["p99_ms"], "utilization_at_light": light["utilization"],
            "service_rate": mu, "target_utilization": target, "predicted_rps_at_target": target * mu,
            "knee_rps": knee, "utilization_at_knee": knee_utilization, "recommendation_crosses_1_rps": crossing,
            "knee_over_crossing": (knee / crossing) if knee and crossing else None, "steps": rows}


def report(result: dict[str, Any]) -> None:
    print(f"capacity check: light load {result['light_rps']:.0f} req/s, p99 {result['light_p99_ms']:.1f} ms, "
          f"rho {result['utilization_at_light']:.3f}, mu {result['service_rate']:.0f} req/s per busy second")
    print(f"prediction: one replica at target rho {result['target_utilization']:.2f} carries "
          f"{result['predicted_rps_at_target']:.0f} req/s (recommended replicas reach 1 there); saturates near "
          f"{result['service_rate']:.0f} req/s")
    print(f"{'offered':>9} {'answered':>9} {'p50 ms':>8} {'p99 ms':>8} {'rho':>6} {'replicas':>9}")
    for row in result["steps"]:
        print(f"{row['offered_rps']:>9.0f} {row['answered_rps']:>9.0f} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} "
              f"{row['utilization']:>6.3f} {row['recommended_replicas']:>9.2f}")
    knee, crossing = result["knee_rps"], result["recommendation_crosses_1_rps"]
    print(f"knee (last load with p99 under {KNEE_FACTOR:g}x the light load's and answers keeping up): "
          + (f"{knee:.0f} req/s" if knee else "not reached"))
    print("live recommendation reaches 1 replica at: " + (f"{crossing:.0f} req/s" if crossing else "not reached"))
    if knee and crossing:
        print(f"knee / that load = {knee / crossing:.2f} (at least 1: an autoscaler on the recommendation adds a "
              f"replica before the knee); the light load's prediction ({result['predicted_rps_at_target']:.0f} "
              f"req/s at the target) / knee = {result['predicted_rps_at_target'] / knee:.2f}")
    if result["utilization_at_knee"] is not None:
        print(f"utilisation at the knee: {result['utilization_at_knee']:.2f} (a [capacity] target_utilization below "
              "it keeps the recommendation ahead of the knee on this machine)")
