"""Benchmark: power and false-alarm rate of the multivariate detectors, on generated data with known truth.

Run by hand:  .venv/bin/python bench/multivariate.py [--windows 40] [--sizes 200,500,1000]

Reference: 5 000 rows of five features (income and spend correlated at 0.8, age,
tenure, a three-valued plan) drawn by `draw`. Current data: `--windows` windows per
size, drawn with the correlation unchanged (no drift: every flag is a false alarm), or
moved to 0.4, 0.0 or -0.8 (every marginal unchanged: every flag is a detection). Each
cell is the share of windows flagged by the PCA reconstruction error, the domain
classifier, and, for comparison, the per-feature tests (any feature drifted). Also the
mean seconds per window of `detect` (both multivariate detectors included). Prints a
Markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from driftline.detectors.batch import detect

PLANS = ["basic", "plus", "pro"]
REFERENCE_RHO = 0.8
SCENARIOS = (("none", REFERENCE_RHO), ("rho 0.8 -> 0.4", 0.4), ("rho 0.8 -> 0.0", 0.0), ("rho 0.8 -> -0.8", -0.8))


def draw(rows: int, rho: float, seed: int) -> pd.DataFrame:
    """income and spend correlated by `rho`; the rest independent. The marginals do not depend on rho."""
    rng = np.random.default_rng(seed)
    first = rng.normal(size=rows)
    second = rho * first + np.sqrt(1 - rho ** 2) * rng.normal(size=rows)
    return pd.DataFrame({"income": 50 + 10 * first, "spend": 20 + 5 * second, "age": rng.normal(40, 12, rows),
                         "tenure": rng.exponential(3.0, rows),
                         "plan": rng.choice(PLANS, rows, p=[0.5, 0.3, 0.2]).astype(object)})


def rates(reference: pd.DataFrame, size: int, windows: int, rho: float, seed: int) -> tuple[float, float, float, float]:
    """(PCA flagged, classifier flagged, any feature flagged) shares over the windows, and seconds per window."""
    current = draw(size * windows, rho, seed)
    started = time.perf_counter()
    result = detect(reference, current, chunk_size=size, categorical=["plan"], workers=1)
    seconds = (time.perf_counter() - started) / windows
    found = result["windows"]
    pca = np.mean([w["multivariate"]["pca_reconstruction_error"]["drift"] for w in found])
    classifier = np.mean([w["multivariate"]["domain_classifier"]["drift"] for w in found])
    features = np.mean([bool(w["drifted_features"]) for w in found])
    return float(pca), float(classifier), float(features), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--sizes", default="200,500,1000")
    args = parser.parse_args()
    reference = draw(5000, REFERENCE_RHO, seed=0)
    print(f"{args.windows} windows per cell; reference 5000 rows; share of windows flagged\n")
    print("| window rows | scenario | PCA reconstruction | domain classifier | any single feature | s / window |")
    print("|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        for index, (name, rho) in enumerate(SCENARIOS):
            pca, classifier, features, seconds = rates(reference, size, args.windows, rho, seed=1000 * size + index)
            print(f"| {size} | {name} | {pca:.3f} | {classifier:.3f} | {features:.3f} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
