"""Generated data with a known joint structure, for the multivariate tests and benchmarks.

`correlated_features(rows, rho, seed)`: income and spend correlated by `rho`, age, tenure and
a three-valued plan independent. No marginal depends on `rho`, so a window drawn with another
`rho` than its reference drifts only in how two features move together: the case per-feature
tests cannot see and the multivariate detectors are for.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PLANS", "correlated_features"]

PLANS = ("basic", "plus", "pro")


def correlated_features(rows: int, rho: float, seed: int) -> pd.DataFrame:
    """`rows` rows of income and spend correlated by `rho` (in [-1, 1]), age, tenure and plan; seeded."""
    if not -1.0 <= rho <= 1.0:
        raise ValueError(f"a correlation lies in [-1, 1], got {rho}")
    rng = np.random.default_rng(seed)
    first = rng.normal(size=rows)
    second = rho * first + np.sqrt(1 - rho ** 2) * rng.normal(size=rows)
    return pd.DataFrame({"income": 50 + 10 * first, "spend": 20 + 5 * second, "age": rng.normal(40, 12, rows),
                         "tenure": rng.exponential(3.0, rows),
                         "plan": rng.choice(list(PLANS), rows, p=[0.5, 0.3, 0.2]).astype(object)})
