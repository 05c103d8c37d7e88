"""Benchmark: driftline's batch detectors against Evidently 0.7's DataDriftPreset, same data, same run.

Run by hand:  .venv/bin/python bench/detectors.py [--skip-evidently-1m]

One window of 100k rows x (20 numeric + 3 categorical) against a 100k-row
reference, then a 1M-row window against the same reference. For each tool:
wall and CPU time (driftline: best of three runs, end to end and per window with the
reference profiled beforehand as the service does once per baseline;
Evidently: one run, it is slow), peak traced memory (tracemalloc: Python and
numpy allocations, not Arrow string buffers; in a separate run so tracing
does not slow the timed one), the speed ratios, and the largest
absolute difference between the two tools' statistics where the methods
coincide (Evidently picks normalised Wasserstein for numeric and
Jensen-Shannon for categorical columns at this size; driftline computes both
the same way). Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc
from typing import Any, Callable

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import (
    ColumnRoles,
    Judging,
    ReferenceProfile,
    Window,
    default_workers,
    detect,
    detect_window,
    feature_kinds,
)
from driftline.detectors.thresholds.decision import DriftThresholds

NUMERIC = [f"num_{i:02d}" for i in range(20)]
CATEGORICAL = ["cat_region", "cat_plan", "cat_channel"]


def make_frame(rng: np.random.Generator, rows: int, drift: bool) -> pd.DataFrame:
    """Mixed shapes (normal, lognormal, integer, rounded); with `drift`, a quarter of the columns move."""
    columns: dict[str, Any] = {}
    for i, name in enumerate(NUMERIC):
        shift = 0.3 if drift and i % 4 == 0 else 0.0
        kind = i % 4
        if kind == 0:
            columns[name] = rng.normal(shift, 1.0, rows)
        elif kind == 1:
            columns[name] = rng.lognormal(shift, 0.7, rows)
        elif kind == 2:
            columns[name] = rng.poisson(5 + 5 * shift, rows).astype(np.float64)
        else:
            columns[name] = np.round(rng.normal(100 + 10 * shift, 15, rows), 1)
    mix = [0.4, 0.3, 0.2, 0.1] if not drift else [0.3, 0.3, 0.2, 0.2]
    columns["cat_region"] = rng.choice(np.array(["north", "south", "east", "west"]), rows, p=mix)
    columns["cat_plan"] = rng.choice(np.array(["basic", "plus", "pro"]), rows, p=[0.6, 0.3, 0.1])
    columns["cat_channel"] = rng.choice(np.array([f"ch{i}" for i in range(12)]), rows)
    return pd.DataFrame(columns)


def run_driftline(reference: pd.DataFrame, current: pd.DataFrame, multivariate: bool = False) -> dict[str, Any]:
    """`detect` as the command runs it; without the multivariate detectors, which the preset has no peer of."""
    return detect(reference, current, columns=ColumnRoles(categorical=CATEGORICAL),
                  judging=Judging(multivariate=multivariate))


def prepare_reference(reference: pd.DataFrame, current: pd.DataFrame) -> ReferenceProfile:
    """What the service does once per baseline: profile the reference (sorted values, bins, category counts)."""
    return ReferenceProfile(reference, feature_kinds(reference, current, categorical=CATEGORICAL), default_workers())


def run_driftline_window(profile: ReferenceProfile, current: pd.DataFrame) -> dict[str, Any]:
    """What the service does per window, with the reference profiled beforehand."""
    return detect_window(profile, Window(0, current), None, DriftThresholds(), default_workers())


def run_evidently(reference: pd.DataFrame, current: pd.DataFrame) -> Any:
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    definition = DataDefinition(numerical_columns=NUMERIC, categorical_columns=CATEGORICAL)
    return Report([DataDriftPreset()]).run(Dataset.from_pandas(current, data_definition=definition),
                                           Dataset.from_pandas(reference, data_definition=definition))


class Timing:
    """Best wall and CPU (process, all threads) seconds over the repeats."""

    def __init__(self, wall: float, cpu: float):
        self.wall, self.cpu = wall, cpu

    def __str__(self) -> str:
        return f"{self.wall:8.3f} s wall {self.cpu:8.3f} s CPU"


def timed(function: Callable[[], Any], repeats: int) -> tuple[Timing, Any]:
    # CPU time is reported beside wall time because the development machine is
    # shared: other jobs stretch wall time, much less the CPU time a run uses.
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        gc.collect()
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        result = function()
        wall = min(wall, time.perf_counter() - start_wall)
        cpu = min(cpu, time.process_time() - start_cpu)
    return Timing(wall, cpu), result


def traced_peak_mib(function: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def max_difference(ours: dict[str, Any], snapshot: Any) -> tuple[float, int]:
    """Largest |ours - Evidently| over columns whose method coincides, and how many were compared."""
    features = {f["name"]: f for f in ours["windows"][0]["features"]}
    worst, compared = 0.0, 0
    for metric in snapshot.dict()["metrics"]:
        config = metric["config"]
        column, method = config.get("column"), config.get("method", "")
        if column is None:
            continue
        if method.startswith("Wasserstein"):
            ours_value = features[column]["tests"]["wasserstein"]["value"]
        elif method.startswith("Jensen-Shannon") and features[column]["kind"] == "categorical":
            ours_value = features[column]["tests"]["jensenshannon"]["value"]
        else:
            continue
        worst = max(worst, abs(ours_value - float(metric["value"])))
        compared += 1
    return worst, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-evidently-1m", action="store_true", help="do not run Evidently on the 1M window")
    args = parser.parse_args()

    import evidently  # noqa: F401  (import cost kept out of the timings)

    rng = np.random.default_rng(42)
    reference = make_frame(rng, 100_000, drift=False)
    windows = {"100k": make_frame(rng, 100_000, drift=True), "1M": make_frame(rng, 1_000_000, drift=True)}
    print(f"machine: {os.cpu_count()} CPUs; numpy {np.__version__}, pandas {pd.__version__}, "
          f"evidently {evidently.__version__}")
    print(f"load average before the run: {os.getloadavg()[0]:.2f} (the machine is shared; timings vary with load)")
    print(f"reference: {len(reference):,} rows x ({len(NUMERIC)} numeric + {len(CATEGORICAL)} categorical)")

    for label, current in windows.items():
        print(f"\n== window {label}: {len(current):,} rows ==")
        ours_seconds, ours = timed(lambda: run_driftline(reference, current), repeats=3)
        ours_peak = traced_peak_mib(lambda: run_driftline(reference, current))
        profile = prepare_reference(reference, current)
        window_seconds, _ = timed(lambda: run_driftline_window(profile, current), repeats=3)
        window_peak = traced_peak_mib(lambda: run_driftline_window(profile, current))
        multivariate_seconds, _ = timed(lambda: run_driftline(reference, current, multivariate=True), repeats=3)
        drifted = ours["windows"][0]["drifted_features"]
        print(f"driftline, end to end (profile reference + window): {ours_seconds}   "
              f"peak traced memory {ours_peak:7.1f} MiB   drifted {len(drifted)}/{len(NUMERIC) + len(CATEGORICAL)}")
        print(f"driftline, per window (reference profiled before):  {window_seconds}   "
              f"peak traced memory {window_peak:7.1f} MiB")
        print(f"driftline, end to end with multivariate drift:      {multivariate_seconds}   "
              f"(PCA and domain classifier too; the preset has no such test)")
        if label == "1M" and args.skip_evidently_1m:
            print("evidently: skipped (--skip-evidently-1m)")
            continue
        evidently_seconds, snapshot = timed(lambda: run_evidently(reference, current), repeats=1)
        evidently_peak = traced_peak_mib(lambda: run_evidently(reference, current))
        worst, compared = max_difference(ours, snapshot)
        print(f"evidently DataDriftPreset:                          {evidently_seconds}   "
              f"peak traced memory {evidently_peak:7.1f} MiB")
        print(f"speed-up, wall: {evidently_seconds.wall / ours_seconds.wall:6.1f} x end to end, "
              f"{evidently_seconds.wall / window_seconds.wall:6.1f} x per window")
        print(f"speed-up, CPU:  {evidently_seconds.cpu / ours_seconds.cpu:6.1f} x end to end, "
              f"{evidently_seconds.cpu / window_seconds.cpu:6.1f} x per window")
        print(f"memory:   {evidently_peak / ours_peak:6.1f} x less end to end, "
              f"{evidently_peak / window_peak:6.1f} x less per window (traced peaks)")
        print(f"max |difference| over {compared} coinciding statistics: {worst:.3g}")


if __name__ == "__main__":
    main()
