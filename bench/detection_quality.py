"""Detection quality with known truth: false pages, detection delay and never-paged drifts, per paging policy.

Features of awkward shapes (skewed, heavy-tailed, integer with ties, zero-inflated, bimodal, 300
categories), each one stream, compared with a 20 000-row reference, window by window, at
100, 1 000 and 10 000 rows a window. Streams: no drift; a small persistent drift (effect
0.1), a large one (0.5), each starting after 5 clean windows; a gradual drift (0 to 0.5
over 20 windows). Per policy, measured in this one run:

- ``sequential``: driftline's default, the mixture CUSUM e-detector at the stated rate
  (`[alerts] false_pages_per_model_per_month = 1`, hourly windows, six streams: the line is 4 320);
- ``for_windows``: driftline's per-window verdict, paging after 3 breaching windows in a row;
- ``evidently``: Evidently's defaults (a `Report` with `DataDriftPreset` per window), paging
  on each run of flagged windows (it has no paging rule); fewer windows (it takes seconds a report);
- ``nannyml``: NannyML 0.13's `UnivariateDriftCalculator` with its default methods and thresholds, chunked
  per window (`chunk_size` = the window's rows), paging on each run of alerting windows (it has no paging
  rule either); every window of every stream driftline judges. It runs in its own venv (`--nannyml PYTHON`;
  `bash bench/peer_envs/nannyml.sh` creates bench/.venvs/nannyml; NannyML is not a driftline dependency)
  through the worker bench/peer_envs/nannyml_drift.py, reading the streams as Parquet files.

A page is the start of a run of paging windows of one stream. Reported: false pages per
1 000 no-drift stream-windows, the per-window flag rate there, and per drift kind the median
delay (windows from the drift's start to the first page, 1 = its first window) and the share
of streams never paged. driftline's windows are judged by the batch engine (`driftline detect`),
the same tests and decision rule as the service's.

Then the car-loan case (bench/car_loan.py): NannyML's synthetic car-loan data, read from the NannyML venv's
package data, judged in 500-row chunks by driftline, Evidently and NannyML, each flag placed relative to the
known drift start; flags before it are false.

Usage: .venv/bin/python bench/detection_quality.py [--quick] [--evidently-windows N]
           [--nannyml bench/.venvs/nannyml/bin/python] [--car-loan-only]
           [--per-stream --kinds small --evidently-windows 0 --no-car-loan]  (per stream, without peers)
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_envs.client import PeerProcess  # noqa: E402
from replay_policy import POLICY, flags_and_paging  # noqa: E402

SHAPES = ("skewed", "heavy_tailed", "integer_ties", "zero_inflated", "bimodal", "categories_300")
CATEGORIES = np.array([f"c{i}" for i in range(300)])
_ZIPF = 1.0 / np.arange(1, 301) ** 1.1
_ZIPF /= _ZIPF.sum()
_TILT = np.random.default_rng(99).choice([-1.0, 1.0], 300)
REFERENCE_ROWS = 20_000
PRE_DRIFT = 5
K = 3


def draw(rng: np.random.Generator, n: int, effect: np.ndarray | float) -> pd.DataFrame:
    """`n` rows; `effect` (per row, or one number) moves every feature away from the reference."""
    e = np.broadcast_to(np.asarray(effect, dtype=np.float64), (n,))
    tilted = _ZIPF * np.exp(np.mean(e) * 2.0 * _TILT)
    return pd.DataFrame({
        "skewed": rng.lognormal(e, 1.0),
        "heavy_tailed": rng.standard_t(3, n) + 1.7 * e,
        "integer_ties": rng.poisson(3.0 * (1.0 + e)).astype(float),
        "zero_inflated": np.where(rng.uniform(size=n) < 0.6 * (1.0 - e), 0.0, rng.exponential(1.0 + e)),
        "bimodal": np.where(rng.uniform(size=n) < 0.5 + e / 2.0, rng.normal(-2.0, 1.0, n), rng.normal(2.0, 1.0, n)),
        "categories_300": rng.choice(CATEGORIES, n, p=tilted / tilted.sum()),
    })


def effects(kind: str, windows: int) -> np.ndarray:
    if kind == "none":
        return np.zeros(windows)
    drift = np.arange(windows) >= PRE_DRIFT
    if kind == "gradual":
        return np.where(drift, np.minimum(1.0, (np.arange(windows) - PRE_DRIFT + 1) / 20.0) * 0.5, 0.0)
    return np.where(drift, {"small": 0.1, "large": 0.5}[kind], 0.0)


def stream_frame(rng: np.random.Generator, rows: int, per_window: np.ndarray) -> pd.DataFrame:
    return pd.concat([draw(rng, rows, e) for e in per_window], ignore_index=True)


def driftline_flags(reference: pd.DataFrame, current: pd.DataFrame, rows: int,
                    trace: list[list[dict]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(per-window verdicts, sequential paging) as arrays (windows, features); `trace` gets each window's evidence."""
    report = detect(reference, current, columns=ColumnRoles(categorical=["categories_300"]),
                    windowing=Windowing(chunk_size=rows), judging=Judging(multivariate=False), workers=1)
    return flags_and_paging(report, SHAPES, trace=trace)


class PerStream:
    """Per drift kind and stream (feature shape): per-window power, first-page delays, and what held a page back."""

    def __init__(self) -> None:
        self.power: dict[tuple[str, str], list[float]] = {}
        self.delay: dict[tuple[str, str], list[float]] = {}
        self.over_line: dict[tuple[str, str], list[bool]] = {}
        self.effect: dict[tuple[str, str], list[float]] = {}
        self.false_pages: dict[str, int] = {}
        self.quiet_windows = 0

    def quiet(self, paging: np.ndarray) -> None:
        self.quiet_windows = paging.shape[0]
        for j, shape in enumerate(SHAPES):
            self.false_pages[shape] = int(page_starts(paging)[:, j].sum())

    def add(self, kind: str, flags: np.ndarray, paging: np.ndarray, trace: list[list[dict]]) -> None:
        drifted = trace[PRE_DRIFT:]
        for j, (shape, delay) in enumerate(zip(SHAPES, delays(paging, PRE_DRIFT))):
            key = (kind, shape)
            self.power.setdefault(key, []).append(100.0 * flags[PRE_DRIFT:, j].mean())
            self.delay.setdefault(key, []).append(delay)
            # never paged though the e-value reached the line: the effect's floor held the page back
            self.over_line.setdefault(key, []).append(not math.isfinite(delay) and any(
                w[j].get("e_value", 0.0) >= w[j].get("line", math.inf) for w in drifted))
            self.effect.setdefault(key, []).append(statistics.mean(w[j]["margin"] for w in drifted))

    def table(self, rows: int) -> list[str]:
        lines = []
        for (kind, shape), power in self.power.items():
            median, never = summarise(self.delay[(kind, shape)])
            over = 100.0 * statistics.mean(self.over_line[(kind, shape)])
            effect = statistics.median(self.effect[(kind, shape)])
            lines.append(f"| {rows:,} | {kind} | {shape} | {statistics.mean(power):.0f} % | {never} | {median} | "
                         f"{over:.0f} % | {effect:.2f} | {self.false_pages.get(shape, 0)} / {self.quiet_windows} |")
        return lines


def evidently_flags(reference: pd.DataFrame, current: pd.DataFrame, rows: int, windows: int,
                    numerical: tuple[str, ...] = SHAPES[:-1], categorical: tuple[str, ...] = SHAPES[-1:]) -> np.ndarray:
    """Per window, per column (`numerical` then `categorical`): Evidently's drift flag at its defaults."""
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    columns = list(numerical) + list(categorical)
    definition = DataDefinition(numerical_columns=list(numerical), categorical_columns=list(categorical))
    ref = Dataset.from_pandas(reference, data_definition=definition)
    out = []
    for w in range(windows):
        chunk = Dataset.from_pandas(current.iloc[w * rows:(w + 1) * rows].reset_index(drop=True),
                                    data_definition=definition)
        metrics = Report([DataDriftPreset()]).run(chunk, ref).dict()["metrics"]
        flag = {}
        for m in metrics:
            name = m.get("metric_name", "")
            if not name.startswith("ValueDrift("):
                continue
            column = name.split("column=")[1].split(",")[0]
            threshold = float(name.split("threshold=")[1].rstrip(")"))
            value = float(m["value"])
            flag[column] = value < threshold if "p_value" in name else value >= threshold
        out.append([flag.get(c, False) for c in columns])
    return np.asarray(out)


class NannyML:
    """NannyML's univariate drift in its own venv: `fit` once per window size, `flags` per stream."""

    def __init__(self, python: str) -> None:
        self.worker = PeerProcess(python, "nannyml_drift.py")
        self.folder = tempfile.mkdtemp(prefix="driftline-bench-nannyml-")
        self.cpu_s = 0.0
        self.windows = 0

    def fit(self, reference: pd.DataFrame, columns: list[str], categorical: list[str], rows: int) -> None:
        reference[columns].to_parquet(f"{self.folder}/reference.parquet")
        self.columns = columns
        self.worker.ask(fit=f"{self.folder}/reference.parquet", columns=columns, categorical=categorical,
                        chunk_size=rows)

    def flags(self, current: pd.DataFrame) -> np.ndarray:
        current[self.columns].to_parquet(f"{self.folder}/current.parquet")
        answer = self.worker.ask(judge=f"{self.folder}/current.parquet")
        self.cpu_s += answer["cpu_s"]
        self.last_cpu_s = float(answer["cpu_s"])
        self.windows += len(answer["flags"])
        self.methods = answer["methods"]
        return np.asarray(answer["flags"], dtype=bool)

    def car_loan_dir(self) -> Path:
        return Path(self.worker.ask(car_loan=True)["dir"])


def for_windows(flags: np.ndarray) -> np.ndarray:
    """Paging under K breaching windows in a row."""
    run = np.zeros(flags.shape[1], dtype=int)
    out = np.zeros_like(flags)
    for i, row in enumerate(flags):
        run = np.where(row, run + 1, 0)
        out[i] = run >= K
    return out


def page_starts(paging: np.ndarray) -> np.ndarray:
    before = np.vstack([np.zeros((1, paging.shape[1]), dtype=bool), paging[:-1]])
    return paging & ~before


def delays(paging: np.ndarray, start: int) -> list[float]:
    """Per stream: windows from the drift's start to its first page (inf: never)."""
    out = []
    for column in paging[start:].T:
        hit = np.flatnonzero(column)
        out.append(float(hit[0] + 1) if hit.size else math.inf)
    return out


def summarise(values: list[float]) -> tuple[str, str]:
    finite = [v for v in values if math.isfinite(v)]
    median = f"{statistics.median(finite):.0f}" if finite else "-"
    return median, f"{100.0 * (len(values) - len(finite)) / len(values):.0f} %"


def streams_table(args: argparse.Namespace, nannyml: NannyML | None,
                  per_stream_lines: list[str]) -> list[list[str]]:
    sizes = (100, 1000) if args.quick else tuple(int(n) for n in args.sizes.split(","))
    with_evidently = args.evidently_windows > 0
    methods = ("sequential", "for_windows") + (("evidently",) if with_evidently else ()) + (("nannyml",) if nannyml else ())
    rng = np.random.default_rng(2026)
    reference = draw(rng, REFERENCE_ROWS, 0.0)
    table = []
    kinds = tuple(k for k in args.kinds.split(",") if k)
    started = time.perf_counter()
    for rows in sizes:
        quiet = (60 if args.quick else args.quiet_windows) if rows < 10_000 else min(60, args.quiet_windows)
        drift_windows = PRE_DRIFT + (20 if rows < 10_000 else 12) + (0 if args.quick else 10)
        results: dict[str, dict[str, list]] = {m: {} for m in methods}
        nannyml_cpu, nannyml_windows = (nannyml.cpu_s, nannyml.windows) if nannyml else (0.0, 0)
        if nannyml:
            nannyml.fit(reference, list(SHAPES), [SHAPES[-1]], rows)
        current = stream_frame(rng, rows, effects("none", quiet))
        flags, paging = driftline_flags(reference, current, rows)
        per_stream = PerStream()
        per_stream.quiet(paging)
        judged = [("sequential", paging, flags, quiet), ("for_windows", for_windows(flags), flags, quiet)]
        if with_evidently:
            ev_windows = min(args.evidently_windows, quiet)
            ev = evidently_flags(reference, current, rows, ev_windows)
            judged.append(("evidently", ev, ev, ev_windows))
        if nannyml:
            nm = nannyml.flags(current)
            judged.append(("nannyml", nm, nm, quiet))
        for method, pages, flagged, n in judged:
            results[method]["false"] = [1000.0 * page_starts(pages).sum() / (n * len(SHAPES))]
            results[method]["flag_rate"] = [100.0 * flagged.mean()]
        for kind in kinds:
            for rep in range(args.replicates):
                per_window = effects(kind, drift_windows)
                current = stream_frame(rng, rows, per_window)
                trace: list[list[dict]] = []
                flags, paging = driftline_flags(reference, current, rows, trace)
                per_stream.add(kind, flags, paging, trace)
                results["sequential"].setdefault(kind, []).extend(delays(paging, PRE_DRIFT))
                results["for_windows"].setdefault(kind, []).extend(delays(for_windows(flags), PRE_DRIFT))
                results["sequential"].setdefault(f"{kind}_power", []).append(100.0 * flags[PRE_DRIFT:].mean())
                if nannyml:  # every window of every replicate, as driftline's
                    results["nannyml"].setdefault(kind, []).extend(delays(nannyml.flags(current), PRE_DRIFT))
                if rep == 0 and with_evidently:  # Evidently: its drifted windows only, one replicate (seconds a report)
                    drifted = current.iloc[PRE_DRIFT * rows:].reset_index(drop=True)
                    ev = evidently_flags(reference, drifted, rows, min(args.evidently_drift_windows,
                                                                       drift_windows - PRE_DRIFT))
                    results["evidently"].setdefault(kind, []).extend(delays(ev, 0))
        for method, r in results.items():
            cells = [f"{rows:,}", method, f"{r['false'][0]:.1f}", f"{r['flag_rate'][0]:.1f} %"]
            for kind in ("small", "large", "gradual"):
                cells += list(summarise(r[kind])) if kind in r else ["-", "-"]
            table.append(cells)
            print("# row: | " + " | ".join(cells) + " |", file=sys.stderr, flush=True)  # kept if the run is cut
        power = {k: f"{statistics.mean(v):.0f} %" for k, v in results["sequential"].items() if k.endswith("_power")}
        if args.per_stream:
            per_stream_lines.extend(per_stream.table(rows))
        peer = "" if not nannyml else (f"; NannyML {1000 * (nannyml.cpu_s - nannyml_cpu) / (nannyml.windows - nannyml_windows):.1f}"
                                       f" CPU ms a window in its worker")
        print(f"# {rows} rows: per-window power of driftline's verdict: small {power.get('small_power', '-')}, "
              f"large {power.get('large_power', '-')}, gradual {power.get('gradual_power', '-')} "
              f"({time.perf_counter() - started:.0f} s so far{peer})", file=sys.stderr, flush=True)
    return table


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer windows (a smoke run)")
    parser.add_argument("--evidently-windows", type=int, default=20,
                        help="no-drift windows Evidently judges (0: leave Evidently out)")
    parser.add_argument("--evidently-drift-windows", type=int, default=10,
                        help="drifted windows Evidently judges per drift kind (its first replicate)")
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--kinds", default="small,large,gradual", help="drift kinds to run (comma-separated)")
    parser.add_argument("--per-stream", action="store_true",
                        help="also a table per stream (feature shape) of the sequential policy, per drift kind")
    parser.add_argument("--sizes", default="100,1000,10000", help="rows per window")
    parser.add_argument("--quiet-windows", type=int, default=200,
                        help="no-drift windows per stream (at most 60 at 10 000 rows)")
    parser.add_argument("--nannyml", metavar="PYTHON", default=None,
                        help="interpreter of a venv with nannyml 0.13 (bash bench/peer_envs/nannyml.sh): adds NannyML "
                             "and the car-loan case")
    parser.add_argument("--car-loan-dir", default=None,
                        help="a folder with NannyML's synthetic_car_loan_*.csv (default: the NannyML venv's package data)")
    parser.add_argument("--car-loan-only", action="store_true", help="only the car-loan case")
    parser.add_argument("--no-car-loan", action="store_true", help="only the feature streams")
    args = parser.parse_args()
    nannyml = NannyML(args.nannyml) if args.nannyml else None
    started = time.perf_counter()
    per_stream_lines: list[str] = []
    table = [] if args.car_loan_only else streams_table(args, nannyml, per_stream_lines)
    if table:
        line = POLICY.line(len(SHAPES))
        print(f"detection quality, {date.today().isoformat()}: {len(SHAPES)} feature streams, reference "
              f"{REFERENCE_ROWS:,} rows; sequential line {line:.0f} (stated rate: {1000.0 / line:.2f} false pages per "
              f"1 000 stream-windows)")
        print("| rows/window | policy | false pages / 1 000 no-drift windows | per-window flags (no drift) | "
              "small: median delay | small: never paged | large: median delay | large: never paged | "
              "gradual: median delay | gradual: never paged |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for cells in table:
            print("| " + " | ".join(cells) + " |")
        if nannyml:
            print(f"(NannyML methods: {nannyml.methods}; {1000 * nannyml.cpu_s / max(nannyml.windows, 1):.1f} CPU ms "
                  f"per window in its worker)")
        if per_stream_lines:
            print(f"\nper stream, sequential policy ({args.replicates} replicates; effect over floor: the drifted "
                  f"windows' mean of the paging rule's effect over its floor, median over replicates, 1 = at the floor)")
            print("| rows/window | drift | stream | per-window power | never paged | median delay | never paged, "
                  "e-value over the line | effect over floor | false pages (no drift) |")
            print("|---|---|---|---|---|---|---|---|---|")
            print("\n".join(per_stream_lines))
        print(f"({time.perf_counter() - started:.0f} s)", flush=True)
    folder = Path(args.car_loan_dir) if args.car_loan_dir else nannyml.car_loan_dir() if nannyml else None
    if args.no_car_loan:
        pass
    elif folder is None:
        print("car-loan case skipped: give --nannyml (its package data) or --car-loan-dir", file=sys.stderr)
    else:
        from car_loan import car_loan_case
        car_loan_case(folder, nannyml, evidently_flags if args.evidently_windows > 0 else None)
        print(f"({time.perf_counter() - started:.0f} s)")
    if nannyml:
        nannyml.worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
