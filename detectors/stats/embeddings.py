"""Embedding drift's statistics over summaries: MMD^2 from random features, binned two-sample tests.

Pure functions of counts and sums (`driftline.embeddings.window` builds them); the decision rule is
`driftline.detectors.families.embedding_drift`'s.

**MMD^2 and its null.** With random Fourier features z (so z(x).z(y) approximates the RBF kernel),
the squared maximum mean discrepancy between a window of n rows and the reference is estimated as
``|mean z(window) - mean z(reference)|^2``. When both are drawn from one distribution the difference of
the means is approximately normal with covariance ``S (1/n + 1/m)`` (S: the features' covariance,
m: the reference rows behind its mean), so the estimate is a weighted sum of chi-square(1)
variables with weights ``lambda_i (1/n + 1/m)``, the lambda_i being S's eigenvalues. Its tail is
computed by Liu, Tang and Zhang's four-cumulant approximation (2009), a noncentral chi-square with
the same skewness and kurtosis: the null band of any window size, without resampling.

Reference: Gretton et al., "A Kernel Two-Sample Test", JMLR 13 (2012); Rahimi and Recht, "Random
Features for Large-Scale Kernel Machines", NIPS 2007; Liu, Tang and Zhang, "A new chi-square
approximation to the distribution of non-negative definite quadratic forms in non-central normal
variables", CSDA 53 (2009).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["binned_two_sample", "cosine_distance", "mmd_null_quantile", "mmd_p_value", "pooled_small_bins",
           "quadratic_form_sf"]


def quadratic_form_sf(x: float, weights: np.ndarray) -> float:
    """P(sum_i w_i chi2_1 > x) for non-negative weights (Liu, Tang and Zhang's approximation)."""
    weights = np.asarray(weights, dtype=np.float64)
    weights = weights[weights > 0]
    if weights.size == 0:
        return 0.0 if x > 0 else 1.0
    c1, c2, c3, c4 = (float((weights ** k).sum()) for k in (1, 2, 3, 4))
    s1, s2 = c3 / c2 ** 1.5, c4 / c2 ** 2
    if s1 ** 2 > s2:
        a = 1.0 / (s1 - math.sqrt(s1 ** 2 - s2))
        delta = s1 * a ** 3 - a ** 2
        dof = a ** 2 - 2.0 * delta
    else:
        a, delta, dof = 1.0 / s1, 0.0, 1.0 / s1 ** 2
    t = (x - c1) / math.sqrt(2.0 * c2)
    mu_x, sigma_x = dof + delta, math.sqrt(2.0) * a
    point = t * sigma_x + mu_x
    if delta > 0:
        from scipy import stats as _stats  # about a second to import: only when an embedding is judged
        return float(_stats.ncx2.sf(point, dof, delta))
    from scipy import stats as _stats
    return float(_stats.chi2.sf(point, dof))


def _null_weights(eigenvalues: np.ndarray, rows: int, reference_rows: int) -> np.ndarray:
    return np.asarray(eigenvalues, dtype=np.float64) * (1.0 / rows + 1.0 / reference_rows)


def mmd_p_value(mmd2: float, eigenvalues: np.ndarray, rows: int, reference_rows: int) -> float:
    """P(MMD^2 >= mmd2) for a same-distribution window of `rows` rows (module docstring)."""
    return quadratic_form_sf(mmd2, _null_weights(eigenvalues, rows, reference_rows))


def mmd_null_quantile(level: float, eigenvalues: np.ndarray, rows: int, reference_rows: int) -> float:
    """The MMD^2 that a same-distribution window of `rows` rows exceeds with probability 1 - `level`."""
    weights = _null_weights(eigenvalues, rows, reference_rows)
    high = float(weights.sum()) * 4.0 + 1e-300
    while quadratic_form_sf(high, weights) > 1.0 - level and high < 1e300:
        high *= 2.0
    from scipy import optimize as _optimize
    return float(_optimize.brentq(lambda x: quadratic_form_sf(x, weights) - (1.0 - level), 0.0, high, xtol=1e-15))


def binned_two_sample(window_counts: Any, reference_counts: Any) -> tuple[float, float]:
    """(chi-square statistic, p-value) of homogeneity of two samples' counts on the same bins.

    The 2 x bins contingency test (bins empty on both sides dropped), which, unlike a goodness of fit
    to the reference shares, counts the reference's own sampling noise. ``(0.0, 1.0)`` when either
    side is empty or fewer than two bins hold anything.
    """
    window = np.asarray(window_counts, dtype=np.float64).ravel()
    reference = np.asarray(reference_counts, dtype=np.float64).ravel()
    keep = (window + reference) > 0
    if window.sum() <= 0 or reference.sum() <= 0 or keep.sum() < 2:
        return 0.0, 1.0
    table = np.vstack([window[keep], reference[keep]])
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    statistic = float(((table - expected) ** 2 / expected).sum())
    from scipy import stats as _stats
    return statistic, float(_stats.chi2.sf(statistic, int(keep.sum()) - 1))


def pooled_small_bins(window_counts: Any, reference_counts: Any, min_expected: float = 5.0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The counts with every bin where the window expects fewer than `min_expected` rows (its size times the
    reference share) pooled into one: the chi-square approximation needs about five expected per bin, and a
    codebook fitted in many dimensions has clusters of a few reference rows (12 of 200 no-drift windows of 100
    rows in 384 dimensions drifted on the clusters before pooling, none of the other tests more than 2)."""
    window = np.asarray(window_counts, dtype=np.float64).ravel()
    reference = np.asarray(reference_counts, dtype=np.float64).ravel()
    expected = window.sum() * reference / max(reference.sum(), 1.0)
    small = expected < min_expected
    if small.sum() < 1 or small.all():
        return window, reference
    return (np.append(window[~small], window[small].sum()), np.append(reference[~small], reference[small].sum()))


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float | None:
    """1 - cos(a, b); None when either vector is zero."""
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norms == 0.0 or not math.isfinite(norms):
        return None
    return float(1.0 - np.dot(a, b) / norms)
