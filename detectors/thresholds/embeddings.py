"""`EmbeddingThresholds`: the alarm level of embedding drift and its window bounds (the `[embedding_drift]` table)."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field

from driftline import defaults
from driftline.toml_sections import Table

__all__ = ["EmbeddingThresholds"]


class EmbeddingThresholds(Table):
    """Defaults: `driftline.embedding_defaults` (re-exported by `driftline.defaults`)."""

    WHERE = "[embedding_drift]"

    alpha: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = defaults.EMBEDDING_ALPHA
    min_rows: Annotated[int, Field(ge=2)] = defaults.EMBEDDING_MIN_ROWS
    drifted_components_share: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = \
        defaults.EMBEDDING_DRIFTED_COMPONENTS_SHARE
    top_clusters: Annotated[int, Field(ge=0)] = defaults.EMBEDDING_TOP_CLUSTERS
    classifier_auc: Annotated[float, Field(ge=0.5, lt=1, allow_inf_nan=False)] = defaults.EMBEDDING_CLASSIFIER_AUC_MIN
    classifier_z: Annotated[float, Field(ge=0, allow_inf_nan=False)] = defaults.EMBEDDING_CLASSIFIER_Z

    @property
    def test_level(self) -> float:
        """Each of the five tests' level: the family's alpha split evenly (Bonferroni). The domain classifier's
        share is kept by its threshold (`classifier_z`), whose rate is measured (detectors/families/embedding_drift.py)."""
        return self.alpha / 5.0
