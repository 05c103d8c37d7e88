"""Embedding drift: power and false alarms with known truth, against Evidently's EmbeddingsDrift, and CPU per window.

Vectors are a mixture of four Gaussian classes in d dimensions (tests/support/embeddings.py): no drift, a
class-mix change (one class's share from 25 % to 35 %), a small mean shift (half a within-class standard deviation
along one direction), a change of covariance only (half the axes 25 % wider). For each window size and dimension, each method judges windows of
each kind against one reference of `--reference` rows: driftline's `embedding_drift` (the reference fitted once,
each window folded into its summary and judged: what the service does per window; and its domain classifier on
the window's sample alone, one of its five votes), and each method Evidently
0.7's `EmbeddingsDrift` offers at its defaults (`model`: a domain classifier, one split; `ratio`: share of
drifted components by Wasserstein; `distance`: Euclidean distance of the means; `mmd`: the full-kernel MMD),
with its bootstrap option where it has one. Alibi Detect's `MMDDrift` (its defaults: permutation test with 100
permutations at p 0.05, RBF kernel with the median-heuristic bandwidth, pytorch backend on one CPU thread) joins when
`--alibi PYTHON` names the interpreter of a venv that has it: `bash bench/peer_envs/alibi.sh` creates one at
bench/.venvs/alibi (Alibi Detect is not a driftline dependency). It runs in that interpreter as a worker
(bench/peer_envs/alibi_mmd.py) on windows written as .npy files from the peers' seeds: the very windows Evidently
judges when it is given as many (`--alibi-windows`, `--alibi-null-windows`); with fewer, each kind after the first is
fresh draws of the same change (one generator runs through the kinds);
its CPU per window is its `predict` alone, measured in the worker.

Prints one table row per (method, size, dimension): false-alarm rate on no-drift windows, power per kind of
change, and the median CPU seconds per window. Usage:

    .venv/bin/python bench/embeddings.py [--windows 20] [--null-windows 200] [--sizes 100,500,2000] [--dims 32,768]
        [--alibi bench/.venvs/alibi/bin/python]
    .venv/bin/python bench/embeddings.py --cpu-split --dims 32,768   # folding per event vs judging per window
    .venv/bin/python bench/embeddings.py --sizes 500 --dims 768 --kinds mean_shift --windows 60 \
        --methods "driftline embedding_drift,evidently model+bootstrap"   # one cell, more windows
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driftline.detectors.families.embedding_drift import judge_embedding  # noqa: E402
from driftline.embeddings.reference import fit_reference  # noqa: E402
from driftline.embeddings.window import EmbeddingWindow  # noqa: E402
from tests.support.embeddings import KINDS, draw  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_envs.client import PeerProcess  # noqa: E402

# the size of each change: one class from 25 % to 35 % of the traffic, the mean half a within-class standard
# deviation along one direction, half the axes 25 % wider
MIX, SHIFT, SPREAD = 0.35, 0.5, 1.25


def driftline_method(reference_rows: np.ndarray):
    reference = fit_reference(reference_rows, "bench")

    def judge(current: np.ndarray) -> bool:
        window = EmbeddingWindow(reference.dimension, reference).add(current, reference)
        return bool(judge_embedding(reference, window)["drift"])
    return judge


def driftline_classifier_method(reference_rows: np.ndarray):
    """The family's domain classifier alone (one of its five votes): its own false alarms and power."""
    reference = fit_reference(reference_rows, "bench")

    def judge(current: np.ndarray) -> bool:
        window = EmbeddingWindow(reference.dimension, reference).add(current, reference)
        return bool(judge_embedding(reference, window)["domain_classifier"]["drift"])
    return judge


def evidently_methods(reference_rows: np.ndarray) -> dict:
    from evidently.legacy.metrics.data_drift.embedding_drift_methods import (DistanceDriftMethod, MMDDriftMethod,
                                                                              ModelDriftMethod, RatioDriftMethod)
    columns = [f"e{j}" for j in range(reference_rows.shape[1])]
    reference = pd.DataFrame(reference_rows, columns=columns)
    methods = {"evidently model": ModelDriftMethod(), "evidently model+bootstrap": ModelDriftMethod(bootstrap=True),
               "evidently ratio": RatioDriftMethod(), "evidently distance": DistanceDriftMethod(),
               "evidently distance+bootstrap": DistanceDriftMethod(bootstrap=True), "evidently mmd": MMDDriftMethod()}

    def wrap(method):
        def judge(current: np.ndarray) -> bool:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return bool(method(pd.DataFrame(current, columns=columns), reference.copy())[1])
        return judge
    return {name: wrap(method) for name, method in methods.items()}


def alibi_method(reference_rows: np.ndarray, python: str, folder: str):
    """Alibi Detect's MMDDrift in its own venv; judge returns (flag, the worker's CPU seconds for predict)."""
    worker = PeerProcess(python, "alibi_mmd.py", "--backend", "pytorch")
    np.save(f"{folder}/reference.npy", reference_rows.astype(np.float32))
    fit = worker.ask(fit=f"{folder}/reference.npy")
    print(f"# alibi MMDDrift fit {fit['fit_cpu_s']:.2f} CPU s", flush=True)

    def judge(current: np.ndarray) -> tuple[bool, float]:
        np.save(f"{folder}/window.npy", current.astype(np.float32))
        answer = worker.ask(judge=f"{folder}/window.npy")
        return bool(answer["drift"]), float(answer["cpu_s"])
    judge.close = worker.close  # type: ignore[attr-defined]
    return judge


def run_cell(name: str, judge, size: int, dim: int, windows: int, null_windows: int, seed: int,
             kinds: tuple[str, ...] = KINDS) -> dict:
    rng = np.random.default_rng(seed)
    out: dict = {"method": name, "rows": size, "dim": dim}
    cpu = []
    for kind in ("none", *[k for k in KINDS[1:] if k in kinds]):
        count = null_windows if kind == "none" else windows
        fired = 0
        for _ in range(count):
            current = draw(rng, size, dim, kind, shift=SHIFT, spread=SPREAD, mix=MIX)
            started = time.process_time()
            verdict = judge(current)
            spent = time.process_time() - started
            if isinstance(verdict, tuple):  # a peer in another process reports its own CPU
                verdict, spent = verdict
            fired += verdict
            cpu.append(spent)
        out[kind] = (fired, count)
    out["cpu_s"] = float(np.median(cpu))
    return out


def cpu_split(dims: list[int], sizes: list[int]) -> None:
    """The service's cost apart: folding (per event, paid by the collector as events arrive) and judging a
    merged window (per window, whatever its size)."""
    print(f"{'dim':>4} {'rows':>7} {'fold CPU s':>11} {'per 1k events':>14} {'judge CPU s':>12}", flush=True)
    for dim in dims:
        reference = fit_reference(draw(np.random.default_rng(1), 2_000, dim), "bench")
        for size in sizes:
            vectors = draw(np.random.default_rng(size), size, dim)
            started = time.process_time()
            window = EmbeddingWindow(dim, reference)
            for begin in range(0, size, 5_000):  # the collector folds polls of up to 5 000 events
                window.add(vectors[begin:begin + 5_000], reference)
            fold = time.process_time() - started
            started = time.process_time()
            for _ in range(5):
                judge_embedding(reference, window)
            judge = (time.process_time() - started) / 5
            print(f"{dim:>4} {size:>7} {fold:>11.4f} {1000 * fold / size:>14.4f} {judge:>12.4f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=20, help="windows per kind of change and cell")
    parser.add_argument("--null-windows", type=int, default=200, help="no-drift windows per cell for driftline")
    parser.add_argument("--peer-null-windows", type=int, default=40, help="no-drift windows per cell for the peers")
    parser.add_argument("--reference", type=int, default=2_000, help="reference rows")
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--dims", default="32,768")
    parser.add_argument("--peers", default="evidently", help="evidently, or none")
    parser.add_argument("--alibi", default=None, metavar="PYTHON",
                        help="interpreter of a venv with alibi-detect (bash bench/peer_envs/alibi.sh): adds MMDDrift")
    parser.add_argument("--alibi-windows", type=int, default=None,
                        help="windows per kind of change for MMDDrift (default --windows; seconds a window)")
    parser.add_argument("--alibi-null-windows", type=int, default=None,
                        help="no-drift windows per cell for MMDDrift (default --peer-null-windows)")
    parser.add_argument("--skip-slow-peers-above", type=int, default=500,
                        help="window rows above which Evidently's full-kernel MMD and bootstraps are skipped")
    parser.add_argument("--methods", default=None,
                        help="only these methods, by their names in the table (comma-separated)")
    parser.add_argument("--kinds", default=",".join(KINDS[1:]),
                        help="kinds of change to judge besides no drift (comma-separated; fewer: fresh draws of each)")
    parser.add_argument("--cpu-split", action="store_true",
                        help="only time folding and judging apart, at 100 to 100 000 rows")
    args = parser.parse_args()
    if args.cpu_split:
        cpu_split(list(map(int, args.dims.split(","))), [100, 1_000, 10_000, 100_000])
        return
    rows = []
    print(f"{'method':30} {'rows':>5} {'dim':>4} {'false alarms':>13} " + " ".join(f"{k:>12}" for k in KINDS[1:])
          + f" {'CPU s/window':>13}", flush=True)
    folder = tempfile.mkdtemp(prefix="driftline-bench-embeddings-")
    for dim in map(int, args.dims.split(",")):
        reference_rows = draw(np.random.default_rng(1), args.reference, dim)
        started = time.process_time()
        methods = {"driftline embedding_drift": driftline_method(reference_rows),
                   "driftline domain_classifier": driftline_classifier_method(reference_rows)}
        fit_s = time.process_time() - started
        print(f"# d={dim}: driftline's reference fit {fit_s:.2f} CPU s (once per model version)", flush=True)
        if args.peers == "evidently":
            methods.update(evidently_methods(reference_rows))
        if args.alibi:
            methods["alibi MMDDrift"] = alibi_method(reference_rows, args.alibi, folder)
        if args.methods:
            wanted = {name.strip() for name in args.methods.split(",")}
            unknown = wanted - set(methods)
            if unknown:
                parser.error(f"unknown methods {sorted(unknown)}; these run: {sorted(methods)}")
            methods = {name: judge for name, judge in methods.items() if name in wanted}
        for size in map(int, args.sizes.split(",")):
            for name, judge in methods.items():
                slow = ("mmd" in name or "bootstrap" in name) and size > args.skip_slow_peers_above
                if slow:
                    continue
                null = args.null_windows if name.startswith("driftline") else args.peer_null_windows
                windows = args.windows
                if name.startswith("alibi"):  # fewer windows may be asked: the same seeds, so a prefix of the
                    windows = args.alibi_windows or windows  # peers' no-drift windows
                    null = args.alibi_null_windows or null
                row = run_cell(name, judge, size, dim, windows, null, seed=size * 1000 + dim,
                               kinds=tuple(args.kinds.split(",")))
                rows.append(row)
                cells = " ".join(f"{row[k][0] / row[k][1]:>12.2f}" if k in row else f"{'-':>12}" for k in KINDS[1:])
                print(f"{name:30} {size:>5} {dim:>4} {row['none'][0] / row['none'][1]:>9.3f} ({row['none'][1]:>3})"
                      f" {cells} {row['cpu_s']:>13.4f}", flush=True)
        for judge in methods.values():
            getattr(judge, "close", lambda: None)()


if __name__ == "__main__":
    main()
