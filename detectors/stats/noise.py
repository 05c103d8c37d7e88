r"""The sampling level of a distance when nothing changed: what a window of n rows measures on noise alone.

A distance between a window and the reference is never zero on finite samples: the
normalised Wasserstein distance of two samples of one distribution has, for large n
and N (del Barrio, Giné, Matrán 1999: :math:`\sqrt{n}(F_n - F)` tends to a Brownian
bridge :math:`B(F(x))`, and :math:`E|B(t)| = \sqrt{2/\pi}\sqrt{t(1-t)}`),

.. math::  E\,W_1 / \sigma = \sqrt{\tfrac{2}{\pi}} \sqrt{\tfrac1n + \tfrac1N}
           \;\frac{1}{\sigma}\int \sqrt{F(x)(1 - F(x))}\,dx

where F is the reference's distribution. At 500 rows that is 0.04-0.06 for the usual
shapes, and its 99th percentile is near the 0.1 floor, so a floor compared with the raw
distance flags noise at small windows; the decision rule compares the excess over this
level (`driftline.detectors.thresholds.decision`). The integral is finite for any
distribution with more than two moments; the scale depends only on the reference, so it
is computed once per reference.

Over categories the same holds for PSI and the Jensen-Shannon distance, and grows with
their number: about :math:`(k-1)(1/n + 1/N)` for PSI and :math:`\sqrt{(k-1)(1/n + 1/N)/8}`
for Jensen-Shannon over k categories, so with 300 categories noise alone reads 0.21 at
1 000 rows against the 0.1 floor, and 0.07 at 10 000. Sparse categories make PSI's
smoothing of empty cells depart from that formula (0.38 where it says 0.31), so
`category_noise` measures those levels, and every registered binned distance's
(`driftline.detectors.stats.registry`), on samples drawn from the reference's own shares.
"""
from __future__ import annotations

import math

import numpy as np

from driftline import defaults
from driftline.detectors.stats import registry

__all__ = ["category_noise", "distance_excess", "wasserstein_noise", "wasserstein_noise_scale",
           "wasserstein_noise_scale_binned"]


def wasserstein_noise_scale(reference_sorted: np.ndarray, std: float) -> float:
    r""":math:`\int \sqrt{F(1-F)}\,dx / \sigma` of a sorted, clean reference (its empirical F).

    >>> round(wasserstein_noise_scale(np.sort(np.random.default_rng(0).normal(size=200_000)), 1.0), 1)
    1.6
    """
    n = reference_sorted.size
    if n < 2 or not std > 0:
        return 0.0
    share = np.arange(1, n, dtype=np.float64) / n  # F between consecutive order statistics
    return float((np.sqrt(share * (1.0 - share)) * np.diff(reference_sorted)).sum()) / std


def wasserstein_noise_scale_binned(edges: np.ndarray, counts: np.ndarray, low: float | None, high: float | None,
                                   std: float | None) -> float:
    """`wasserstein_noise_scale` from fine-bin counts (values spread evenly inside a bin: trapezoids of sqrt(F(1-F)))."""
    total = float(counts.sum())
    if total <= 0 or low is None or high is None or not std or not std > 0 or edges.size == 0:
        return 0.0
    knots = np.concatenate(([low], np.clip(edges, low, high), [high]))
    cumulative = np.concatenate(([0.0], np.cumsum(counts, dtype=np.float64))) / total
    level = np.sqrt(np.clip(cumulative * (1.0 - cumulative), 0.0, None))
    return float((0.5 * (level[:-1] + level[1:]) * np.diff(knots)).sum()) / std


def wasserstein_noise(scale: float, current: int, reference: int) -> float:
    """The normalised Wasserstein distance expected between `current` and `reference` rows of one distribution.

    >>> round(wasserstein_noise(1.61, 500, 50_000), 3)  # a normal reference
    0.058
    """
    if current <= 0 or reference <= 0:
        return 0.0
    return math.sqrt(2.0 / math.pi) * math.sqrt(1.0 / current + 1.0 / reference) * scale


def category_noise(reference_counts: np.ndarray, current_rows: int,
                   draws: int = defaults.CATEGORY_NOISE_DRAWS) -> dict[str, float]:
    """Each registered binned effect size's level (`registry.noise_statistics`: PSI, Jensen-Shannon, ...) expected
    between `current_rows` rows and the reference's rows when both are drawn from the reference's shares: the mean
    over `draws` pairs of multinomial samples (a fixed seed, so one reference and window size always give one
    level; every statistic reads the same draws). Its error is about 1.5 % of the level at 300 categories.

    >>> levels = category_noise(np.full(300, 200), 1_000)  # 300 equal categories, 60 000 rows
    >>> round(levels["psi"], 2), round(levels["jensenshannon"], 2)
    (0.39, 0.21)
    >>> category_noise(np.array([5, 0]), 100)["psi"]  # one category: nothing can move
    0.0
    """
    statistics = registry.noise_statistics()
    counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    counts = counts[counts > 0]
    total = int(counts.sum())
    if counts.size < 2 or current_rows <= 0 or total <= 0:
        return {s.key: 0.0 for s in statistics}
    rng = np.random.default_rng(0)
    shares = counts / counts.sum()
    reference = rng.multinomial(total, shares, size=draws)
    current = rng.multinomial(int(current_rows), shares, size=draws)
    return {s.key: float(s.rows(reference, current).mean()) for s in statistics}


def distance_excess(value: float, noise: float, windows: int = 1) -> float:
    r"""The drift a distance averaged over `windows` windows shows beyond its sampling noise:
    :math:`\sqrt{\max(0, \bar W^2 - \text{noise}^2)} - \text{noise} / \sqrt{\text{windows}}`.

    Two parts. The noise's bias, removed in quadrature: no drift reads about 0 and a drift
    that dwarfs the noise about its size, where subtracting the whole noise (the per-window
    rule) reads a drift three times the noise a third smaller however many windows are
    averaged. And a guard against the average's own spread, which narrows as the square root
    of the windows, so that a drift under its floor does not pass it on a lucky first window
    or two. Can be negative (a drift no bigger than the noise).

    >>> round(distance_excess(0.127, 0.038, 30), 3), round(0.127 - 0.038, 3)  # a clear drift: about its size
    (0.114, 0.089)
    >>> round(distance_excess(0.127, 0.038, 1), 3), distance_excess(0.2, 0.0)  # one window: guarded; no noise
    (0.083, 0.2)
    """
    value, noise = max(float(value), 0.0), max(float(noise), 0.0)
    return math.sqrt(max(value * value - noise * noise, 0.0)) - noise / math.sqrt(max(int(windows), 1))
