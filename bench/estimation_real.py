"""Benchmark: estimated model quality against what came true, driftline vs NannyML 0.13.1, on NannyML's data sets.

The data sets NannyML ships inside its wheel (nannyml/datasets/data/), read from the NannyML venv
(`bash bench/peer_envs/nannyml.sh`, bench/.venvs/nannyml) or from `--data-dir`:

- ``census``: real data, the US census (ACS) Massachusetts employment model: reference 2015, analysis
  2016-2018 (about 209 000 rows), score ``predicted_probability``, decision ``prediction``, label ``employed``;
- ``car_loan``: synthetic binary, NannyML's car-loan model (``y_pred_proba``, ``y_pred``, ``repaid``);
- ``multiclass``: synthetic three-class credit-card model (one probability column per class, ``y_pred``);
- ``car_price``: synthetic regression (``y_pred``, ``y_true``; seven features).

Each at two chunk sizes, every analysis chunk estimated by both tools in one run (the analysis cut to whole
chunks, so both see the same rows): driftline as a user drives it, `driftline detect` through its Python entry
point (`driftline.detectors.batch.engine.detect` with ``--prediction``, ``--label`` and, for the binary sets,
``--prediction-class``; the current data holds the labels, as `detect` reads them), NannyML's CBPE (binary,
multiclass; ``y_pred`` given) and DLE (regression) at their defaults in their own venv through
bench/peer_envs/nannyml_estimation.py. The realized value of every chunk is computed here from its labels and the
model's decisions (scikit-learn), the same truth for both. Per data set, chunk size and metric: the mean
|estimate - realized| of each tool, their ratio (driftline / NannyML, under 1: driftline closer), the share of
chunks whose realized value lies inside each tool's band (driftline: z = `ESTIMATED_QUALITY_Z` = 3, nominal 99.7 %;
NannyML: its confidence boundaries, ± 3 sampling errors) and CPU seconds (driftline's `detect` over the whole
run, its drift tests on every column included; NannyML's fit and estimate in its worker). Coverage is also
given over the chunks before a synthetic set's known change of relation (car loan: analysis row 25 000, as
NannyML's documentation places it; multiclass: row 30 000, where realized accuracy falls from 0.76 to 0.57 while
both estimates fall only to 0.64), and a second table says where driftline's ``estimation_invalid`` was raised
over the chunks in order. Prints tables; asserts nothing.

Usage: .venv/bin/python bench/estimation_real.py --nannyml bench/.venvs/nannyml/bin/python [--sets census,...]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_envs.client import PeerProcess  # noqa: E402


@dataclass(frozen=True)
class DataSet:
    """One of NannyML's data sets: files, columns, chunk sizes and which metric names each tool uses."""

    name: str
    files: tuple[str, str, str]  # reference, analysis, analysis targets (joined on `id`)
    label: str
    prediction: str | list[str]  # driftline's --prediction: a score, a regression's value or class probabilities
    decision: str  # the model's own decision (NannyML's y_pred; driftline's --prediction-class when binary)
    sizes: tuple[int, ...]
    metrics: dict[str, str]  # driftline's metric name -> NannyML's
    classes: list[str] = field(default_factory=list)  # multiclass: class names in the probability columns' order
    change_row: int | None = None  # the analysis row where the synthetic set's relation changes (None: not known)
    drop: tuple[str, ...] = ("id", "timestamp")  # not model inputs

    @property
    def kind(self) -> str:
        return "regression" if "mae" in self.metrics else "multiclass" if self.classes else "binary"


BINARY = {m: m for m in ("roc_auc", "accuracy", "precision", "recall", "f1")}
MC_CLASSES = ["highstreet_card", "prepaid_card", "upmarket_card"]
DATA_SETS = {
    "census": DataSet("census", ("employment_MA_reference.pq", "employment_MA_analysis.pq",
                                 "employment_MA_analysis_target.pq"), "employed", "predicted_probability",
                      "prediction", (10_000, 2_000), BINARY, drop=("id", "year")),
    "car_loan": DataSet("car_loan", ("synthetic_car_loan_reference.csv", "synthetic_car_loan_analysis.csv",
                                     "synthetic_car_loan_analysis_target.csv"), "repaid", "y_pred_proba", "y_pred",
                        (5_000, 1_000), BINARY, change_row=25_000),
    "multiclass": DataSet("multiclass", ("mc_reference.csv", "mc_analysis.csv", "mc_analysis_gt.csv"), "y_true",
                          [f"y_pred_proba_{c}" for c in MC_CLASSES], "y_pred", (6_000, 1_000),
                          {"accuracy": "accuracy", "macro_f1": "f1"}, classes=MC_CLASSES, change_row=30_000),
    "car_price": DataSet("car_price", ("regression_synthetic_reference.csv", "regression_synthetic_analysis.csv",
                                       "regression_synthetic_analysis_targets.csv"), "y_true", "y_pred", "y_pred",
                         (6_000, 1_000), {"mae": "mae", "rmse": "rmse"}),
}


def read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".pq" else pd.read_csv(path)


def load(folder: Path, ds: DataSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(reference, analysis with its targets joined), model inputs as the tools read them."""
    paths = [folder / f for f in ds.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"{', '.join(missing)} not found: give --nannyml (its package data) or --data-dir")
    reference, analysis, targets = (read(p) for p in paths)
    analysis = analysis.merge(targets, on="id", how="left", validate="one_to_one")
    frames = []
    for frame in (reference, analysis):
        frame = frame.drop(columns=[c for c in ds.drop if c in frame.columns])
        for column in frame.columns:  # census: pandas categories of codes -> strings (one dtype in both files)
            if isinstance(frame[column].dtype, pd.CategoricalDtype) or frame[column].dtype == bool:
                frame[column] = frame[column].astype(str)
        frames.append(frame.reset_index(drop=True))
    return frames[0], frames[1]


def realized(ds: DataSet, chunk: pd.DataFrame) -> dict[str, float]:
    """Each metric of the chunk from its labels and the model's decisions: the truth both tools are scored on."""
    y = chunk[ds.label].to_numpy()
    if ds.kind == "regression":
        error = y - chunk[ds.prediction].to_numpy()
        return {"mae": float(np.abs(error).mean()), "rmse": float(np.sqrt((error ** 2).mean()))}
    decided = chunk[ds.decision].to_numpy()
    if ds.kind == "multiclass":
        return {"accuracy": accuracy_score(y, decided),
                "macro_f1": f1_score(y, decided, labels=ds.classes, average="macro", zero_division=0)}
    return {"roc_auc": roc_auc_score(y, chunk[str(ds.prediction)]), "accuracy": accuracy_score(y, decided),
            "precision": precision_score(y, decided, zero_division=0),
            "recall": recall_score(y, decided, zero_division=0), "f1": f1_score(y, decided, zero_division=0)}


def driftline_chunks(ds: DataSet, reference: pd.DataFrame, analysis: pd.DataFrame,
                     size: int) -> tuple[list[dict[str, Any]], float, list[bool]]:
    """Per chunk: metric -> (value, lower, upper) from `detect`; its CPU seconds; per chunk its
    ``estimation_invalid`` (the estimates no longer hold against the labels so far)."""
    categorical = [c for c in reference.columns if reference[c].dtype == object and c not in (ds.label, ds.decision)]
    prediction = ",".join(ds.prediction) if isinstance(ds.prediction, list) else ds.prediction
    ignore = [ds.decision] if ds.kind == "multiclass" else []  # its estimate follows the most probable class
    started = time.process_time()
    report = detect(reference, analysis,
                    columns=ColumnRoles(categorical=categorical, prediction=prediction, label=ds.label, ignore=ignore,
                                        prediction_class=ds.decision if ds.kind == "binary" else None),
                    windowing=Windowing(chunk_size=size), judging=Judging(multivariate=False), workers=1)
    cpu = time.process_time() - started
    out = []
    for window in report["windows"]:
        estimated = window["performance"]["estimated"]
        out.append({m: (e["value"], e["lower"], e["upper"]) for m, e in estimated.items()})
    return out, cpu, [bool(w["performance"].get("estimation_invalid")) for w in report["windows"]]


class NannyML:
    """NannyML's CBPE and DLE in its own venv (bench/peer_envs/nannyml_estimation.py)."""

    def __init__(self, python: str) -> None:
        self.worker = PeerProcess(python, "nannyml_estimation.py")
        self.folder = tempfile.mkdtemp(prefix="driftline-bench-nannyml-")

    def data_dir(self) -> Path:
        return Path(self.worker.ask(data=True)["dir"])

    def chunks(self, ds: DataSet, reference: pd.DataFrame, analysis: pd.DataFrame,
               size: int) -> tuple[list[dict[str, Any]], float]:
        reference.to_parquet(f"{self.folder}/reference.parquet")
        analysis.to_parquet(f"{self.folder}/analysis.parquet")
        common = {"reference": f"{self.folder}/reference.parquet", "analysis": f"{self.folder}/analysis.parquet",
                  "chunk_size": size, "y_true": ds.label, "y_pred": ds.decision,
                  "metrics": sorted(set(ds.metrics.values()))}
        if ds.kind == "regression":
            features = [c for c in reference.columns if c not in (ds.label, ds.decision)]
            answer = self.worker.ask(estimate="dle", features=features, **common)
        else:
            proba = ({c: f"y_pred_proba_{c}" for c in ds.classes} if ds.kind == "multiclass" else ds.prediction)
            answer = self.worker.ask(estimate="cbpe", y_pred_proba=proba,
                                     problem_type=f"classification_{'multiclass' if ds.classes else 'binary'}",
                                     **common)
        out = [{ours: (c[theirs]["value"], c[theirs]["lower"], c[theirs]["upper"])
                for ours, theirs in ds.metrics.items()} for c in answer["chunks"]]
        return out, float(answer["cpu_s"])


def score(estimates: list[dict[str, Any]], truth: list[dict[str, float]], metric: str,
          chunks: int | None = None) -> tuple[float, float, int]:
    """(mean |estimate - realized|, share of chunks with the realized value inside the band, chunks scored), over
    the first `chunks` chunks (all: None)."""
    errors, inside = [], []
    for estimate, real in list(zip(estimates, truth))[:chunks]:
        if metric not in estimate or estimate[metric][0] is None:
            continue
        value, lower, upper = estimate[metric]
        errors.append(abs(value - real[metric]))
        inside.append(lower is not None and upper is not None and lower <= real[metric] <= upper)
    return (float(np.mean(errors)) if errors else float("nan"), float(np.mean(inside)) if inside else float("nan"),
            len(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nannyml", metavar="PYTHON", default="bench/.venvs/nannyml/bin/python",
                        help="interpreter of a venv with nannyml 0.13.1 (bash bench/peer_envs/nannyml.sh)")
    parser.add_argument("--data-dir", default=None, help="a folder with NannyML's data files (default: its package's)")
    parser.add_argument("--sets", default=",".join(DATA_SETS), help="data sets to run (comma-separated)")
    args = parser.parse_args()
    nannyml = NannyML(args.nannyml)
    folder = Path(args.data_dir) if args.data_dir else nannyml.data_dir()
    print(f"estimated vs realized quality, {date.today().isoformat()}: driftline detect vs NannyML 0.13.1 "
          f"(CBPE / DLE), every analysis chunk")
    print("| data set | rows/chunk | chunks (before the change) | metric | driftline MAE | NannyML MAE | ratio | "
          "coverage, all chunks: driftline / NannyML | coverage before the change: driftline / NannyML | "
          "CPU s driftline / NannyML |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    invalid = []
    for name in args.sets.split(","):
        ds = DATA_SETS[name]
        reference, analysis = load(folder, ds)
        for size in ds.sizes:
            current = analysis.iloc[: len(analysis) // size * size]
            truth = [realized(ds, current.iloc[i: i + size]) for i in range(0, len(current), size)]
            ours, our_cpu, flagged = driftline_chunks(ds, reference, current, size)
            theirs, their_cpu = nannyml.chunks(ds, reference, current, size)
            before = None if ds.change_row is None else ds.change_row // size
            for metric in ds.metrics:
                mine, peer = score(ours, truth, metric), score(theirs, truth, metric)
                ratio = mine[0] / peer[0] if peer[0] > 0 else float("nan")
                early = "-" if before is None else (f"{score(ours, truth, metric, before)[1]:.0%} / "
                                                    f"{score(theirs, truth, metric, before)[1]:.0%}")
                print(f"| {name} | {size:,} | {len(truth)} ({'-' if before is None else before}) | {metric} | "
                      f"{mine[0]:.4f} | {peer[0]:.4f} | {ratio:.2f} | {mine[1]:.0%} / {peer[1]:.0%} | {early} | "
                      f"{our_cpu:.1f} / {their_cpu:.1f} |", flush=True)
            first = next((i + 1 for i, f in enumerate(flagged) if f), None)
            invalid.append(f"| {name} | {size:,} | {'-' if before is None else before + 1} | "
                           f"{'never' if first is None else first} | "
                           f"{sum(flagged[:before]) if before is not None else sum(flagged)} |")
    print("\ndriftline's estimation_invalid over the chunks in order (the estimates judged against the labels so far)")
    print("| data set | rows/chunk | first chunk after the change | first chunk flagged | chunks flagged before the "
          "change (all, where no change is known) |")
    print("|---|---|---|---|---|")
    print("\n".join(invalid))
    nannyml.worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
