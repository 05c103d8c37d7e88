"""Window state throughput: EventBatch.from_events + WindowState.add_batch, events per second.

Events have 20 features (17 numeric, 3 categorical), a score prediction, three
latency parts and raw inputs, as the collector sees them after validation. Peers
measured in the same run on the same events: orjson decoding of the raw messages
(what the collector spends per event anyway) and pandas building a DataFrame from
the feature dicts (the obvious columnar alternative to `from_events`).

Then the flush path (a stored row decoded, merged with a poll's partial state and
encoded again, as `driftline.collector.store.merge_window_row` does) over one window, for ordinary
traffic and for a cardinality flood (`--flood-events` events whose 3 categorical features
carry unique 200-character values): the encoded row's size and the time per flush.

    .venv/bin/python bench/window_state.py [--events 100000] [--batch 5000] [--repeat 3] [--flood-events 60000]

Prints figures; asserts nothing (timings are not tests).
"""
from __future__ import annotations

import argparse
import time
import uuid

import numpy as np
import orjson
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.events import parse_inference
from driftline.window_state import EventBatch, WindowState

NUMERIC = [f"num_{i:02d}" for i in range(17)]
CATEGORICAL = ["region", "channel", "tier"]
T0 = 1_767_225_600_000


def training(n: int, rng: np.random.Generator) -> pd.DataFrame:
    frame = pd.DataFrame({name: rng.normal(i, 1 + i, n) for i, name in enumerate(NUMERIC)})
    for name in CATEGORICAL:
        frame[name] = rng.choice(["a", "b", "c", "d"], n).astype(object)
    return frame


def messages(n: int, rng: np.random.Generator, flood: bool = False) -> list[bytes]:
    numbers = {name: rng.normal(i, 1 + i, n) for i, name in enumerate(NUMERIC)}
    if flood:  # every value unique and 200 characters long
        categories = {name: np.array([f"{name}-{i:08d}-".ljust(200, "z") for i in range(n)]) for name in CATEGORICAL}
    else:
        categories = {name: rng.choice(["a", "b", "c", "d", "e"], n) for name in CATEGORICAL}
    latency = rng.lognormal(3, 0.6, n)
    scores = rng.random(n)
    out = []
    for i in range(n):
        features = {name: float(numbers[name][i]) for name in NUMERIC}
        features.update({name: str(categories[name][i]) for name in CATEGORICAL})
        out.append(orjson.dumps({
            "schema": "driftline.inference/v1", "event_id": uuid.uuid4().hex, "request_id": uuid.uuid4().hex,
            "ts": T0 + i, "model": "bench", "version": "1", "features": features,
            "inputs": {"raw": float(numbers[NUMERIC[0]][i])}, "prediction": float(scores[i]),
            "latency_ms": {"total": float(latency[i]), "queue": float(latency[i] / 4),
                           "compute": float(latency[i] / 2)},
            "status": "ok"}))
    return out


def best_rate(n: int, repeat: int, run) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5_000, help="events per add_batch (one poll)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flood-events", type=int, default=60_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    baseline = compute_baseline(training(50_000, rng), predictions=rng.random(50_000))
    raw = messages(args.events, rng)
    dicts = [orjson.loads(m) for m in raw]
    parsed = [parse_inference(m) for m in raw]
    batches = [slice(i, i + args.batch) for i in range(0, args.events, args.batch)]

    def fold(events):
        state = WindowState.empty(baseline)
        for part in batches:
            state.add_batch(EventBatch.from_events(events[part]))
        return state

    def columns_only(events):
        for part in batches:
            EventBatch.from_events(events[part])

    prebuilt = [EventBatch.from_events(dicts[part]) for part in batches]

    def add_only():
        state = WindowState.empty(baseline)
        for batch in prebuilt:
            state.add_batch(batch)

    n, r = args.events, args.repeat
    rates = {
        "from_events + add_batch (InferenceEvent)": best_rate(n, r, lambda: fold(parsed)),
        "from_events + add_batch (dict)": best_rate(n, r, lambda: fold(dicts)),
        "from_events only (dict)": best_rate(n, r, lambda: columns_only(dicts)),
        "add_batch only": best_rate(n, r, add_only),
        "peer: orjson.loads of the messages": best_rate(n, r, lambda: [orjson.loads(m) for m in raw]),
        "peer: pandas.DataFrame(feature dicts)": best_rate(
            n, r, lambda: [pd.DataFrame([d["features"] for d in dicts[part]]) for part in batches]),
    }
    print(f"{args.events} events, 20 features (17 numeric + 3 categorical), batches of {args.batch}, "
          f"best of {args.repeat}")
    for label, rate in rates.items():
        print(f"  {label:44s} {rate:>12,.0f} events/s")
    ours = rates["from_events + add_batch (InferenceEvent)"]
    print(f"  ratio: window state / orjson decode = {ours / rates['peer: orjson.loads of the messages']:.2f}; "
          f"from_events / pandas DataFrame = "
          f"{rates['from_events only (dict)'] / rates['peer: pandas.DataFrame(feature dicts)']:.2f}")

    state = fold(parsed)
    blob = state.to_bytes()
    empty_sample = WindowState.empty(baseline, sample_size=0)
    for part in batches:
        empty_sample.add_batch(EventBatch.from_events(parsed[part]))
    print(f"  state blob for {state.events} events: {len(blob):,} bytes "
          f"({len(empty_sample.to_bytes()):,} without the {len(state.sample)}-event sample)")
    small = WindowState.empty(baseline).add_batch(EventBatch.from_events(parsed[:1000]))
    print(f"  state blob for 1000 events: {len(small.to_bytes()):,} bytes")
    start = time.perf_counter()
    WindowState.from_bytes(blob, baseline)
    print(f"  from_bytes: {1000 * (time.perf_counter() - start):.1f} ms; "
          f"to_bytes: {1000 * _time(state.to_bytes):.1f} ms; merge: {1000 * _time(lambda: state.merge(state)):.1f} ms")

    n = args.flood_events
    cases = {"ordinary": parsed[:n] if n <= len(parsed) else [parse_inference(m) for m in messages(n, rng)],
             "flood (3 features, unique 200-char values)": [parse_inference(m) for m in messages(n, rng, flood=True)]}
    print(f"flush path, one window of {n} events, a flush per {args.batch}-event poll:")
    for label, events in cases.items():
        size, mean_ms, last_ms = flush_path(baseline, events, args.batch)
        print(f"  {label:44s} row {size:>10,} bytes; flush {mean_ms:6.1f} ms mean, {last_ms:6.1f} ms last")


def flush_path(baseline, events: list, batch: int) -> tuple[int, float, float]:
    """One window's row through a flush per poll: (final blob bytes, mean and last ms per flush)."""
    stored = WindowState.empty(baseline).to_bytes()
    times = []
    for i in range(0, len(events), batch):
        partial = WindowState.empty(baseline).add_batch(EventBatch.from_events(events[i:i + batch]))
        start = time.perf_counter()
        stored = WindowState.from_bytes(stored, baseline).merge(partial).to_bytes()
        times.append(time.perf_counter() - start)
    return len(stored), 1000 * sum(times) / len(times), 1000 * times[-1]


def _time(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
