"""Benchmark: `driftline detect` with and without --segment-by, and with reference-derived thresholds.

Run by hand:  .venv/bin/python bench/segments.py [--rows 50000] [--repeats 3]

A 50k-row reference and a 50k-row current frame of 20 features (16 numeric, 4
categorical) plus a `segment` column of 5 values; one window. Prints the best wall
and CPU time of `detect` plain, with `segment_by="segment"` and with
``thresholds = "reference"`` (windows of 5k rows, so the reference holds ten
chunks); asserts nothing.
"""
from __future__ import annotations

import argparse
import gc
import time
from typing import Any, Callable

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, default_workers, detect
from driftline.detectors.thresholds.decision import DriftThresholds

SEGMENTS = np.array(["north", "south", "east", "west", "central"])


def make_frame(rng: np.random.Generator, rows: int) -> pd.DataFrame:
    columns: dict[str, Any] = {f"num_{i:02d}": rng.normal(0.0, 1.0 + i % 3, rows) for i in range(16)}
    for i in range(4):
        columns[f"cat_{i}"] = rng.choice(np.array([f"v{j}" for j in range(3 + 3 * i)]), rows)
    columns["segment"] = rng.choice(SEGMENTS, rows, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    return pd.DataFrame(columns)


def best(function: Callable[[], Any], repeats: int) -> tuple[float, float]:
    wall = cpu = float("inf")
    for _ in range(repeats):
        gc.collect()
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall = min(wall, time.perf_counter() - start_wall)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference, current = make_frame(rng, args.rows), make_frame(rng, args.rows)
    print(f"reference {args.rows} rows, current {args.rows} rows, 20 features + 1 segment column "
          f"({len(SEGMENTS)} values), workers {default_workers()}, best of {args.repeats}")
    runs = {
        "detect": lambda: detect(reference, current, columns=ColumnRoles(ignore=["segment"])),
        "detect --segment-by segment": lambda: detect(reference, current,
                                                      columns=ColumnRoles(ignore=["segment"], segment_by="segment")),
        "detect --chunk-size 5000, fixed": lambda: detect(reference, current, columns=ColumnRoles(ignore=["segment"]),
                                                          windowing=Windowing(chunk_size=args.rows // 10)),
        "detect --chunk-size 5000, thresholds=reference": lambda: detect(
            reference, current, columns=ColumnRoles(ignore=["segment"]), windowing=Windowing(chunk_size=args.rows // 10),
            judging=Judging(thresholds=DriftThresholds(threshold_source="reference"))),
    }
    for name, run in runs.items():
        wall, cpu = best(run, args.repeats)
        print(f"{name:48s} {wall:7.3f} s wall {cpu:7.3f} s CPU")


if __name__ == "__main__":
    main()
