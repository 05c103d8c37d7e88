r"""Drift statistics from summaries: baseline fine bins against window fine bins.

A `NumericProfile` (training) and a `FeatureWindow` (one window) count values on
the same fine bins ``(-inf, e_0), [e_0, e_1), ..., [e_{k-1}, +inf)`` and keep the
sum of the values in each bin. From counts :math:`a_i, b_i` (totals :math:`n, m`)
and sums :math:`S_i, T_i`:

* **PSI** on the reference deciles: the decile edges are fine edges, so decile
  counts are sums of fine counts, exactly `driftline.detectors.stats.two_sample.psi_numeric`'s counts.
* **KS**: the ECDFs are known exactly at every edge; between two edges both are
  monotone, so the supremum inside bin *i* exceeds the larger of its edge values
  by at most :math:`\min(a_i/n, b_i/m)` <= the reference share of the bin,
  ~1/1000. The statistic is the maximum at the edges; the p-value is Smirnov's
  asymptotic one (`driftline.detectors.stats.two_sample.ks_p_value`).
* **Wasserstein-1**: :math:`W_1 = \int |F(x) - G(x)|\,dx`. Over one bin
  :math:`[l, u)` the integral of an ECDF is exact from the bin's count and sum,

  .. math:: \int_l^u F(x)\,dx = (u-l)\,F(l^-) + \frac{u\,a_i - S_i}{n},

  (outer bins: :math:`\int_{-\infty}^{e_0} F = (e_0 a_0 - S_0)/n` and the mirror
  image above :math:`e_{k-1}`), so :math:`\sum_i |\int_{bin_i} (F - G)|` equals
  :math:`W_1` except inside bins where :math:`F - G` changes sign, where it is a
  lower bound. Divided by the baseline's standard deviation (ddof=0, floored at
  `defaults.WASSERSTEIN_MIN_STD`) as `driftline.detectors.stats.two_sample.wasserstein_normed`.
* **Jensen-Shannon**: on the fine bins re-aggregated to Evidently's bins (Sturges
  equal-width bins over the range of both samples; inside a fine bin the values
  are taken as evenly spread, the outer ones up to the sample's min and max), or value by value for a feature with at most
  `defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES` distinct training values.
  This approximates `driftline.detectors.stats.two_sample.jensenshannon_numeric` to the width of a fine bin.
* **Categories**: chi-square, Jensen-Shannon, PSI and L-infinity over the union
  of categories (an unseen category has baseline count 0), the same functions as
  the raw-array versions apply to counts.

All functions are pure: profiles and windows in, numbers out.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from driftline.detectors.stats import registry, two_sample, unseen_categories
from driftline.detectors.stats.noise import category_noise, wasserstein_noise, wasserstein_noise_scale_binned
from driftline import defaults
from driftline.baseline import CategoricalProfile, NumericProfile
from driftline.vocabulary import CATEGORICAL, CHI2, JENSENSHANNON, KS, LINF, NUMERIC, PSI, WASSERSTEIN
from driftline.window_state import FeatureWindow

__all__ = [
    "categorical_tests",
    "category_counts",
    "decile_counts",
    "jensenshannon_binned",
    "ks_binned",
    "numeric_tests",
    "psi_binned",
    "shared_bins_binned",
    "wasserstein_binned",
    "wasserstein_normed_binned",
]


def _window_counts(profile: NumericProfile, window: FeatureWindow) -> tuple[np.ndarray, np.ndarray]:
    if window.counts is None:
        return np.zeros_like(profile.counts), np.zeros(profile.counts.size)
    if window.counts.size != profile.counts.size:
        raise ValueError(f"window has {window.counts.size} bins, the baseline {profile.counts.size}")
    return window.counts, window.sums


def decile_counts(profile: NumericProfile, fine_counts: np.ndarray) -> np.ndarray:
    """Fine-bin counts re-aggregated to the baseline's decile bins (PSI's ten bins)."""
    boundaries = np.concatenate(([0], profile.decile_index + 1))
    return np.add.reduceat(np.asarray(fine_counts), boundaries)


def psi_binned(profile: NumericProfile, window: FeatureWindow) -> float:
    """PSI on the reference's deciles (`driftline.detectors.stats.two_sample.psi` on re-aggregated fine counts)."""
    counts, _ = _window_counts(profile, window)
    return two_sample.psi(decile_counts(profile, profile.counts), decile_counts(profile, counts))


def ks_binned(profile: NumericProfile, window: FeatureWindow) -> tuple[float, float]:
    r"""Two-sample KS ``(statistic, p_value)`` from the fine bins (module docstring).

    .. math::  D = \max\big(\max_j |F(e_j^-) - G(e_j^-)|,\; 1 - G(\max_{ref})\big), \quad F(e_j^-) = \sum_{i < j} a_i / n

    within ~1/1000 of the exact statistic; p-value by `driftline.detectors.stats.two_sample.ks_p_value`.
    An empty side gives ``(0.0, 1.0)``.
    """
    counts, _ = _window_counts(profile, window)
    n, m = int(profile.counts.sum()), int(counts.sum())
    if n == 0 or m == 0:
        return 0.0, 1.0
    difference = np.cumsum(profile.counts) / n - np.cumsum(counts) / m
    statistic = float(np.abs(difference).max())
    # At the training max F reaches 1 while G still misses the values above it;
    # the window counts those, so this point of the supremum is exact too.
    above = min(window.above_max, int(counts[-1]))
    statistic = max(statistic, above / m)
    return statistic, two_sample.ks_p_value(statistic, n, m)


def wasserstein_binned(profile: NumericProfile, window: FeatureWindow) -> float:
    r"""Wasserstein-1 distance from fine-bin counts and sums (module docstring).

    Per bin :math:`[l_i, u_i)` the integral of :math:`F - G` is

    .. math::  (u_i - l_i)(F(l_i^-) - G(l_i^-)) + \frac{u_i a_i - S_i}{n} - \frac{u_i b_i - T_i}{m}

    and for the open outer bins :math:`\int_{-\infty}^{e_0}(F-G) = (e_0 a_0 - S_0)/n - (e_0 b_0 - T_0)/m`,
    :math:`\int_{e_{k-1}}^{\infty}(F-G) = (T_k - e_{k-1} b_k)/m - (S_k - e_{k-1} a_k)/n`.
    The result is :math:`\sum_i |\int_{bin_i}(F - G)|`. 0.0 when either side is empty.
    """
    counts, sums = _window_counts(profile, window)
    n, m = int(profile.counts.sum()), int(counts.sum())
    if n == 0 or m == 0:
        return 0.0
    edges = profile.edges
    a, s = profile.counts.astype(np.float64), profile.sums
    b, t = counts.astype(np.float64), sums
    if edges.size == 0:  # constant reference: one bin, all mass on one side of nothing
        return abs(s[0] / n - t[0] / m)
    below_f = np.concatenate(([0.0], np.cumsum(a)[:-1])) / n  # F(l_i^-)
    below_g = np.concatenate(([0.0], np.cumsum(b)[:-1])) / m
    integral = np.empty(a.size)
    lower, upper = edges[:-1], edges[1:]
    inner = slice(1, a.size - 1)
    integral[inner] = ((upper - lower) * (below_f[inner] - below_g[inner])
                       + (upper * a[inner] - s[inner]) / n - (upper * b[inner] - t[inner]) / m)
    integral[0] = (edges[0] * a[0] - s[0]) / n - (edges[0] * b[0] - t[0]) / m
    integral[-1] = (t[-1] - edges[-1] * b[-1]) / m - (s[-1] - edges[-1] * a[-1]) / n
    return float(np.abs(integral).sum())


def wasserstein_normed_binned(profile: NumericProfile, window: FeatureWindow) -> float:
    """`wasserstein_binned` over the baseline's standard deviation (ddof=0, floored at 0.001)."""
    std = max(profile.std or 0.0, defaults.WASSERSTEIN_MIN_STD)
    return wasserstein_binned(profile, window) / std


def shared_bins_binned(profile: NumericProfile, window: FeatureWindow) -> tuple[np.ndarray, np.ndarray] | None:
    """Counts on Evidently's shared bins rebuilt from fine bins (module docstring), as
    `driftline.detectors.stats.two_sample.shared_bins_sorted` counts raw values; None when a side is empty or
    both sides hold one value (one bin: no distance)."""
    counts, sums = _window_counts(profile, window)
    n, m = int(profile.counts.sum()), int(counts.sum())
    if n == 0 or m == 0:
        return None
    if profile.distinct <= defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES:
        # Few distinct training values: the quantile edges sit on those values, so
        # the fine bins are (close to) value-by-value counts.
        return profile.counts, counts
    low = min(profile.min, window.min)
    high = max(profile.max, window.max)
    n_bins = _sturges_bins(low, high, n + m)
    if n_bins == 1:
        return None
    sturges_edges = np.linspace(low, high, n_bins + 1)

    def regroup(bin_counts: np.ndarray, lowest: float, highest: float) -> np.ndarray:
        # Piecewise-linear ECDF through the fine edges (values spread evenly inside
        # a fine bin), read at the Sturges edges.
        knots = np.concatenate(([min(lowest, profile.edges[0])], profile.edges, [max(highest, profile.edges[-1])]))
        cumulative = np.concatenate(([0.0], np.cumsum(bin_counts, dtype=np.float64)))
        return np.diff(np.interp(sturges_edges, knots, cumulative))

    return regroup(profile.counts, profile.min, profile.max), regroup(counts, window.min, window.max)


def jensenshannon_binned(profile: NumericProfile, window: FeatureWindow) -> float:
    """Jensen-Shannon distance on Evidently's bins rebuilt from fine bins (module docstring)."""
    shared = shared_bins_binned(profile, window)
    return 0.0 if shared is None else two_sample.jensenshannon(*shared)


def _sturges_bins(low: float, high: float, total: int) -> int:
    if high <= low:
        return 1
    return int(np.ceil(np.log2(total) + 1.0))


def numeric_tests(profile: NumericProfile, window: FeatureWindow) -> dict[str, dict[str, Any]]:
    """The drift tests of one numeric feature, in `driftline.detectors.thresholds.decision.decide_feature`'s shape."""
    statistic, p_value = ks_binned(profile, window)
    shared = shared_bins_binned(profile, window)  # Evidently's bins, for Jensen-Shannon and the registry's binned tests
    return {
        PSI: {"value": psi_binned(profile, window)},
        KS: {"statistic": statistic, "p_value": p_value},
        WASSERSTEIN: {"value": wasserstein_normed_binned(profile, window), "noise": wasserstein_noise(
            wasserstein_noise_scale_binned(profile.edges, profile.counts, profile.min, profile.max,
                                           max(profile.std or 0.0, defaults.WASSERSTEIN_MIN_STD)),
            int(window.binned), int(profile.count))},
        JENSENSHANNON: {"value": two_sample.jensenshannon(*shared) if shared is not None else 0.0},
        **registry.binned_tests(*(shared or (None, None)), NUMERIC),
    }


def category_counts(profile: CategoricalProfile, window: FeatureWindow) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(categories, baseline counts, window counts)`` over the union, baseline categories first."""
    categories = list(profile.counts) + [c for c in window.categories if c not in profile.counts]
    reference = np.array([profile.counts.get(c, 0) for c in categories], dtype=np.int64)
    current = np.array([window.categories.get(c, 0) for c in categories], dtype=np.int64)
    return categories, reference, current


def category_tests(reference: np.ndarray, current: np.ndarray) -> dict[str, dict[str, Any]]:
    """chi2 (with its pooled and unseen-category tests), PSI and Jensen-Shannon of two count vectors over the same
    categories, each distance with its sampling ``noise`` at the window's size (`noise.category_noise`); the one
    shape the service's and `detect`'s categorical features share."""
    statistic, p_value = two_sample.chi2(reference, current)
    noise = category_noise(reference, int(current.sum()))
    return {
        CHI2: {"statistic": statistic, "p_value": p_value, "p_value_pooled": two_sample.chi2_pooled(reference, current),
               "unseen": unseen_categories.unseen_details(reference, current)},
        PSI: {"value": two_sample.psi(reference, current), "noise": noise[PSI]},
        JENSENSHANNON: {"value": two_sample.jensenshannon(reference, current), "noise": noise[JENSENSHANNON]},
        **registry.binned_tests(reference, current, CATEGORICAL, noise),
    }


def categorical_tests(profile: CategoricalProfile, window: FeatureWindow) -> dict[str, dict[str, Any]]:
    """`category_tests` and L-infinity over the baseline's and the window's categories."""
    _, reference, current = category_counts(profile, window)
    return {**category_tests(reference, current), LINF: {"value": two_sample.linf(reference, current)}}
