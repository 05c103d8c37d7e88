"""New categories: a window's rows on categories the reference never saw, against the Good-Turing missing mass."""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special as _scipy_special


def unseen_test(reference_counts: Any, current_counts: Any) -> tuple[float, float]:
    r"""The window's share of rows on categories the reference never saw, and how surprising that many are.

    Under no drift a window row falls on a category the reference missed with probability at most the
    reference's missing mass, estimated by Good-Turing as

    .. math::  p_0 = \frac{N_1 + 1}{N + 1}

    (:math:`N_1` categories seen exactly once in the reference's :math:`N` rows; the +1 keeps it positive when
    the reference has no singletons). With k of the window's m rows on reference-unseen categories (reference
    count 0), the p-value is the one-sided binomial tail :math:`P(X \ge k)`, :math:`X \sim B(m, p_0)`
    (``scipy.stats.binom.sf(k - 1, m, p0)``). `chi2_pooled` puts a new category in its rare pool, where a few
    rows of it are diluted; this test sees them. ``(share, p_value)``; an empty window: ``(0.0, 1.0)``.

    >>> share, p_value = unseen_test([900, 50, 30, 20, 0], [90, 5, 0, 0, 5])  # 5 of 100 rows new, p0 = 1/1001
    >>> share, f"{p_value:.2g}"
    (0.05, '6.9e-08')
    """
    reference_counts = np.asarray(reference_counts, dtype=np.float64).ravel()
    current_counts = np.asarray(current_counts, dtype=np.float64).ravel()
    if reference_counts.shape != current_counts.shape:
        raise ValueError("unseen_test needs counts on the same categories")
    rows = int(current_counts.sum())
    if rows <= 0:
        return 0.0, 1.0
    unseen = int(current_counts[reference_counts <= 0].sum())
    missing_mass = min(1.0, (float((reference_counts == 1).sum()) + 1.0) / (float(reference_counts.sum()) + 1.0))
    p_value = 1.0 if unseen == 0 else float(_scipy_special.bdtrc(unseen - 1, rows, missing_mass))
    return unseen / rows, p_value


def unseen_details(reference_counts: Any, current_counts: Any) -> dict[str, float]:
    """`unseen_test` as a report shows it beside the chi-square: ``{"share", "p_value"}``."""
    share, p_value = unseen_test(reference_counts, current_counts)
    return {"share": share, "p_value": p_value}
