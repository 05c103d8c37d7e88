"""`detect --embedding`'s half of embedding drift: each window's vectors folded and judged as the service does.

The reference is fitted once (`driftline.embeddings.reference.fit_reference`); each window's rows are
folded into an `EmbeddingWindow` (the collector's summary) and judged by
`driftline.detectors.families.embedding_drift.judge_embedding`, so a file and a stream give one verdict.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from driftline.detectors.families.embedding_drift import judge_embedding
from driftline.detectors.families.results import json_safe
from driftline.detectors.thresholds.embeddings import EmbeddingThresholds
from driftline.embeddings.reference import EmbeddingReference, fit_reference
from driftline.embeddings.window import EmbeddingWindow
from driftline.errors import UserError

__all__ = ["BatchEmbeddings"]


class BatchEmbeddings:
    """Per embedding name: the fitted reference and the current file's vectors (rows in file order)."""

    def __init__(self, reference: Mapping[str, np.ndarray], current: Mapping[str, np.ndarray],
                 ids: np.ndarray | None = None, thresholds: EmbeddingThresholds | None = None, seed: int = 0):
        self.references: dict[str, EmbeddingReference] = {name: fit_reference(matrix, name, seed=seed)
                                                          for name, matrix in reference.items()}
        for name, matrix in current.items():
            if matrix.shape[1] != self.references[name].dimension:
                raise UserError(f"embedding {name!r}: {matrix.shape[1]} dimensions in the current data, "
                                 f"{self.references[name].dimension} in the reference")
        self.current = dict(current)
        self.ids = ids
        self.thresholds = thresholds or EmbeddingThresholds()

    def window(self, positions: np.ndarray) -> dict[str, Any]:
        """The window's ``embeddings`` object: name -> verdict (`judge_embedding`)."""
        out = {}
        for name, reference in self.references.items():
            summary = EmbeddingWindow(reference.dimension, reference)
            summary.add(self.current[name][positions], reference, None if self.ids is None else self.ids[positions])
            out[name] = json_safe(judge_embedding(reference, summary, self.thresholds))
        return out
