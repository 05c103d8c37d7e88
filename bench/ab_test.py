"""The A/B test's error rate under peeking and its power: simulated runs of the rollout's mixture SPRT.

Usage: `.venv/bin/python bench/ab_test.py [--runs 2000] [--peeks 30]`. Every run peeks after each
window (one window = one batch of joined labels per arm) and declares a winner the first time the
always-valid p-value falls to alpha. Prints, per scenario, the share of runs that declared a winner,
next to a fixed-sample z-test looked at after every window (what peeking does without the mixture);
then tests of more than two arms, each against the control at alpha / arms (Bonferroni).
Record the output, dated, in bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

from driftline import defaults
from driftline.detectors.stats.sequential import msprt_proportions


def simulate(p_a: float, p_b: float, per_window: int, runs: int, peeks: int, labels_from: int, alpha: float,
             tau: float, seed: int) -> tuple[float, float | None, float]:
    """(share of runs the mSPRT declared a winner, the median window it did so in, share the peeked z-test did)."""
    rng = np.random.default_rng(seed)
    total = np.full((runs, peeks), per_window)
    total[:, :labels_from] = 0
    n_b = rng.binomial(total, 0.5)
    n_a = total - n_b
    s_a, s_b = rng.binomial(n_a, p_a), rng.binomial(n_b, p_b)
    cum_n_a, cum_s_a, cum_n_b, cum_s_b = (np.cumsum(x, axis=1) for x in (n_a, s_a, n_b, s_b))
    test = msprt_proportions(cum_n_a, cum_s_a, cum_n_b, cum_s_b, alpha, tau)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_a, rate_b = cum_s_a / cum_n_a, cum_s_b / cum_n_b
        z = (rate_b - rate_a) / np.sqrt(rate_a * (1 - rate_a) / cum_n_a + rate_b * (1 - rate_b) / cum_n_b)
    naive = np.nan_to_num(np.abs(z)) >= stats.norm.isf(alpha / 2)
    declared = test.p_value <= alpha
    first = np.argmax(declared, axis=1)[declared[:, -1]] + 1
    median = float(np.median(first)) if first.size else None
    return float(declared[:, -1].mean()), median, float(naive.any(axis=1).mean())


def simulate_arms(p_control: float, p_arms: tuple[float, ...], per_window: int, runs: int, peeks: int,
                  alpha: float, tau: float, seed: int) -> tuple[float, float, float | None]:
    """An A/B test of a control and `p_arms`, each arm against the control at alpha / m (Bonferroni):
    (share of runs in which any arm was declared different, the same at alpha each, uncorrected; share in
    which the best arm was declared better). Labels are split evenly between the control and the arms."""
    rng = np.random.default_rng(seed)
    arms = len(p_arms)
    counts = rng.multinomial(per_window, [1.0 / (arms + 1)] * (arms + 1), size=(runs, peeks))
    cum_n = np.cumsum(counts, axis=1)
    cum_s = np.cumsum(rng.binomial(counts, (p_control, *p_arms)), axis=1)
    corrected = np.zeros(runs, dtype=bool)
    uncorrected = np.zeros(runs, dtype=bool)
    best = int(np.argmax(p_arms)) + 1
    best_declared = np.zeros(runs, dtype=bool)
    for arm in range(1, arms + 1):
        args = (cum_n[..., 0], cum_s[..., 0], cum_n[..., arm], cum_s[..., arm])
        test = msprt_proportions(*args, alpha / arms, tau)
        declared = test.p_value[:, -1] <= alpha / arms
        corrected |= declared
        uncorrected |= msprt_proportions(*args, alpha, tau).p_value[:, -1] <= alpha
        if arm == best:
            best_declared = declared & (test.lower[:, -1] > 0)
    won = float(best_declared.mean()) if max(p_arms) > p_control else None  # no arm better: nothing to win
    return float(corrected.mean()), float(uncorrected.mean()), won


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--peeks", type=int, default=30)
    args = parser.parse_args()
    alpha, tau = defaults.ROLLOUT_ALPHA, defaults.ROLLOUT_TAU
    scenarios = [
        ("A/A accuracy 0.80", 0.80, 0.80, 400, 0),
        ("A/A accuracy 0.80, labels from window 6", 0.80, 0.80, 400, 5),
        ("A/A error rate 0.05", 0.05, 0.05, 400, 0),
        ("A/A accuracy 0.80, 100 labels a window", 0.80, 0.80, 100, 0),
        ("A/B 0.80 vs 0.85, labels from window 6", 0.80, 0.85, 400, 5),
        ("A/B 0.80 vs 0.85, 100 labels a window", 0.80, 0.85, 100, 0),
        ("A/B 0.80 vs 0.82, labels from window 6", 0.80, 0.82, 400, 5),
    ]
    print(f"alpha {alpha}, tau {tau}, {args.runs} runs x {args.peeks} peeks (one per window), labels split "
          f"evenly between the arms")
    print(f"{'scenario':45} {'mSPRT declared':>15} {'median window':>14} {'peeked z-test':>14}")
    started = time.perf_counter()
    for i, (name, p_a, p_b, per_window, labels_from) in enumerate(scenarios):
        declared, median, naive = simulate(p_a, p_b, per_window, args.runs, args.peeks, labels_from, alpha, tau,
                                           seed=100 + i)
        margin = 1.96 * math.sqrt(declared * (1 - declared) / args.runs)
        when = "-" if median is None else f"{median:g}"
        print(f"{name:45} {declared:>8.4f} ±{margin:.4f} {when:>14} {naive:>14.4f}")
    print(f"{time.perf_counter() - started:.1f} s")
    print(f"\nmore than two arms: each arm against the control at alpha / arms (Bonferroni), 600 labels a window "
          f"split evenly")
    print(f"{'scenario':45} {'any declared':>15} {'uncorrected':>12} {'best arm won':>13}")
    for i, (name, p_control, p_arms) in enumerate([("A/A/A accuracy 0.80", 0.80, (0.80, 0.80)),
                                                    ("A/A/A/A accuracy 0.80", 0.80, (0.80, 0.80, 0.80)),
                                                    ("A/A/B 0.80, 0.80, 0.85", 0.80, (0.80, 0.85))]):
        anything, uncorrected, won = simulate_arms(p_control, p_arms, 600, args.runs, args.peeks, alpha, tau,
                                                   seed=200 + i)
        margin = 1.96 * math.sqrt(anything * (1 - anything) / args.runs)
        print(f"{name:45} {anything:>8.4f} ±{margin:.4f} {uncorrected:>12.4f} "
              f"{'-' if won is None else f'{won:.4f}':>13}")


if __name__ == "__main__":
    main()
