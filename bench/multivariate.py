"""Benchmark: power, false alarms and cost of the multivariate detectors, on generated data with known truth.

Run by hand:  .venv/bin/python bench/multivariate.py [--windows 40] [--sizes 200,500,1000] [--compare]

Reference: 5 000 rows of five features (income and spend correlated at 0.8, age,
tenure, a three-valued plan) drawn by `driftline.synthetic.correlated_features`. Current
data: `--windows` windows per size, drawn with the correlation unchanged (no drift: every
flag is a false alarm), or moved to 0.4, 0.0 or -0.8 (every marginal unchanged: every flag
is a detection). Each cell is the share of windows flagged by the PCA reconstruction error,
the domain classifier, and, for comparison, the per-feature tests (any feature drifted), and
the CPU seconds per window of `detect` (both multivariate detectors included).
`--compare` runs the same windows with the domain classifier's earlier configuration
(`EARLIER`) beside the current defaults, so the two are compared within one run. Prints a
Markdown table; asserts nothing.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.stats.multivariate import MultivariateThresholds
from driftline.synthetic import correlated_features

REFERENCE_RHO = 0.8
SCENARIOS = (("none", REFERENCE_RHO), ("rho 0.8 -> 0.4", 0.4), ("rho 0.8 -> 0.0", 0.0), ("rho 0.8 -> -0.8", -0.8))
# The domain classifier's configuration before its cost was cut: 50 boosting iterations of 15 leaves.
EARLIER = MultivariateThresholds(trees=50, leaves=15, learning_rate=0.1)


def rates(reference: pd.DataFrame, size: int, windows: int, rho: float, seed: int,
          levels: MultivariateThresholds) -> tuple[float, float, float, float]:
    """(PCA flagged, classifier flagged, any feature flagged) shares over the windows, and CPU seconds per window."""
    current = correlated_features(size * windows, rho, seed)
    started = time.process_time()
    result = detect(reference, current, columns=ColumnRoles(categorical=["plan"]), windowing=Windowing(chunk_size=size),
                    judging=Judging(multivariate=levels), workers=1)
    seconds = (time.process_time() - started) / windows
    found = result["windows"]
    pca = np.mean([w["multivariate"]["pca_reconstruction_error"]["drift"] for w in found])
    classifier = np.mean([w["multivariate"]["domain_classifier"]["drift"] for w in found])
    features = np.mean([bool(w["drifted_features"]) for w in found])
    return float(pca), float(classifier), float(features), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--sizes", default="200,500,1000")
    parser.add_argument("--compare", action="store_true", help="also run the classifier's earlier configuration")
    args = parser.parse_args()
    reference = correlated_features(5000, REFERENCE_RHO, seed=0)
    configurations = [("current", MultivariateThresholds())] + ([("earlier", EARLIER)] if args.compare else [])
    print(f"{args.windows} windows per cell; reference 5000 rows; share of windows flagged\n")
    print("| window rows | scenario | classifier | PCA reconstruction | domain classifier | any single feature "
          "| CPU s / window |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        for index, (name, rho) in enumerate(SCENARIOS):
            for label, levels in configurations:
                pca, classifier, features, seconds = rates(reference, size, args.windows, rho,
                                                           seed=1000 * size + index, levels=levels)
                print(f"| {size} | {name} | {label} | {pca:.3f} | {classifier:.3f} | {features:.3f} "
                      f"| {seconds:.3f} |", flush=True)


if __name__ == "__main__":
    main()
