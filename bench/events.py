"""Decode + validate rate of the event contract (driftline.events), beside orjson.loads alone.

Run by hand: `.venv/bin/python bench/events.py`. Prints figures; asserts nothing.
Target: >= 200k events/s decode+validate on one core, 20 features.
"""
from __future__ import annotations

import json
import time
import uuid

import orjson

from driftline.events import INFERENCE_SCHEMA, encode_event, parse_inference, rfc3339

N = 300_000


def make_event(i: int) -> bytes:
    features = {f"num_{k}": 1.5 * k + i % 7 for k in range(17)}
    features |= {"region": "north", "segment": None, "channel": "web"}
    return encode_event({
        "schema": INFERENCE_SCHEMA, "event_id": str(uuid.uuid4()), "request_id": str(uuid.uuid4()),
        "ts": rfc3339(), "model": "credit-default", "version": "3", "features": features, "prediction": 0.42,
        "latency_ms": {"total": 12.3, "queue": 4.1, "compute": 7.9}, "status": "ok", "batch_size": 8,
        "cache_hit": False,
    })


def rate(fn, messages) -> float:
    start = time.perf_counter()
    for raw in messages:
        fn(raw)
    return len(messages) / (time.perf_counter() - start)


def main() -> None:
    messages = [make_event(i) for i in range(1000)] * (N // 1000)
    print(f"{len(messages)} events of {len(messages[0])} bytes, 20 features")
    raw_rate = rate(orjson.loads, messages)
    stdlib_rate = rate(json.loads, messages)
    ours = rate(parse_inference, messages)
    print(f"orjson.loads only         {raw_rate:>12,.0f} events/s")
    print(f"json.loads only (stdlib)  {stdlib_rate:>12,.0f} events/s")
    print(f"parse_inference           {ours:>12,.0f} events/s  ({ours / raw_rate:.0%} of orjson.loads alone)")


if __name__ == "__main__":
    main()
