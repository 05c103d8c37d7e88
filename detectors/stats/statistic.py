"""The contract of a drift statistic: one small class per statistic, registered in `driftline.detectors.stats.registry`.

A statistic says what it is (``key``: its name in a feature's ``tests``, its TOML key under ``[drift]`` and its
``test`` label on ``driftline_feature_drift_score``; ``kinds``: the feature kinds it compares), how it measures
(from raw arrays, `from_samples`; from the mergeable summaries a window keeps, `from_window`) and how it is judged
(``role``; its default ``threshold`` and ``why``; how its sampling ``noise`` is removed). It never decides: the
decision rule (`driftline.detectors.thresholds.decision`) reads these attributes, as NannyML's methods own their
thresholds but leave the alert to the rule.

A *binned* statistic (`BinnedStatistic`) only compares two count vectors on shared bins; the detectors give it
those bins from every path (a categorical feature's categories; a numeric feature's Evidently bins from raw values,
from the window state's fine bins, or from the batch summaries), so `value` is all such a statistic writes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from driftline.baseline import NumericProfile
from driftline.detectors.stats import two_sample
from driftline.vocabulary import CATEGORICAL, NUMERIC

if TYPE_CHECKING:
    from driftline.baseline import Profile
    from driftline.window_state import FeatureWindow

__all__ = ["BinnedStatistic", "Statistic", "ROLES", "NOISE_REMOVALS"]

# significance: a p-value in the Benjamini-Hochberg family; effect: a size that can clear its floor (the rule's
# part 3); reported: flagged against its threshold beside the verdict, never deciding it.
ROLES = ("significance", "effect", "reported")
# how a measured level of pure sampling noise is taken off a distance before it meets a fixed floor
NOISE_REMOVALS = ("subtract", "quadrature")


class Statistic:
    """One drift statistic (module docstring). Subclass, set the class attributes, implement the measures."""

    key: ClassVar[str]
    kinds: ClassVar[frozenset[str]] = frozenset({NUMERIC, CATEGORICAL})
    role: ClassVar[Literal["significance", "effect", "reported"]] = "effect"
    # the default floor; None: off until ``[drift] KEY = T`` (or ``[drift.features.F] KEY = T``) sets one
    threshold: ClassVar[float | None] = None
    why: ClassVar[str] = ""  # the default threshold's reason, one sentence (docs/configuration.md shows it)
    noise: ClassVar[Literal["subtract", "quadrature"]] = "subtract"
    # the field a test's number sits in: "value" for distances, "statistic" beside "p_value" for tests
    field: ClassVar[str] = "value"
    # its floor comes from the reference's chunk-to-chunk spread under ``[drift] thresholds = "reference"``
    # (`driftline.detectors.thresholds.reference`); otherwise its configured floor holds there too
    derived: ClassVar[bool] = False
    # measured by the detectors' own pass over a feature (`two_sample.numeric_statistics_sorted`,
    # `binned.numeric_tests`, `binned.category_tests`), not through the registry's shared bins
    dedicated: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """How alert text names it (its key: the name the reasons and /metrics use too)."""
        return self.key

    @property
    def toml_key(self) -> str:
        """Its key under ``[drift]`` and ``[drift.features.F]`` (a significance test's level is ``alpha``)."""
        return "alpha" if self.role == "significance" else self.key

    @property
    def optional(self) -> bool:
        """Whether it is off until configured (no default threshold)."""
        return self.threshold is None and self.role != "significance"

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        """Its value from two raw arrays of one feature (nulls and non-finite values dropped)."""
        raise NotImplementedError

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        """Its value from a baseline profile and a window's mergeable state."""
        raise NotImplementedError

    def beyond_noise(self, value: float, noise: float) -> float:
        """Its size beyond a level `noise` of pure sampling noise (the ``noise`` rule)."""
        if self.noise == "quadrature":  # the square is additive: a drift's divergence plus the noise's
            return float(np.sqrt(max(value * value - noise * noise, 0.0)))
        return value - noise


class BinnedStatistic(Statistic):
    """A statistic of two distributions on shared bins: implement `rows`; every measuring path bins for it."""

    def rows(self, reference_counts: np.ndarray, current_counts: np.ndarray) -> np.ndarray:
        """The statistic of each row pair of two 2-D arrays of counts on the same bins (each row with a count):
        vectorised, so the sampling noise over many drawn pairs costs one call."""
        raise NotImplementedError

    def value(self, reference_counts: Any, current_counts: Any) -> float:
        """The statistic of two count vectors on the same bins; 0.0 when either side is empty."""
        reference = np.asarray(reference_counts, dtype=np.float64).ravel()
        current = np.asarray(current_counts, dtype=np.float64).ravel()
        if reference.shape != current.shape:
            raise ValueError(f"{self.key} needs counts on the same bins")
        if reference.sum() <= 0 or current.sum() <= 0:
            return 0.0
        return float(self.rows(reference[np.newaxis], current[np.newaxis])[0])

    def from_samples(self, reference: Any, current: Any, kind: str) -> float:
        if kind == CATEGORICAL:
            _, reference_counts, current_counts = two_sample.category_counts(reference, current)
            return self.value(reference_counts, current_counts)
        reference_sorted = np.sort(two_sample.clean_numeric(reference))
        current_sorted = np.sort(two_sample.clean_numeric(current))
        if reference_sorted.size == 0 or current_sorted.size == 0:
            return 0.0
        return self.value(*two_sample.shared_bins_sorted(reference_sorted, current_sorted))

    def from_window(self, profile: "Profile", window: "FeatureWindow") -> float:
        from driftline.detectors.stats import binned  # binned reads the registry, which imports the statistics

        if isinstance(profile, NumericProfile):
            shared = binned.shared_bins_binned(profile, window)
            return 0.0 if shared is None else self.value(*shared)
        _, reference_counts, current_counts = binned.category_counts(profile, window)
        return self.value(reference_counts, current_counts)
