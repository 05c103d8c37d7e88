r"""Hellinger distance between two distributions on shared bins: a drift statistic, off until configured.

.. math::  H(p, q) = \frac{1}{\sqrt 2} \sqrt{\sum_i \left(\sqrt{p_i} - \sqrt{q_i}\right)^2}

with counts normalised to shares :math:`p, q`; between 0 (identical) and 1 (disjoint). It is Evidently's
``hellinger`` stattest and NannyML's ``hellinger`` method: the categories of a categorical feature, and for a
numeric one the bins every binned statistic here gets (Evidently's: Sturges bins over both samples, or value by
value for a feature with at most 20 distinct reference values; from the window state, those bins rebuilt from its
fine bins). Its square is additive like the Jensen-Shannon distance's, so sampling noise is removed in quadrature.

Turn it on with ``[drift] hellinger = 0.1`` (every feature) or ``[drift.features.F] hellinger = 0.1`` (one);
0.1 is Evidently's default threshold.

>>> round(Hellinger().value([50, 50], [50, 50]), 3), round(Hellinger().value([1, 0], [0, 1]), 3)
(0.0, 1.0)
>>> round(Hellinger().value([40, 30, 20, 10], [25, 25, 25, 25]), 4)
0.1679

Reference: Hellinger, E., "Neue Begründung der Theorie quadratischer Formen von unendlichvielen
Veränderlichen", J. reine angew. Math. 136 (1909).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from driftline.detectors.stats.registry import register
from driftline.detectors.stats.statistic import BinnedStatistic

__all__ = ["Hellinger"]


@register
class Hellinger(BinnedStatistic):
    """Hellinger distance (module docstring)."""

    key = "hellinger"
    threshold: ClassVar[float | None] = None
    why = "off until set; Evidently's default threshold is 0.1 (between 0, identical, and 1, disjoint)"
    noise = "quadrature"

    def rows(self, reference_counts: np.ndarray, current_counts: np.ndarray) -> np.ndarray:
        p = reference_counts / reference_counts.sum(axis=1, keepdims=True)
        q = current_counts / current_counts.sum(axis=1, keepdims=True)
        return np.sqrt(((np.sqrt(p) - np.sqrt(q)) ** 2).sum(axis=1) / 2.0)
