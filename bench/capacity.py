"""The capacity check of `bench/worker.py --capacity`: the worker's recommended replicas against the knee of
its measured p99 latency as the offered load grows.

One `driftline worker` (batching, cache and events off). An open-loop client offers requests at a fixed rate
(each request is due at its time; its latency is counted from then, so a client that has to wait for a free
connection counts the wait: no coordinated omission):

1. at a light load, the worker's own figures are scraped: utilisation rho and service rate mu. They predict
   the load one replica carries at the target utilisation, lambda* = target x mu (where
   `driftline_worker_recommended_replicas` reaches 1), and where it saturates, mu;
2. the offered load then steps up (fractions of the predicted saturation) and p99 is measured at each step;
   the knee is the last step whose p99 stays under KNEE_FACTOR x the light load's p99 and whose answers keep
   up with the offer (the next step breaks one of the two).

Printed: the prediction, every step (offered, answered, p50, p99, the worker's rho and recommended replicas),
the knee, and the ratio knee / lambda* (above 1: the recommendation scales out before the knee).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from http_load import metric_values

KNEE_FACTOR = 3.0  # p99 this many times the light load's: past the knee
KEEP_UP = 0.95  # answered / offered below this: the worker no longer keeps up
STEPS = (0.1, 0.3, 0.5, 0.65, 0.8, 0.9, 1.0, 1.2, 1.5)  # offered load, as fractions of the predicted saturation
HEAD = b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
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
            writer.write(HEAD % len(body) + body)
            status = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - due)
            errors += not status.startswith(b"HTTP/1.1 200")
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


def step(port: int, rate: float, seconds: float, bodies: list[bytes]) -> dict[str, Any]:
    figures = asyncio.run(open_loop(port, rate, seconds, bodies))
    figures.update({name.removeprefix("driftline_worker_"): value
                    for name, value in metric_values(port, SIGNALS).items()})
    return figures


def capacity_check(port: int, bodies: list[bytes], seconds: float, light_rps: float, target: float) -> dict[str, Any]:
    light = step(port, light_rps, seconds, bodies)
    mu = light["service_rate"]
    predicted_target_rps = target * mu
    rows = [dict(light, fraction=None)]
    knee = None
    for fraction in STEPS:
        row = step(port, fraction * mu, seconds, bodies)
        row["fraction"] = fraction
        rows.append(row)
        late = row["p99_ms"] > KNEE_FACTOR * light["p99_ms"]
        behind = row["answered_rps"] < KEEP_UP * row["offered_rps"]
        if late or behind:
            break
        knee = row["offered_rps"]
    return {"light_rps": light_rps, "light_p99_ms": light["p99_ms"], "utilization_at_light": light["utilization"],
            "service_rate": mu, "target_utilization": target, "predicted_rps_at_target": predicted_target_rps,
            "knee_rps": knee, "knee_over_target_rps": (knee / predicted_target_rps) if knee else None, "steps": rows}


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
    knee = result["knee_rps"]
    print(f"knee (p99 under {KNEE_FACTOR:g}x the light load's and answers keeping up): "
          + (f"{knee:.0f} req/s; knee / load at the target = {result['knee_over_target_rps']:.2f} "
             "(above 1: the recommendation asks for another replica before the knee)" if knee else "not reached"))
