"""The drift statistics driftline has always reported, on the `Statistic` contract.

The detectors measure these in their own pass over a feature (``dedicated``: KS and Wasserstein share one merge of
the sorted samples; the window state keeps fine bins for PSI's deciles and the KS supremum); each class's
`from_samples` and `from_window` are those same functions, one statistic at a time. Thresholds and their reasons
live in `driftline.defaults`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from driftline import defaults
from driftline.baseline import NumericProfile
from driftline.detectors.stats import two_sample
from driftline.detectors.stats.registry import register
from driftline.detectors.stats.statistic import BinnedStatistic, Statistic
from driftline.vocabulary import CATEGORICAL, CHI2, JENSENSHANNON, KS, LINF, NUMERIC, PSI, WASSERSTEIN

if TYPE_CHECKING:
    from driftline.baseline import Profile
    from driftline.window_state import FeatureWindow

__all__ = ["ChiSquare", "JensenShannon", "KolmogorovSmirnov", "LInfinity", "PopulationStability", "Wasserstein"]


def _category_counts(profile: "Profile", window: "FeatureWindow") -> tuple[np.ndarray, np.ndarray]:
    from driftline.detectors.stats import binned  # binned reads the registry, which imports this module

    _, reference, current = binned.category_counts(profile, window)  # type: ignore[arg-type]
    return reference, current


@register
class PopulationStability(BinnedStatistic):
    """PSI: ten bins at the reference's deciles (numeric), or the categories."""

    key = PSI
    threshold: ClassVar[float | None] = defaults.PSI_THRESHOLD
    why = "PSI_THRESHOLD: the credit-scoring rule of thumb for a significant shift, above ten bins' noise"
    dedicated = True
    derived = True

    def rows(self, reference_counts: np.ndarray, current_counts: np.ndarray) -> np.ndarray:
        return two_sample.psi_rows(reference_counts, current_counts)

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        if kind == CATEGORICAL:
            return two_sample.psi_categorical(reference, current)
        return two_sample.psi_numeric(reference, current)

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        from driftline.detectors.stats import binned

        if isinstance(profile, NumericProfile):
            return binned.psi_binned(profile, window)
        return two_sample.psi(*_category_counts(profile, window))


@register
class KolmogorovSmirnov(Statistic):
    """The two-sample Kolmogorov-Smirnov test: a numeric feature's significance."""

    key = KS
    kinds = frozenset({NUMERIC})
    role = "significance"
    threshold: ClassVar[float | None] = defaults.DRIFT_ALPHA
    why = "DRIFT_ALPHA: its p-value, Benjamini-Hochberg-corrected across the window, against alpha"
    field = "statistic"
    dedicated = True

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        return two_sample.ks_2samp(reference, current)[0]

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        from driftline.detectors.stats import binned

        return binned.ks_binned(profile, window)[0]  # type: ignore[arg-type]


@register
class Wasserstein(Statistic):
    """Wasserstein-1 distance over the reference's standard deviation."""

    key = WASSERSTEIN
    kinds = frozenset({NUMERIC})
    threshold: ClassVar[float | None] = defaults.WASSERSTEIN_THRESHOLD
    why = "WASSERSTEIN_THRESHOLD: Evidently's default; the mass moved a tenth of a standard deviation"
    dedicated = True
    derived = True

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        return two_sample.wasserstein_normed(reference, current)

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        from driftline.detectors.stats import binned

        return binned.wasserstein_normed_binned(profile, window)  # type: ignore[arg-type]


@register
class JensenShannon(BinnedStatistic):
    """Jensen-Shannon distance (natural log) on Evidently's shared bins, or the categories."""

    key = JENSENSHANNON
    threshold: ClassVar[float | None] = defaults.JENSENSHANNON_THRESHOLD
    why = "JENSENSHANNON_THRESHOLD: Evidently's default for this distance"
    noise = "quadrature"
    dedicated = True
    derived = True

    def rows(self, reference_counts: np.ndarray, current_counts: np.ndarray) -> np.ndarray:
        return two_sample.jensenshannon_rows(reference_counts, current_counts)


@register
class ChiSquare(Statistic):
    """Pearson's chi-square over the categories: a categorical feature's significance (with its pooled test)."""

    key = CHI2
    kinds = frozenset({CATEGORICAL})
    role = "significance"
    threshold: ClassVar[float | None] = defaults.DRIFT_ALPHA
    why = "DRIFT_ALPHA: its pooled p-value, Benjamini-Hochberg-corrected across the window, against alpha"
    field = "statistic"
    dedicated = True

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        return two_sample.chi2_categorical(reference, current)[0]

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        return two_sample.chi2(*_category_counts(profile, window))[0]


@register
class LInfinity(Statistic):
    """The largest change of one category's share: reported beside the verdict, never deciding it."""

    key = LINF
    kinds = frozenset({CATEGORICAL})
    role = "reported"
    threshold: ClassVar[float | None] = defaults.LINF_THRESHOLD
    why = "LINF_THRESHOLD: ten percentage points of one category's share is a mix change a person notices"
    dedicated = True

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        return two_sample.linf_categorical(reference, current)

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        return two_sample.linf(*_category_counts(profile, window))
