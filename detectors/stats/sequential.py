"""Sequential tests: always-valid inference for an A/B test (the normal-mixture SPRT), and change detection
over windows (the mixture CUSUM e-detector)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SequentialTest", "arl_threshold", "cusum_step", "evidence", "msprt", "msprt_means", "msprt_proportions",
           "window_z"]


@dataclass(frozen=True)
class SequentialTest:
    """The mSPRT at every peek (arrays of shape ``(..., peeks)``, peeks on the last axis).

    ``difference`` is arm B's mean minus arm A's, ``p_value`` the always-valid p-value (non-increasing
    along the peeks), ``lower`` / ``upper`` the confidence sequence (an intersection, so it only narrows).
    """

    difference: np.ndarray
    p_value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def last(self) -> dict[str, float]:
        """The latest peek of a single test as plain floats (what a report carries)."""
        return {"difference": float(self.difference[..., -1]), "p_value": float(self.p_value[..., -1]),
                "lower": float(self.lower[..., -1]), "upper": float(self.upper[..., -1])}


def msprt(difference: Any, variance: Any, alpha: float, tau: float) -> SequentialTest:
    r"""The normal-mixture SPRT of "difference = 0" from a running estimate and its variance.

    At each peek *n* the estimate :math:`\hat\theta_n` (arm B minus arm A) has variance
    :math:`V_n`; mixing the likelihood ratio of :math:`\theta` against 0 over
    :math:`\theta \sim N(0, \tau^2)` gives

    .. math::  \Lambda_n = \sqrt{\frac{V_n}{V_n + \tau^2}}
               \exp\!\Big(\frac{\tau^2 \hat\theta_n^2}{2 V_n (V_n + \tau^2)}\Big)

    a non-negative martingale under the null, so by Ville's inequality
    :math:`P(\sup_n \Lambda_n \ge 1/\alpha) \le \alpha`: the always-valid p-value
    :math:`p_n = \min(1, \min_{m \le n} 1/\Lambda_m)` stays valid however often one
    peeks and stops. The confidence sequence inverts the same test at every
    :math:`\theta`: the running intersection of

    .. math::  \hat\theta_n \pm \sqrt{\frac{2 V_n (V_n + \tau^2)}{\tau^2}
               \Big(\ln\frac1\alpha + \tfrac12 \ln\frac{V_n + \tau^2}{V_n}\Big)}

    ``tau`` (in the units of the difference) sets where power is highest: near
    effects of size tau; any tau keeps the error rate. A peek with no variance
    yet (``V <= 0`` or not finite, e.g. an arm without rows) is no evidence:
    p stays where it was and the interval is unbounded there.

    Reference: Johari, Koomen, Pekelis, Walsh, "Always Valid Inference:
    Continuous Monitoring of A/B Tests", Operations Research 70(3), 2022.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not tau > 0.0:
        raise ValueError(f"tau must be positive, got {tau}")
    difference = np.asarray(difference, dtype=np.float64)
    variance = np.asarray(variance, dtype=np.float64)
    difference, variance = np.broadcast_arrays(difference, variance)
    usable = np.isfinite(variance) & (variance > 0) & np.isfinite(difference)
    v = np.where(usable, variance, 1.0)
    theta = np.where(usable, difference, 0.0)
    tau2 = tau * tau
    log_ratio = 0.5 * np.log(v / (v + tau2)) + tau2 * theta * theta / (2.0 * v * (v + tau2))
    # Evidence only ever accumulates: 1/Lambda's running minimum, computed in logs (Lambda can overflow).
    p_value = np.minimum.accumulate(np.exp(-np.maximum(np.where(usable, log_ratio, 0.0), 0.0)), axis=-1)
    half = np.sqrt(2.0 * v * (v + tau2) / tau2 * (np.log(1.0 / alpha) + 0.5 * np.log((v + tau2) / v)))
    lower = np.maximum.accumulate(np.where(usable, theta - half, -np.inf), axis=-1)
    upper = np.minimum.accumulate(np.where(usable, theta + half, np.inf), axis=-1)
    return SequentialTest(difference=np.where(usable, difference, np.nan), p_value=p_value,
                          lower=lower, upper=upper)


def _mean_and_variance(count: np.ndarray, total: np.ndarray, total_sq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each peek's mean and the variance of that mean (sample variance, ddof=1, over the count)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / count
        spread = np.maximum(total_sq - count * mean * mean, 0.0) / (count - 1.0)
        variance = np.where(count > 1, spread / count, np.nan)
    return np.where(count > 0, mean, np.nan), variance


def _counts(name: str, values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        array = array[None]
    if (array < 0).any() or not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite and non-negative")
    if array.shape[-1] > 1 and (np.diff(array, axis=-1) < 0).any():
        raise ValueError(f"{name} must be cumulative (non-decreasing along the peeks)")
    return array


def msprt_means(count_a: Any, sum_a: Any, sum_sq_a: Any, count_b: Any, sum_b: Any, sum_sq_b: Any,
                alpha: float, tau: float) -> SequentialTest:
    r"""`msprt` for the difference of two means from cumulative per-arm counts, sums and sums of squares.

    At each peek :math:`\hat\theta = \bar y_B - \bar y_A` and
    :math:`V = s_A^2 / n_A + s_B^2 / n_B` with the plug-in sample variances
    (the paper's large-sample form for unequal arms). Every argument has the
    shape ``(..., peeks)`` and holds running totals since the test began.
    """
    count_a, count_b = _counts("count_a", count_a), _counts("count_b", count_b)
    mean_a, var_a = _mean_and_variance(count_a, np.asarray(sum_a, dtype=np.float64),
                                       np.asarray(sum_sq_a, dtype=np.float64))
    mean_b, var_b = _mean_and_variance(count_b, np.asarray(sum_b, dtype=np.float64),
                                       np.asarray(sum_sq_b, dtype=np.float64))
    return msprt(mean_b - mean_a, var_a + var_b, alpha, tau)


def msprt_proportions(count_a: Any, successes_a: Any, count_b: Any, successes_b: Any,
                      alpha: float, tau: float) -> SequentialTest:
    r"""`msprt` for the difference of two proportions (successes over counts, cumulative per arm).

    :math:`V = \hat p_A (1 - \hat p_A) / n_A + \hat p_B (1 - \hat p_B) / n_B`. While
    both arms sit at 0 or 1 there is no variance yet and so no evidence.
    """
    count_a, count_b = _counts("count_a", count_a), _counts("count_b", count_b)
    successes_a, successes_b = _counts("successes_a", successes_a), _counts("successes_b", successes_b)
    if (successes_a > count_a).any() or (successes_b > count_b).any():
        raise ValueError("successes cannot exceed counts")
    with np.errstate(divide="ignore", invalid="ignore"):
        p_a, p_b = successes_a / count_a, successes_b / count_b
        variance = p_a * (1.0 - p_a) / count_a + p_b * (1.0 - p_b) / count_b
    return msprt(p_b - p_a, np.where((count_a > 0) & (count_b > 0), variance, np.nan), alpha, tau)


# --- change detection over windows: the mixture CUSUM e-detector ----------------------------------

def window_z(p_value: Any) -> np.ndarray:
    r"""A window's p-value on the normal scale, :math:`z = \Phi^{-1}(1 - p)`, clipped to [-10, 37].

    Under "no change" a valid p-value is uniform or larger (conservative, e.g. a discrete
    test), so z is standard normal or stochastically smaller: what `cusum_step` needs.
    The clip keeps the state finite (p = 1 gives -10, p <= 1e-300 gives 37).
    """
    from scipy.special import ndtri

    p = np.clip(np.nan_to_num(np.asarray(p_value, dtype=np.float64), nan=1.0), 1e-300, 1.0)
    return np.clip(-ndtri(p), -10.0, 37.0)


def cusum_step(log_state: Any, z: float, drifts: Any) -> np.ndarray:
    r"""One window of the mixture CUSUM e-detector: the new log-statistics, one per drift in `drifts`.

    For a grid of mean shifts :math:`\mu_k > 0` of a window's normal score `z`
    (`window_z`), each window's likelihood ratio of "z ~ N(mu_k, 1)" against "z ~ N(0, 1)",

    .. math::  e_{k,t} = \exp(\mu_k z_t - \mu_k^2 / 2),

    is an e-value: its expectation is at most 1 when the window did not change
    (:math:`z` standard normal or smaller, and :math:`e` increasing in :math:`z`).
    The CUSUM recursion restarts each component whenever its evidence fell to 1 or below,

    .. math::  C_{k,t} = \max(C_{k,t-1}, 1)\, e_{k,t}, \qquad M_t = \frac1K \sum_k C_{k,t},

    which is at most the mixture Shiryaev-Roberts statistic
    :math:`R_t = \frac1K\sum_k (R_{k,t-1} + 1) e_{k,t}`, and :math:`R_t - t` is a
    martingale under no change. So alarming when :math:`M_t \ge A` takes on average at
    least :math:`A` windows to raise a false alarm (optional stopping); restarted after
    each alarm, false alarms come at most once per :math:`A` windows in the long run,
    whatever the windows' count or the test behind each p-value. Under a persistent
    shift, the component nearest the shift grows by :math:`\mu z - \mu^2/2` per window,
    so evidence keeps accumulating where a per-window rule would need luck.

    Returns ``log C`` (logs, as the statistics span hundreds of orders of magnitude);
    the starting state is zeros. `evidence` gives ``log M``.

    >>> import numpy as np
    >>> drifts = np.array([0.5, 1.0, 2.0, 4.0])
    >>> state = np.zeros(4)
    >>> for p in [0.3, 0.02, 0.01, 0.004]:  # a drift too small for any single window at alpha = 0.001
    ...     state = cusum_step(state, float(window_z(p)), drifts)
    >>> round(float(np.exp(evidence(state))), 1)
    881.6

    Reference: Shin, Ramdas, Rinaldo, "E-detectors: a nonparametric framework for
    sequential change detection", New England Journal of Statistics in Data Science (2023);
    Lorden, "Procedures for reacting to a change in distribution", Ann. Math. Stat. 42 (1971).
    """
    drifts = np.asarray(drifts, dtype=np.float64)
    if drifts.ndim != 1 or drifts.size == 0 or not (drifts > 0).all():
        raise ValueError("drifts must be a non-empty list of positive numbers")
    state = np.asarray(log_state, dtype=np.float64)
    if state.shape != drifts.shape:
        raise ValueError(f"state has {state.size} components, drifts {drifts.size}")
    if not np.isfinite(z):
        raise ValueError(f"z must be finite, got {z}")
    return np.maximum(state, 0.0) + drifts * float(z) - 0.5 * drifts * drifts


def evidence(log_state: Any) -> float:
    """``log M``: the log of the mixture's e-value (equal weights over the components)."""
    state = np.asarray(log_state, dtype=np.float64)
    top = float(state.max())
    return top + float(np.log(np.exp(state - top).mean()))


def arl_threshold(windows_per_period: float, false_alarms_per_period: float, streams: int,
                  minimum: float = 1.0) -> float:
    r"""The line A for `streams` e-detectors together to raise at most `false_alarms_per_period` false alarms
    in `windows_per_period` windows: :math:`A = \text{streams} \cdot \text{windows} / \text{rate}`.

    Each stream's false alarms come at most once per A windows (`cusum_step`), so the
    family's expected count in the period is at most :math:`\text{streams} \cdot
    \text{windows} / A` (Bonferroni on the rates: no assumption on how streams depend on
    each other). Never below `minimum`.

    >>> arl_threshold(720, 1.0, 10)  # hourly windows, one false alarm a month, ten streams
    7200.0
    """
    if not false_alarms_per_period > 0:
        raise ValueError(f"the false-alarm rate must be positive, got {false_alarms_per_period}")
    if not windows_per_period > 0:
        raise ValueError(f"windows per period must be positive, got {windows_per_period}")
    return max(float(minimum), max(1, int(streams)) * float(windows_per_period) / float(false_alarms_per_period))
