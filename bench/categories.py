"""Benchmark: a many-category feature's per-window drift verdict under three rules, in one run.

Run by hand:  .venv/bin/python bench/categories.py [--windows 1000] [--drift-windows 300] [--service-windows 200]
              [--uniform-references 8] [--uniform-windows 25]

A Zipf feature of 300 categories (shares proportional to 1/rank^1.1, the shape bench/detection_quality.py
uses), a 20 000-row reference, windows of 100 and 1 000 rows; and 2 000 equally common categories, 20 000-row
references (several: a reference's own misses matter there), windows of 10 000 rows. Each window is judged once
by `driftline detect` (the batch engine) and, for the service, by `drift_results` on a window state built from
events; its verdict is then read three times from the very same tests:

- ``now``: the rule as it is: the pooled two-sample chi-square and the unseen-category test, a weighted
  Bonferroni of the two (`driftline.detectors.thresholds.decision.significance_p_value`), the unseen share an
  effect size;
- ``pooled``: the same `decide_feature`, given the chi-square test without its ``unseen`` part: the pooled
  two-sample chi-square alone (the rule of 2026-12-04 morning);
- ``Pearson``: given neither the pooled p-value nor ``unseen``: Pearson's goodness of fit against the
  reference's shares (`two_sample.chi2`), the rule before that.

The effect-size floors (PSI, Jensen-Shannon) are the same for all three. Printed: the share of flagged windows
with no drift (false flags), the ``for_windows`` false pages (runs of 3 flagged windows in a row) per 1 000
no-drift windows of this one stream, and the share flagged (power) under shifts of a few categories, diffuse
shifts over all categories and a new category (5 % / 1 % of the rows). Then the two chi-square tests alone at one
false-flag rate: Pearson's goodness of fit with its cut moved to the 5 % quantile of its own p-values on
unchanged windows, against the pooled test at 0.05 (the tests on multinomial counts, no floors). Asserts nothing.
"""
from __future__ import annotations

import argparse
import time
import uuid
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from driftline.baseline import compute_baseline
from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.families.drift import drift_results
from driftline.detectors.stats.two_sample import chi2, chi2_pooled
from driftline.detectors.thresholds.decision import DriftThresholds, decide_feature
from driftline.vocabulary import CATEGORICAL, CHI2

RULES = ("Pearson", "pooled", "now")
from driftline.window_state import EventBatch, WindowState

CATEGORIES = np.array([f"c{i}" for i in range(300)] + ["new"])
ZIPF = np.append(1.0 / np.arange(1, 301) ** 1.1, 0.0)
ZIPF /= ZIPF.sum()
TILT = np.append(np.random.default_rng(99).choice([-1.0, 1.0], 300), 0.0)
REFERENCE_ROWS = 20_000
K = 3  # for_windows: a page after this many flagged windows in a row
THRESHOLDS = DriftThresholds()


def few(points: float) -> np.ndarray:
    """Three categories (ranks 5, 15 and 40) each gain `points` of the mass; the rest shrink in proportion."""
    shares = ZIPF * (1.0 - 3 * points)
    shares[[4, 14, 39]] += points
    return shares


def diffuse(effect: float) -> np.ndarray:
    """Every category's share times exp(+-2 effect) (bench/detection_quality.py's drift of size `effect`)."""
    shares = ZIPF * np.exp(2.0 * effect * TILT)
    return shares / shares.sum()


def unseen(share: float) -> np.ndarray:
    """A category the reference never saw takes `share` of the rows."""
    shares = ZIPF * (1.0 - share)
    shares[-1] = share
    return shares


CASES: dict[str, np.ndarray] = {
    "few categories +3 pp each": few(0.03),
    "few categories +1 pp each": few(0.01),
    "diffuse, effect 0.1": diffuse(0.1),
    "diffuse, effect 0.05": diffuse(0.05),
    "new category, 5 %": unseen(0.05),
    "new category, 1 %": unseen(0.01),
}


def earlier_rule(tests: Mapping[str, Mapping[str, Any]], rows: int, dropped: tuple[str, ...]) -> bool:
    """An earlier rule's verdict: the same `decide_feature` on the chi-square test less the `dropped` parts (one
    feature: no BH correction)."""
    plain = {name: {k: v for k, v in test.items() if k not in (*dropped, "p_value_adjusted")}
             if name == CHI2 else test for name, test in tests.items()}
    return decide_feature(plain, CATEGORICAL, rows, THRESHOLDS)[0]


def three_rules(tests: Mapping[str, Mapping[str, Any]], rows: int, now: bool) -> tuple[bool, bool, bool]:
    """(Pearson, pooled, now) verdicts of one window's tests."""
    return (earlier_rule(tests, rows, ("p_value_pooled", "unseen")), earlier_rule(tests, rows, ("unseen",)), now)


def batch_verdicts(reference: pd.DataFrame, values: np.ndarray, rows: int) -> np.ndarray:
    """(Pearson, pooled, now) verdicts per window of `rows` rows (a windows x 3 array), judged by `driftline detect`."""
    report = detect(reference, pd.DataFrame({"cat": values.astype(object)}), columns=ColumnRoles(categorical=["cat"]),
                    windowing=Windowing(chunk_size=rows), judging=Judging(multivariate=False), workers=1)
    features = [w["features"][0] for w in report["windows"]]
    return np.array([three_rules({**f["tests"], "missing": f["missing"]}, min(rows, len(reference)), f["drift"])
                     for f in features])


def service_verdicts(baseline: Any, values: np.ndarray, rows: int) -> np.ndarray:
    """(Pearson, pooled, now) verdicts per window of `rows` rows, judged as the scheduler judges a window state."""
    verdicts = []
    for w in range(values.size // rows):
        events = [{"event_id": uuid.uuid4().hex, "request_id": f"w{w}-{i}", "ts": 1_767_225_600_000 + i,
                   "features": {"cat": str(v)}, "prediction": 0.5, "latency_ms": {"total": 1.0}, "status": "ok"}
                  for i, v in enumerate(values[w * rows:(w + 1) * rows])]
        state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
        result = next(r for r in drift_results(baseline, state, THRESHOLDS, prediction=False) if r.feature == "cat")
        verdicts.append(three_rules(result.details["tests"], result.details["rows"], result.breached))
    return np.array(verdicts)


def for_windows_pages(flags: np.ndarray) -> int:
    """Pages of the for_windows rule: starts of runs of at least K flagged windows."""
    run, pages = 0, 0
    for flag in flags:
        run = run + 1 if flag else 0
        pages += run == K
    return pages


def matched_rate(rng: np.random.Generator, rows: int, null_windows: int, windows: int) -> None:
    """Pearson's goodness of fit at the cut that gives it a 5 % false-flag rate, against the pooled test at 0.05."""
    reference = rng.multinomial(REFERENCE_ROWS, ZIPF)
    null_plain = np.array([chi2(reference, rng.multinomial(rows, ZIPF))[1] for _ in range(null_windows)])
    null_pooled = np.array([chi2_pooled(reference, rng.multinomial(rows, ZIPF)) for _ in range(null_windows)])
    cut = float(np.quantile(null_plain, 0.05))
    print(f"| {rows:,} | no drift: flags | {percent(null_plain < 0.05)} | {percent(null_plain < cut)} (cut {cut:.2g}) "
          f"| {percent(null_pooled < 0.05)} |")
    for name, shares in CASES.items():
        drawn = [rng.multinomial(rows, shares) for _ in range(windows)]
        plain = np.array([chi2(reference, counts)[1] for counts in drawn])
        pooled = np.array([chi2_pooled(reference, counts) for counts in drawn])
        print(f"| {rows:,} | {name} | {percent(plain < 0.05)} | {percent(plain < cut)} | {percent(pooled < 0.05)} |")


def percent(flags: np.ndarray) -> str:
    return f"{100 * flags.mean():.1f} %"


def row(rows: int, windows: int, name: str, cells: list[str]) -> None:
    print(f"| {rows:,} | {windows} | {name} | " + " | ".join(cells) + " |")


def uniform_false_flags(rng: np.random.Generator, references: int, windows: int) -> None:
    """2 000 equally common categories, 10 000-row windows: false flags over several 20 000-row references."""
    categories = np.array([f"u{i}" for i in range(2000)])
    verdicts = np.vstack([batch_verdicts(pd.DataFrame({"cat": rng.choice(categories, REFERENCE_ROWS).astype(object)}),
                                         rng.choice(categories, 10_000 * windows), 10_000) for _ in range(references)])
    row(10_000, references * windows, f"2 000 equal categories, no drift: false flags (detect, {references} "
        "references)", [percent(verdicts[:, i]) for i in range(len(RULES))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=1000, help="no-drift windows per size (batch)")
    parser.add_argument("--drift-windows", type=int, default=300, help="windows per shift and size")
    parser.add_argument("--service-windows", type=int, default=200, help="no-drift windows per size (service)")
    parser.add_argument("--uniform-references", type=int, default=8, help="references of 2 000 equal categories")
    parser.add_argument("--uniform-windows", type=int, default=25, help="10 000-row windows per such reference")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference = pd.DataFrame({"cat": rng.choice(CATEGORIES, REFERENCE_ROWS, p=ZIPF).astype(object)})
    baseline = compute_baseline(reference)
    started = time.perf_counter()
    print(f"300 Zipf categories, reference {REFERENCE_ROWS} rows, alpha {THRESHOLDS.alpha}, "
          f"floors psi {THRESHOLDS.psi} / jensenshannon {THRESHOLDS.jensenshannon}")
    print("| rows/window | windows | case | " + " | ".join(RULES) + " |")
    print("|---|---|---|---|---|---|")
    runs: list[tuple[str, Callable[[np.ndarray, int], np.ndarray], int, np.ndarray]] = []
    for rows in (100, 1000):
        runs = [("no drift: false flags (detect)", lambda v, r: batch_verdicts(reference, v, r), args.windows, ZIPF),
                ("no drift: false flags (service)", lambda v, r: service_verdicts(baseline, v, r),
                 args.service_windows, ZIPF)]
        runs += [(name, lambda v, r: batch_verdicts(reference, v, r), args.drift_windows, shares)
                 for name, shares in CASES.items()]
        for name, judge, windows, shares in runs:
            verdicts = judge(rng.choice(CATEGORIES, rows * windows, p=shares), rows)
            row(rows, windows, name, [percent(verdicts[:, i]) for i in range(len(RULES))])
            if name.endswith("(detect)"):
                row(rows, windows, f"no drift: for_windows (K={K}) false pages / 1 000 windows",
                    [f"{1000 * for_windows_pages(verdicts[:, i]) / windows:.1f}" for i in range(len(RULES))])
    uniform_false_flags(rng, args.uniform_references, args.uniform_windows)
    print()
    print("| rows/window | case | goodness of fit, p < 0.05 | goodness of fit, 5 % cut | pooled, p < 0.05 |")
    print("|---|---|---|---|---|")
    for rows in (100, 1000):
        matched_rate(rng, rows, 2 * args.windows, args.windows)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
