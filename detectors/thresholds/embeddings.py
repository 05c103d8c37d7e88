"""`EmbeddingThresholds`: the alarm level of embedding drift and its window bounds (the `[embedding_drift]` table)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from driftline import defaults
from driftline.errors import UserError

__all__ = ["EmbeddingThresholds"]


@dataclass(frozen=True)
class EmbeddingThresholds:
    """Defaults: `driftline.embedding_defaults` (re-exported by `driftline.defaults`)."""

    alpha: float = defaults.EMBEDDING_ALPHA
    min_rows: int = defaults.EMBEDDING_MIN_ROWS
    drifted_components_share: float = defaults.EMBEDDING_DRIFTED_COMPONENTS_SHARE
    top_clusters: int = defaults.EMBEDDING_TOP_CLUSTERS
    classifier_auc: float = defaults.EMBEDDING_CLASSIFIER_AUC_MIN
    classifier_z: float = defaults.EMBEDDING_CLASSIFIER_Z

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha) and 0.0 < self.alpha < 1.0):
            raise UserError(f"[embedding_drift] alpha must be in (0, 1), got {self.alpha}")
        if not (math.isfinite(self.drifted_components_share) and 0.0 < self.drifted_components_share <= 1.0):
            raise UserError(f"[embedding_drift] drifted_components_share must be in (0, 1], "
                            f"got {self.drifted_components_share}")
        if not (math.isfinite(self.classifier_auc) and 0.5 <= self.classifier_auc < 1.0):
            raise UserError(f"[embedding_drift] classifier_auc must be in [0.5, 1), got {self.classifier_auc}")
        if not (math.isfinite(self.classifier_z) and self.classifier_z >= 0.0):
            raise UserError(f"[embedding_drift] classifier_z must not be negative, got {self.classifier_z}")
        if self.min_rows < 2 or self.top_clusters < 0:
            raise UserError("[embedding_drift] min_rows must be at least 2 and top_clusters not negative")

    @property
    def test_level(self) -> float:
        """Each of the five tests' level: the family's alpha split evenly (Bonferroni). The domain classifier's
        share is kept by its threshold (`classifier_z`), whose rate is measured (detectors/families/embedding_drift.py)."""
        return self.alpha / 5.0
