"""Two-sample drift statistics on raw arrays and on bin counts.

Pure, vectorised numpy/scipy: arrays in, numbers out, no I/O. Every function
returns plain Python floats and has a defined result for the awkward inputs
(documented per function), so no NaN or infinity ever leaks into a report:

* NaN and +/-inf values are dropped before any statistic (data quality counts
  them separately; Evidently 0.7 drops them the same way).
* An empty sample (after dropping) gives "no evidence": distances 0.0,
  test statistic 0.0 with p-value 1.0. The decision rule separately calls such
  a window "insufficient data" (see `driftline.detectors.thresholds.decision`).

Functions ending in `_sorted` take already sorted, clean float arrays; batch and
streaming code sort a reference once and reuse it for every window. The public
raw-array functions are thin wrappers that clean and sort, so both paths run the
same arithmetic.

Where a method coincides with Evidently 0.7's (`evidently.legacy.calculations.
stattests`), the arithmetic is the same, operation for operation: PSI's
zero-share smoothing, the normalised Wasserstein distance's ``ddof=0`` standard
deviation with its 0.001 floor, the Jensen-Shannon distance's Sturges bins over
both samples, and the chi-square goodness of fit with expected counts from the
reference.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import special as _scipy_special

from driftline import defaults
from driftline.vocabulary import JENSENSHANNON, PSI, WASSERSTEIN

__all__ = [
    "bin_counts",
    "category_counts",
    "chi2",
    "chi2_categorical",
    "clean_numeric",
    "decile_edges",
    "histogram_sorted",
    "jensenshannon",
    "jensenshannon_categorical",
    "jensenshannon_numeric",
    "jensenshannon_numeric_sorted",
    "jensenshannon_rows",
    "ks_2samp",
    "ks_2samp_sorted",
    "ks_p_value",
    "linf",
    "linf_categorical",
    "missing_rate_test",
    "numeric_statistics_sorted",
    "psi",
    "psi_categorical",
    "psi_numeric",
    "psi_numeric_sorted",
    "psi_rows",
    "quantiles_of_order_statistics",
    "quantiles_sorted",
    "reference_std",
    "shared_bins_sorted",
    "sturges_edges_sorted",
    "wasserstein_normed",
    "wasserstein_normed_sorted",
    "wasserstein_sorted",
]

# scipy.stats (about a second to import) is loaded only for exact small-sample KS p-values; chi-square,
# the normal tail and Jensen-Shannon below are scipy's own arithmetic on scipy.special, operation for operation.

# scipy.stats.ks_2samp's method="auto" is exact up to this sample size, asymptotic above.
_SCIPY_KS_EXACT_MAX_N = 10_000


# --- cleaning and binning -------------------------------------------------------

def clean_numeric(values: Any) -> np.ndarray:
    """`values` as a float64 array without NaN and +/-inf (which are dropped, not imputed)."""
    array = np.asarray(values, dtype=np.float64).ravel()
    finite = np.isfinite(array)
    return array if finite.all() else array[finite]


def quantiles_sorted(values_sorted: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """``numpy.quantile(values, probabilities)`` (linear method, same arithmetic) for sorted values, without re-partitioning."""
    return quantiles_of_order_statistics(values_sorted.size, probabilities, lambda ranks: values_sorted[ranks])


def quantiles_of_order_statistics(n: int, probabilities: np.ndarray, at: Any) -> np.ndarray:
    """`quantiles_sorted` of `n` values known only through ``at(ranks)``, their order statistics at 0-based ranks.

    The bounded-memory reference (`driftline.detectors.batch.plan`) finds the few ranks it needs without
    sorting the whole column; the arithmetic is numpy's, so the quantiles are bit for bit the same.
    """
    positions = np.asarray(probabilities, dtype=np.float64) * (n - 1)
    below = np.floor(positions).astype(np.intp)
    above = np.minimum(below + 1, n - 1)
    fraction = positions - below
    low, high = at(below), at(above)
    step = high - low
    # numpy's _lerp: interpolate from the nearer end for accuracy.
    return np.where(fraction >= 0.5, high - step * (1 - fraction), low + step * fraction)


def decile_edges(reference: Any, n_bins: int = defaults.PSI_NUMERIC_BINS) -> np.ndarray:
    """Inner bin edges at the reference's quantiles 1/n, 2/n, ..., (n-1)/n (deciles by default).

    Quantiles use numpy's default (linear interpolation). Repeated edges (a
    feature with few distinct values) are merged, so there may be fewer than
    `n_bins` bins. The outer bins are open: (-inf, q_1) and [q_{n-1}, inf), so a
    current value outside the reference's range still lands in a bin. An empty
    reference gives no edges (one bin holding everything).
    """
    reference = clean_numeric(reference)
    if reference.size == 0:
        return np.empty(0, dtype=np.float64)
    if reference.size > 1 and not np.all(reference[1:] >= reference[:-1]):
        reference = np.sort(reference)
    return np.unique(quantiles_sorted(reference, np.arange(1, n_bins) / n_bins))


def bin_counts(values: Any, edges: np.ndarray) -> np.ndarray:
    """Counts of `values` in the bins ``(-inf, e_0), [e_0, e_1), ..., [e_last, inf)``.

    Returns ``len(edges) + 1`` int64 counts; NaN/inf are dropped first.
    """
    values = clean_numeric(values)
    edges = np.asarray(edges, dtype=np.float64)
    index = np.searchsorted(edges, values, side="right")
    return np.bincount(index, minlength=edges.size + 1).astype(np.int64)


def _bin_counts_sorted(values_sorted: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """`bin_counts` for sorted values: O(len(edges) log n) instead of O(n log len(edges)).

    Same bins as `bin_counts`, ``[e_i, e_{i+1})``: a value equal to an edge is in the
    upper bin, as in ``numpy.histogram`` (which Evidently 0.7 bins PSI with), the
    baseline's fine bins and the window summaries. So bin *j* starts at the first
    value ``>= e_{j-1}``: the cut is ``searchsorted(..., side="left")``.
    """
    cuts = np.searchsorted(values_sorted, edges, side="left")
    bounds = np.concatenate(([0], cuts, [values_sorted.size]))
    return np.diff(bounds).astype(np.int64)


def sturges_edges_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> np.ndarray:
    """Equal-width bin edges over both samples by Sturges' rule (``numpy.histogram_bin_edges(..., "sturges")``).

    This is how Evidently 0.7 bins a numeric feature for Jensen-Shannon and PSI.
    """
    both = np.concatenate((reference_sorted[:1], reference_sorted[-1:], current_sorted[:1], current_sorted[-1:]))
    # Sturges' rule needs only the combined size and range, so the samples are
    # not concatenated; the arithmetic below is numpy's, step for step.
    n_total = reference_sorted.size + current_sorted.size
    low, high = float(both.min()), float(both.max())
    if low == high:
        low, high = low - 0.5, high + 0.5  # numpy's own rule for a zero range
        return np.linspace(low, high, 2)
    width = (high - low) / (np.log2(n_total) + 1.0)
    n_bins = int(np.ceil((high - low) / width))
    return np.linspace(low, high, n_bins + 1, endpoint=True, dtype=np.float64)


def histogram_sorted(values_sorted: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``numpy.histogram(values, edges)[0]`` for sorted values: bins [e_i, e_i+1), the last one closed."""
    left = np.searchsorted(values_sorted, edges[:-1], side="left")
    right = np.searchsorted(values_sorted, edges[-1:], side="right")
    return np.diff(np.concatenate((left, right))).astype(np.int64)


def category_counts(reference: Any, current: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Categories seen in either sample (nulls dropped) with their counts in each.

    Returns ``(categories, reference_counts, current_counts)``; categories in
    order of first appearance (reference first). A category seen only in the
    current sample has reference count 0 (an "unseen category").
    """
    reference = pd.Series(np.asarray(reference, dtype=object) if not isinstance(reference, pd.Series) else reference)
    current = pd.Series(np.asarray(current, dtype=object) if not isinstance(current, pd.Series) else current)
    reference = reference.dropna()
    current = current.dropna()
    codes, categories = pd.factorize(pd.concat([reference, current], ignore_index=True), use_na_sentinel=True)
    k = len(categories)
    reference_counts = np.bincount(codes[: len(reference)], minlength=k).astype(np.int64)
    current_counts = np.bincount(codes[len(reference):], minlength=k).astype(np.int64)
    return np.asarray(categories, dtype=object), reference_counts, current_counts


def _shares(counts: Any) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.float64).ravel()
    total = counts.sum()
    return counts / total if total > 0 else np.zeros_like(counts)


# --- PSI ------------------------------------------------------------------------

def _fill_zero_shares(shares: np.ndarray, eps: float) -> np.ndarray:
    """Evidently's smoothing of empty bins, per row of `shares` (one distribution per row)."""
    smallest = np.where(shares != 0, shares, np.inf).min(axis=-1, keepdims=True)
    floor = np.where(smallest <= eps, smallest / 10**6, eps)
    return np.where(shares == 0, floor, shares)


def psi(reference_counts: Any, current_counts: Any, eps: float = defaults.PSI_EPSILON) -> float:
    r"""Population Stability Index of two distributions on the same bins.

    .. math::  \mathrm{PSI} = \sum_i (r_i - c_i)\,\ln(r_i / c_i)

    where :math:`r_i` and :math:`c_i` are the shares of bin *i* in the reference
    and the current sample (counts over their total). PSI is a symmetrised
    Kullback-Leibler divergence, ``KL(r||c) + KL(c||r)``; 0 means identical.

    Zero shares would make it infinite, so each side's empty bins get a small
    share first, exactly as Evidently 0.7 does: ``eps`` if that side's smallest
    non-zero share is above ``eps``, else that smallest share divided by 10^6.
    Shares are not renormalised afterwards (Evidently does not either).

    Parameters: ``reference_counts``, ``current_counts``: equal-length counts (or
    shares) per bin. Returns 0.0 when either side is empty (no evidence).

    >>> round(psi([50, 50], [50, 50]), 6)
    0.0
    >>> round(psi([90, 10], [50, 50]), 4)
    0.8789
    """
    reference_counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    current_counts = np.asarray(current_counts, dtype=np.float64).ravel()
    if reference_counts.shape != current_counts.shape:
        raise ValueError(f"psi needs counts on the same bins, got {reference_counts.size} and {current_counts.size}")
    if reference_counts.sum() <= 0 or current_counts.sum() <= 0:
        return 0.0
    return float(psi_rows(reference_counts[np.newaxis], current_counts[np.newaxis], eps)[0])


def psi_rows(reference_counts: np.ndarray, current_counts: np.ndarray, eps: float = defaults.PSI_EPSILON) -> np.ndarray:
    """`psi` of each row pair of two 2-D arrays of counts on the same bins (rows with a count each)."""
    reference_shares = _fill_zero_shares(reference_counts / reference_counts.sum(axis=1, keepdims=True), eps)
    current_shares = _fill_zero_shares(current_counts / current_counts.sum(axis=1, keepdims=True), eps)
    return np.sum((reference_shares - current_shares) * np.log(reference_shares / current_shares), axis=1)


def psi_numeric_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray,
                       n_bins: int = defaults.PSI_NUMERIC_BINS) -> float:
    """`psi_numeric` for sorted, clean arrays."""
    if reference_sorted.size == 0 or current_sorted.size == 0:
        return 0.0
    edges = decile_edges(reference_sorted, n_bins)
    return psi(_bin_counts_sorted(reference_sorted, edges), _bin_counts_sorted(current_sorted, edges))


def psi_numeric(reference: Any, current: Any, n_bins: int = defaults.PSI_NUMERIC_BINS) -> float:
    """PSI of a numeric feature on ten bins at the reference's deciles (documented bins, unlike Evidently's Sturges bins).

    Bins are `decile_edges(reference)` with open outer bins, so each holds about
    a tenth of the reference; `psi` then applies. Bins are ``[e_i, e_{i+1})``: a
    value on an edge counts in the upper bin, as ``numpy.histogram`` (Evidently
    0.7's PSI binning) and the window summaries (`driftline.detectors.stats.binned.psi_binned`)
    count it, so raw and binned PSI agree on tied data. NaN/inf dropped; an empty side
    gives 0.0; a constant reference gives two bins (below the constant, and at
    or above it), so PSI sees a move below the constant but not above it (KS
    and Wasserstein see both).
    """
    return psi_numeric_sorted(np.sort(clean_numeric(reference)), np.sort(clean_numeric(current)), n_bins)


def psi_categorical(reference: Any, current: Any) -> float:
    """PSI over the categories seen in either sample (nulls dropped), via `psi`.

    Same method and value as Evidently 0.7's ``psi`` stat test on a categorical
    column. An unseen category (only in the current sample) gets the smoothed
    reference share, so it raises PSI strongly but finitely.
    """
    _, reference_counts, current_counts = category_counts(reference, current)
    return psi(reference_counts, current_counts)


# --- Kolmogorov-Smirnov -----------------------------------------------------------

def ks_p_value(statistic: float, n_reference: int, n_current: int) -> float:
    r"""Two-sided p-value of the two-sample KS statistic D for large samples.

    Kolmogorov's limiting distribution with Stephens' small-sample correction:

    .. math::  p = Q_{KS}\big((\sqrt{n_e} + 0.12 + 0.11/\sqrt{n_e})\,D\big), \quad
               n_e = \frac{n m}{n + m}, \quad Q_{KS}(x) = 2\sum_{k\ge1} (-1)^{k-1} e^{-2k^2x^2}

    (``scipy.stats.kstwobign.sf``, computed by ``scipy.special.kolmogorov``). Above 10 000 rows per sample, where scipy's
    ``ks_2samp`` switches from the exact distribution to ``kstwo.sf(D,
    round(n_e))``, this stays within 0.2 % (relative) of scipy's value at the
    usual significance levels and within 1 % down to p = 1e-8, but costs
    microseconds where ``kstwo.sf`` takes up to half a second (500k rows).

    Reference: Stephens, M. A., "Use of the Kolmogorov-Smirnov, Cramér-von
    Mises and related statistics without extensive tables", JRSS B 32 (1970).
    """
    if n_reference == 0 or n_current == 0:
        return 1.0
    effective_n = n_reference * n_current / (n_reference + n_current)
    root = math.sqrt(effective_n)
    # scipy.special.kolmogorov is kstwobign.sf without the distribution-object overhead.
    return float(np.clip(_scipy_special.kolmogorov((root + 0.12 + 0.11 / root) * statistic), 0.0, 1.0))


def _ecdf_gaps_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ECDF differences F_ref - F_cur at each distinct sample value but the largest, and the gaps to the next value.

    Both CDFs are step functions that change only at sample values, so these
    two arrays hold everything KS and Wasserstein need. The samples are merged
    by a stable argsort of the two sorted runs (linear for timsort); the merge
    order itself gives both CDFs, without binary searches.
    """
    n1, n2 = reference_sorted.size, current_sorted.size
    both = np.concatenate((reference_sorted, current_sorted))
    order = np.argsort(both, kind="stable")
    merged = both[order]
    del both  # large windows: keep the peak of temporaries low
    # Last index of each run of equal values, except the final run (where both CDFs are 1).
    distinct = merged[1:] != merged[:-1]
    if distinct.all():  # no ties (continuous data): every index but the last ends a run
        run_ends = np.arange(merged.size - 1)
        ends_order = order[:-1]
        deltas = np.diff(merged)
    else:
        run_ends = np.flatnonzero(distinct)
        ends_order = order[run_ends]
        deltas = merged[run_ends + 1] - merged[run_ends]
    # The stable merge keeps each sample's own order, so at merged index k holding
    # reference element i, i + 1 reference values are <= it; holding current
    # element j, k - j of them are.
    reference_seen = run_ends - ends_order
    reference_seen += n1
    np.add(ends_order, 1, out=reference_seen, where=ends_order < n1)
    current_seen = run_ends + 1
    current_seen -= reference_seen
    gaps = reference_seen / n1
    del reference_seen
    gaps -= current_seen / n2
    return gaps, deltas


def ks_2samp_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> tuple[float, float]:
    """`ks_2samp` for sorted, clean arrays (reuses a pre-sorted reference)."""
    n1, n2 = reference_sorted.size, current_sorted.size
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    if max(n1, n2) <= _SCIPY_KS_EXACT_MAX_N:
        from scipy import stats as _scipy_stats

        result = _scipy_stats.ks_2samp(reference_sorted, current_sorted)
        return float(result.statistic), float(result.pvalue)
    gaps, _ = _ecdf_gaps_sorted(reference_sorted, current_sorted)
    statistic = float(np.abs(gaps).max(initial=0.0))
    return statistic, ks_p_value(statistic, n1, n2)


def ks_2samp(reference: Any, current: Any) -> tuple[float, float]:
    r"""Two-sample Kolmogorov-Smirnov test, two-sided: ``(statistic, p_value)``.

    .. math::  D = \sup_x |F_{ref}(x) - F_{cur}(x)|

    with :math:`F` the empirical CDFs; the statistic is scipy's ``ks_2samp``'s
    to the last bit. The p-value is scipy's exact one up to 10 000 rows per
    sample; above, Kolmogorov's limiting distribution with Stephens' correction
    (`ks_p_value`, within 0.2 % of scipy's asymptotic p-value at usual levels,
    thousands of times faster). NaN/inf dropped; an empty side gives ``(0.0, 1.0)``.

    Reference: Hodges, J.L. Jr., "The Significance Probability of the Smirnov
    Two-Sample Test", Arkiv för Matematik 3 (1958).
    """
    return ks_2samp_sorted(np.sort(clean_numeric(reference)), np.sort(clean_numeric(current)))


# --- Wasserstein ------------------------------------------------------------------

def reference_std(reference: Any) -> float:
    """Population standard deviation (``ddof=0``, as ``numpy.std`` and Evidently) floored at 0.001.

    The floor (`defaults.WASSERSTEIN_MIN_STD`) keeps the normalised Wasserstein
    distance finite for a constant reference; an empty reference gives the floor.
    """
    reference = clean_numeric(reference)
    if reference.size == 0:
        return defaults.WASSERSTEIN_MIN_STD
    return max(float(np.std(reference)), defaults.WASSERSTEIN_MIN_STD)


def wasserstein_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> float:
    r"""First Wasserstein distance of two sorted samples (scipy's ``wasserstein_distance``, same arithmetic).

    .. math::  W_1 = \int_{-\infty}^{\infty} |F_{ref}(x) - F_{cur}(x)|\,dx

    evaluated exactly on the merged sample points (the same sum as scipy's, less
    its zero-width terms at tied values). 0.0 if either side is empty.
    """
    n1, n2 = reference_sorted.size, current_sorted.size
    if n1 == 0 or n2 == 0:
        return 0.0
    gaps, deltas = _ecdf_gaps_sorted(reference_sorted, current_sorted)
    return float((np.abs(gaps) * deltas).sum())  # not BLAS: its threads waiting on a busy machine cost ms per call


def wasserstein_normed_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray,
                              std: float | None = None) -> float:
    """`wasserstein_normed` for sorted, clean arrays; pass `std` (from `reference_std`) to reuse it."""
    if reference_sorted.size == 0 or current_sorted.size == 0:
        return 0.0
    norm = reference_std(reference_sorted) if std is None else std
    return wasserstein_sorted(reference_sorted, current_sorted) / norm


def wasserstein_normed(reference: Any, current: Any) -> float:
    r"""Wasserstein-1 distance divided by the reference's standard deviation.

    .. math::  W_1(ref, cur) / \max(\sigma_{ref}, 0.001)

    with :math:`\sigma_{ref}` the population standard deviation (``ddof=0``).
    It reads "how far, in reference standard deviations, the mass moved on
    average"; a mean shift of k sigma gives about k. Same method and value as
    Evidently 0.7's ``wasserstein`` stat test. NaN/inf dropped; an empty side
    gives 0.0; a constant reference divides by the 0.001 floor.

    Reference: Ramdas, Garcia, Cuturi, "On Wasserstein Two Sample Testing and
    Related Families of Nonparametric Tests" (2015).
    """
    reference_sorted = np.sort(clean_numeric(reference))
    return wasserstein_normed_sorted(reference_sorted, np.sort(clean_numeric(current)))


def numeric_statistics_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray, *,
                              std: float | None = None, psi_edges: np.ndarray | None = None,
                              reference_psi_counts: np.ndarray | None = None) -> dict[str, float]:
    """PSI, KS, normalised Wasserstein and Jensen-Shannon of two sorted, clean samples in one pass.

    The same values as `psi_numeric`, `ks_2samp`, `wasserstein_normed` and
    `jensenshannon_numeric` (same arithmetic), but KS and Wasserstein share one
    merge of the two sorted samples and the reference-only parts (`std` from
    `reference_std`, `psi_edges` from `decile_edges` and their
    `reference_psi_counts`) can be computed once per reference and passed in.

    Returns ``{"psi", "ks_statistic", "ks_p_value", "wasserstein", "jensenshannon"}``.
    """
    n1, n2 = reference_sorted.size, current_sorted.size
    if n1 == 0 or n2 == 0:
        return {PSI: 0.0, "ks_statistic": 0.0, "ks_p_value": 1.0, WASSERSTEIN: 0.0, JENSENSHANNON: 0.0}
    if psi_edges is None:
        psi_edges = decile_edges(reference_sorted)
        reference_psi_counts = None
    if reference_psi_counts is None:
        reference_psi_counts = _bin_counts_sorted(reference_sorted, psi_edges)
    if std is None:
        std = reference_std(reference_sorted)

    gaps, deltas = _ecdf_gaps_sorted(reference_sorted, current_sorted)
    wasserstein = float((np.abs(gaps) * deltas).sum())  # not BLAS: its threads waiting on a busy machine cost ms per call
    if max(n1, n2) <= _SCIPY_KS_EXACT_MAX_N:
        ks_statistic, ks_p = ks_2samp_sorted(reference_sorted, current_sorted)
    else:
        ks_statistic = float(np.abs(gaps).max(initial=0.0))
        ks_p = ks_p_value(ks_statistic, n1, n2)
    return {
        PSI: psi(reference_psi_counts, _bin_counts_sorted(current_sorted, psi_edges)),
        "ks_statistic": ks_statistic,
        "ks_p_value": ks_p,
        WASSERSTEIN: wasserstein / std,
        JENSENSHANNON: jensenshannon_numeric_sorted(reference_sorted, current_sorted),
    }


# --- Jensen-Shannon --------------------------------------------------------------

def jensenshannon(reference_counts: Any, current_counts: Any) -> float:
    r"""Jensen-Shannon distance between two distributions on the same bins (natural log).

    .. math::  JS(r, c) = \sqrt{\tfrac12 KL(r \| m) + \tfrac12 KL(c \| m)}, \quad m = \tfrac12 (r + c)

    with counts normalised to shares (scipy's ``spatial.distance.jensenshannon``,
    base e). Between 0 (identical) and sqrt(ln 2) = 0.8326 (disjoint). No
    smoothing is needed: empty bins contribute 0. 0.0 when either side is empty.
    """
    reference_counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    current_counts = np.asarray(current_counts, dtype=np.float64).ravel()
    if reference_counts.shape != current_counts.shape:
        raise ValueError("jensenshannon needs counts on the same bins")
    if reference_counts.sum() <= 0 or current_counts.sum() <= 0:
        return 0.0
    return float(jensenshannon_rows(reference_counts[np.newaxis], current_counts[np.newaxis])[0])


def jensenshannon_rows(reference_counts: np.ndarray, current_counts: np.ndarray) -> np.ndarray:
    """`jensenshannon` of each row pair of two 2-D arrays of counts on the same bins (rows with a count each)."""
    # scipy.spatial.distance.jensenshannon (scipy 1.17), step for step, without importing scipy.spatial
    p = reference_counts / reference_counts.sum(axis=1, keepdims=True)
    q = current_counts / current_counts.sum(axis=1, keepdims=True)
    m = (p + q) / 2.0
    divergence = _scipy_special.rel_entr(p, m).sum(axis=1) + _scipy_special.rel_entr(q, m).sum(axis=1)
    return np.sqrt(divergence / 2.0)


def _unique_sorted(values_sorted: np.ndarray) -> np.ndarray:
    if values_sorted.size == 0:
        return values_sorted
    return values_sorted[np.concatenate(([True], values_sorted[1:] != values_sorted[:-1]))]


def _distinct_sorted(values_sorted: np.ndarray) -> int:
    if values_sorted.size == 0:
        return 0
    return int(np.count_nonzero(np.diff(values_sorted))) + 1


def shared_bins_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of two sorted, clean, non-empty samples on Evidently 0.7's shared bins (`jensenshannon_numeric`):
    Sturges bins over both, or value by value for at most 20 distinct reference values."""
    if _distinct_sorted(reference_sorted) > defaults.JENSENSHANNON_MAX_DISTINCT_AS_CATEGORIES:
        edges = sturges_edges_sorted(reference_sorted, current_sorted)
        return histogram_sorted(reference_sorted, edges), histogram_sorted(current_sorted, edges)
    values = np.union1d(_unique_sorted(reference_sorted), _unique_sorted(current_sorted))
    reference_counts = np.diff(np.append(np.searchsorted(reference_sorted, values, side="left"), reference_sorted.size))
    current_counts = np.diff(np.append(np.searchsorted(current_sorted, values, side="left"), current_sorted.size))
    return reference_counts, current_counts


def jensenshannon_numeric_sorted(reference_sorted: np.ndarray, current_sorted: np.ndarray) -> float:
    """`jensenshannon_numeric` for sorted, clean arrays."""
    if reference_sorted.size == 0 or current_sorted.size == 0:
        return 0.0
    return jensenshannon(*shared_bins_sorted(reference_sorted, current_sorted))


def jensenshannon_numeric(reference: Any, current: Any) -> float:
    """Jensen-Shannon distance of a numeric feature on shared bins, as Evidently 0.7 bins it.

    Bins: equal width over the range of both samples together, their number by
    Sturges' rule on the combined size (``numpy.histogram_bin_edges(...,
    "sturges")``); a feature with at most 20 distinct reference values is
    compared value by value instead. Then `jensenshannon`. NaN/inf dropped; an
    empty side gives 0.0.
    """
    return jensenshannon_numeric_sorted(np.sort(clean_numeric(reference)), np.sort(clean_numeric(current)))


def jensenshannon_categorical(reference: Any, current: Any) -> float:
    """Jensen-Shannon distance over the categories seen in either sample (nulls dropped)."""
    _, reference_counts, current_counts = category_counts(reference, current)
    return jensenshannon(reference_counts, current_counts)


# --- chi-square and L-infinity for categories -------------------------------------

def chi2(reference_counts: Any, current_counts: Any, eps: float = defaults.PSI_EPSILON) -> tuple[float, float]:
    r"""Chi-square goodness of fit of the current counts to the reference frequencies.

    .. math::  \chi^2 = \sum_i \frac{(O_i - E_i)^2}{E_i}, \quad E_i = N_{cur}\, p_i, \quad
               p_i = \frac{R_i}{N_{ref}}

    with k - 1 degrees of freedom for k categories; ``(statistic, p_value)``
    from ``scipy.stats.chisquare``. Same method and value as Evidently 0.7's
    ``chisquare`` stat test whenever every current category was seen in the
    reference. A category unseen in the reference would have E_i = 0 and an
    infinite statistic; it gets the PSI smoothing share instead (then the
    frequencies are renormalised to sum to 1), which gives a large finite
    statistic and a p-value near 0. Fewer than two categories, or an empty side:
    ``(0.0, 1.0)``.
    """
    reference_counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    current_counts = np.asarray(current_counts, dtype=np.float64).ravel()
    if reference_counts.shape != current_counts.shape:
        raise ValueError("chi2 needs counts on the same categories")
    if reference_counts.sum() <= 0 or current_counts.sum() <= 0 or reference_counts.size < 2:
        return 0.0, 1.0
    frequencies = _shares(reference_counts)
    if (frequencies == 0).any():
        frequencies = _fill_zero_shares(frequencies, eps)
        frequencies = frequencies / frequencies.sum()
    expected = current_counts.sum() * frequencies
    # scipy.stats.chisquare (scipy 1.17's power divergence, lambda 1), step for step
    statistic = np.sum((current_counts - expected) ** 2 / expected)
    return float(statistic), float(_scipy_special.chdtrc(float(current_counts.size - 1), statistic))


def chi2_pooled(reference_counts: Any, current_counts: Any, min_expected: float = defaults.CHI2_MIN_EXPECTED) -> float:
    r"""The p-value of a two-sample chi-square test with rare categories pooled: valid with hundreds of categories.

    `chi2` tests the window against the reference's frequencies as if they were exact,
    and Pearson's statistic is chi-square distributed only when every expected count is
    large. With 300 categories both fail: expected counts below one inflate its variance
    (by :math:`\sum_i 1/E_i`), and the reference's own sampling error adds
    :math:`(k - 1)\, n / m` to its mean (n window rows, m reference rows, k categories);
    43-47 % of the windows of an unchanged feature come out "significant" at 5 %.
    Here categories are taken rarest first (by the window's expected count) and pooled into
    groups expecting at least `min_expected` rows (Cochran's rule, 5), and the 2 x groups
    table of counts gets the test of homogeneity,

    .. math::  X^2 = \sum_{s \in \{ref, cur\}} \sum_g \frac{(O_{sg} - E_{sg})^2}{E_{sg}},
               \quad E_{sg} = \frac{N_s\, C_g}{N}, \qquad X^2 \sim \chi^2_{G - 1},

    which counts both samples' noise. A new category lands in the rare pool, whose count
    it raises. The per-window rule and sequential evidence judge a categorical feature by this
    p-value (`driftline.detectors.thresholds.decision.significance_p_value`); `chi2`'s, as Evidently
    computes it, stays in the report beside it. Fewer than two groups or an empty side: 1.0.

    >>> chi2_pooled([900, 50, 30, 20], [90, 5, 3, 2])  # the same shares: no evidence
    1.0
    """
    reference_counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    current_counts = np.asarray(current_counts, dtype=np.float64).ravel()
    if reference_counts.shape != current_counts.shape:
        raise ValueError("chi2 needs counts on the same categories")
    total = reference_counts + current_counts
    if reference_counts.sum() <= 0 or current_counts.sum() <= 0 or (total > 0).sum() < 2:
        return 1.0
    expected = total * current_counts.sum() / total.sum()  # the window's expected count of each category
    # ties (equal totals) in a scrambled order of positions: reports list categories by reference count or first
    # appearance, so position order sorts ties by their split and grouped reference-heavy ones together (14 % of
    # unchanged windows of 2 000 equal categories flagged at 5 %)
    scrambled = (np.arange(expected.size, dtype=np.uint64) * np.uint64(2654435761)) % np.uint64(2 ** 32)
    order = np.lexsort((scrambled, expected))
    groups = np.zeros(order.size, dtype=np.int64)
    group, filled = 0, 0.0
    for i, e in enumerate(expected[order]):  # rarest first: a group closes once it expects min_expected rows
        groups[i] = group
        filled += e
        if filled >= min_expected:
            group, filled = group + 1, 0.0
    if filled and group:  # the last group fell short: it joins the one before
        groups[groups == group] = group - 1
    table = np.vstack([np.bincount(groups, weights=reference_counts[order]),
                       np.bincount(groups, weights=current_counts[order])])
    if table.shape[1] < 2:
        return 1.0
    # scipy.stats.chi2_contingency(table, correction=False) on a 2 x k table, without importing scipy.stats
    expected_table = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
    statistic = float(np.sum((table - expected_table) ** 2 / expected_table))
    return float(_scipy_special.chdtrc(float(table.shape[1] - 1), statistic))


def chi2_categorical(reference: Any, current: Any) -> tuple[float, float]:
    """`chi2` over the categories seen in either sample (nulls dropped)."""
    _, reference_counts, current_counts = category_counts(reference, current)
    return chi2(reference_counts, current_counts)


def linf(reference_freqs: Any, current_freqs: Any) -> float:
    r"""L-infinity distance between category frequencies: the largest change of one category's share.

    .. math::  L_\infty = \max_i |p_i - q_i|

    Inputs may be counts or shares (each side is normalised to sum 1). Between 0
    and 1. 0.0 when either side is empty.
    """
    reference_freqs = np.asarray(reference_freqs, dtype=np.float64).ravel()
    current_freqs = np.asarray(current_freqs, dtype=np.float64).ravel()
    if reference_freqs.shape != current_freqs.shape:
        raise ValueError("linf needs frequencies on the same categories")
    if reference_freqs.size == 0 or reference_freqs.sum() <= 0 or current_freqs.sum() <= 0:
        return 0.0
    return float(np.max(np.abs(_shares(reference_freqs) - _shares(current_freqs))))


def linf_categorical(reference: Any, current: Any) -> float:
    """`linf` over the categories seen in either sample (nulls dropped)."""
    _, reference_counts, current_counts = category_counts(reference, current)
    return linf(reference_counts, current_counts)


def missing_rate_test(reference_missing: int, reference_rows: int,
                      current_missing: int, current_rows: int) -> tuple[float, float]:
    r"""Did the share of missing values change? ``(current_rate - reference_rate, p_value)``.

    Two-proportion z-test (equivalently the 2x2 chi-square test without
    continuity correction): with pooled rate :math:`\hat p`,

    .. math::  z = \frac{q_{cur} - q_{ref}}{\sqrt{\hat p (1-\hat p)(1/n_{ref} + 1/n_{cur})}}

    and a two-sided p-value. No missing values anywhere (or all missing, or an
    empty side): ``(difference, 1.0)``.
    """
    if reference_rows <= 0 or current_rows <= 0:
        return 0.0, 1.0
    reference_rate = reference_missing / reference_rows
    current_rate = current_missing / current_rows
    pooled = (reference_missing + current_missing) / (reference_rows + current_rows)
    difference = current_rate - reference_rate
    if pooled <= 0.0 or pooled >= 1.0:
        return float(difference), 1.0
    standard_error = math.sqrt(pooled * (1.0 - pooled) * (1.0 / reference_rows + 1.0 / current_rows))
    z = difference / standard_error
    return float(difference), float(2.0 * _scipy_special.ndtr(-abs(z)))  # scipy.stats.norm.sf, as scipy computes it
