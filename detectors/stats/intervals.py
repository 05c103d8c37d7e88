"""Fixed-sample confidence intervals for one window's comparisons: a proportion, two proportions, two means."""
from __future__ import annotations

import math

from scipy import stats as _scipy_stats

__all__ = ["mean_difference_interval", "newcombe_interval", "wilson_interval"]


def _z(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(_scipy_stats.norm.isf(alpha / 2.0))


def _check_counts(successes: int, count: int) -> None:
    if count < 0 or successes < 0 or successes > count:
        raise ValueError(f"need 0 <= successes <= count, got {successes} of {count}")


def wilson_interval(successes: int, count: int, alpha: float) -> tuple[float, float]:
    r"""Two-sided Wilson score interval of a proportion, level ``1 - alpha``.

    .. math::  \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p(1-\hat p)}{n} + \frac{z^2}{4n^2}}}
               {1 + \frac{z^2}{n}}

    Unlike the Wald interval it stays inside [0, 1] and does not collapse to a
    point at 0 or n successes. No rows: ``(0.0, 1.0)``.

    Reference: Wilson, E. B., "Probable inference, the law of succession, and
    statistical inference", JASA 22 (1927).
    """
    _check_counts(successes, count)
    if count == 0:
        return 0.0, 1.0
    z = _z(alpha)
    p = successes / count
    denominator = 1.0 + z * z / count
    centre = (p + z * z / (2.0 * count)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / count + z * z / (4.0 * count * count)) / denominator
    # Exact at the ends: the formula gives 0 and 1 there up to rounding.
    lower = 0.0 if successes == 0 else max(0.0, centre - half)
    upper = 1.0 if successes == count else min(1.0, centre + half)
    return lower, upper


def newcombe_interval(successes_a: int, count_a: int, successes_b: int, count_b: int,
                      alpha: float) -> tuple[float, float, float]:
    r"""``(difference, lower, upper)`` of :math:`p_B - p_A` by Newcombe's hybrid score interval.

    With :math:`[l_A, u_A]`, :math:`[l_B, u_B]` the Wilson intervals of each arm,

    .. math::  L = d - \sqrt{(\hat p_B - l_B)^2 + (u_A - \hat p_A)^2}, \quad
               U = d + \sqrt{(u_B - \hat p_B)^2 + (\hat p_A - l_A)^2}

    Good coverage with rare events (an error rate of 0.1 %) where the Wald
    interval is far too narrow. An arm without rows: ``(0.0, -1.0, 1.0)``.

    Reference: Newcombe, R. G., "Interval estimation for the difference between
    independent proportions: comparison of eleven methods", Statistics in
    Medicine 17 (1998), method 10.
    """
    _check_counts(successes_a, count_a)
    _check_counts(successes_b, count_b)
    if count_a == 0 or count_b == 0:
        return 0.0, -1.0, 1.0
    p_a, p_b = successes_a / count_a, successes_b / count_b
    l_a, u_a = wilson_interval(successes_a, count_a, alpha)
    l_b, u_b = wilson_interval(successes_b, count_b, alpha)
    d = p_b - p_a
    lower = d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2)
    upper = d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2)
    return d, max(-1.0, lower), min(1.0, upper)


def mean_difference_interval(count_a: int, sum_a: float, sum_sq_a: float, count_b: int, sum_b: float,
                             sum_sq_b: float, alpha: float) -> tuple[float | None, float | None, float | None]:
    r"""``(difference, lower, upper)`` of :math:`\bar y_B - \bar y_A` from counts, sums and sums of squares.

    Large-sample (Welch) normal interval, :math:`d \pm z \sqrt{s_A^2/n_A + s_B^2/n_B}`
    with sample variances (ddof = 1). Fewer than two rows in an arm: all None.
    """
    if count_a < 2 or count_b < 2:
        return None, None, None
    mean_a, mean_b = sum_a / count_a, sum_b / count_b
    var_a = max(0.0, sum_sq_a - count_a * mean_a * mean_a) / (count_a - 1)
    var_b = max(0.0, sum_sq_b - count_b * mean_b * mean_b) / (count_b - 1)
    d = mean_b - mean_a
    half = _z(alpha) * math.sqrt(var_a / count_a + var_b / count_b)
    return d, d - half, d + half
