"""`detect --embedding`'s half of embedding drift: each window's vectors folded and judged as the service does.

The reference is fitted once (`driftline.embeddings.reference.fit_reference`); each window's rows are
folded into an `EmbeddingWindow` (the collector's summary) and judged by
`driftline.detectors.families.embedding_drift.judge_embedding`, so a file and a stream give one verdict.
`BatchEmbeddings` holds both tables' vectors (the in-memory path); `StreamedEmbeddings` reads them chunk by
chunk (the bounded-memory path): the reference's vectors are gathered for the fit, which needs them all, and
each window's are folded piece by piece as its rows are read, so a window costs its summary's size.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from driftline.detectors.families.embedding_drift import judge_embedding
from driftline.detectors.families.results import json_safe
from driftline.detectors.thresholds.embeddings import EmbeddingThresholds
from driftline.embeddings.reference import EmbeddingReference, fit_reference
from driftline.embeddings.columns import embedding_columns, read_embedding
from driftline.embeddings.window import EmbeddingWindow
from driftline.errors import UserError

__all__ = ["BatchEmbeddings", "StreamedEmbeddings"]


def _dimension_error(name: str, current: int, reference: int) -> UserError:
    return UserError(f"embedding {name!r}: {current} dimensions in the current data, {reference} in the reference")


class BatchEmbeddings:
    """Per embedding name: the fitted reference and the current file's vectors (rows in file order)."""

    def __init__(self, reference: Mapping[str, np.ndarray], current: Mapping[str, np.ndarray],
                 ids: np.ndarray | None = None, thresholds: EmbeddingThresholds | None = None, seed: int = 0):
        self.references: dict[str, EmbeddingReference] = {name: fit_reference(matrix, name, seed=seed)
                                                          for name, matrix in reference.items()}
        for name, matrix in current.items():
            if matrix.shape[1] != self.references[name].dimension:
                raise _dimension_error(name, matrix.shape[1], self.references[name].dimension)
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


class StreamedEmbeddings:
    """Per embedding name (`specs`: name -> list column or column prefix): the reference fitted from the
    reference's chunks (`fit`), and each window's summaries (`open`, `fold` its pieces, `judge`)."""

    def __init__(self, specs: Mapping[str, str], thresholds: EmbeddingThresholds | None = None, seed: int = 0):
        self.specs = dict(specs)
        self.thresholds = thresholds or EmbeddingThresholds()
        self.seed = seed
        self.references: dict[str, EmbeddingReference] = {}

    def columns(self, *heads: pd.DataFrame) -> list[str]:
        """The columns the vectors occupy in the tables whose first rows are `heads` (not compared as features)."""
        found = [c for head in heads for column in self.specs.values() for c in embedding_columns(head, column)]
        return list(dict.fromkeys(found))

    def fit(self, chunks: Iterable[pd.DataFrame]) -> None:
        """Fit each reference from the reference table's vectors, chunk by chunk, as the in-memory path fits them."""
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self.specs}
        for chunk in chunks:
            if len(chunk):
                for name, column in self.specs.items():
                    parts[name].append(read_embedding(chunk, name, column)[0])
        for name, matrices in parts.items():
            dimensions = {m.shape[1] for m in matrices}
            if len(dimensions) > 1:
                raise UserError(f"embedding {name!r}: every row needs a vector of one length "
                                f"(found lengths {sorted(dimensions)[:5]})")
            self.references[name] = fit_reference(np.vstack(matrices), name, seed=self.seed)

    def open(self) -> dict[str, EmbeddingWindow]:
        """A window's empty summaries."""
        return {name: EmbeddingWindow(reference.dimension, reference) for name, reference in self.references.items()}

    def fold(self, windows: Mapping[str, EmbeddingWindow], piece: pd.DataFrame) -> None:
        """Fold a piece of the window's rows (in file order) into its summaries."""
        if not len(piece):
            return
        for name, column in self.specs.items():
            matrix = read_embedding(piece, name, column)[0]
            reference = self.references[name]
            if matrix.shape[1] != reference.dimension:
                raise _dimension_error(name, matrix.shape[1], reference.dimension)
            windows[name].add(matrix, reference)

    def judge(self, windows: Mapping[str, EmbeddingWindow]) -> dict[str, Any]:
        """The window's ``embeddings`` object, as `BatchEmbeddings.window` gives it."""
        return {name: json_safe(judge_embedding(self.references[name], windows[name], self.thresholds))
                for name in self.references}
