"""The model's own decisions in a window: rows decided, and decided positive, per equal-width score bin.

Events may carry ``predicted_class`` (the model's decision beside its score; `driftline.baseline.decisions`).
CBPE then expects the confusion matrix of those decisions, not of a 0.5 threshold on the score
(`driftline.detectors.estimation.cbpe`), so a window keeps, per score bin of [0, 1] on the label summary's
`defaults.QUALITY_SCORE_BINS` bins, how many scored rows carried a decision and how many of them were called
positive: two constant-size arrays, added on merge, absent (None on the state) while no event gave one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from driftline import defaults
from driftline.window_state.codec import small_uint

__all__ = ["DecisionCounts", "fold_decisions"]


@dataclass
class DecisionCounts:
    """Scored rows with the model's decision (`rows`) and those it called positive (`called`), per score bin."""

    bins: int = defaults.QUALITY_SCORE_BINS
    rows: np.ndarray = field(default_factory=lambda: np.zeros(defaults.QUALITY_SCORE_BINS, dtype=np.int64))
    called: np.ndarray = field(default_factory=lambda: np.zeros(defaults.QUALITY_SCORE_BINS, dtype=np.int64))

    def add(self, scores: np.ndarray, decisions: np.ndarray) -> None:
        """Count the rows with a finite score in [0, 1] and a decision (1.0 / 0.0; NaN: none)."""
        keep = np.isfinite(scores) & ~np.isnan(decisions) & (scores >= 0.0) & (scores <= 1.0)
        if not keep.any():
            return
        index = np.minimum((scores[keep] * self.bins).astype(np.intp), self.bins - 1)
        self.rows += np.bincount(index, minlength=self.bins)
        self.called += np.bincount(index[decisions[keep] == 1.0], minlength=self.bins)

    def merged(self, other: "DecisionCounts | None") -> "DecisionCounts":
        if other is None:
            return DecisionCounts(self.bins, self.rows.copy(), self.called.copy())
        return DecisionCounts(self.bins, self.rows + other.rows, self.called + other.called)

    def pack(self) -> dict[str, Any]:
        filled = np.flatnonzero(self.rows)
        return {"bins": self.bins, "index": filled.astype(np.uint16), "rows": small_uint(self.rows[filled]),
                "called": small_uint(self.called[filled])}

    @classmethod
    def unpack(cls, data: Mapping[str, Any] | None) -> "DecisionCounts | None":
        if not isinstance(data, Mapping):
            return None
        bins = int(data["bins"])
        out = cls(bins, np.zeros(bins, dtype=np.int64), np.zeros(bins, dtype=np.int64))
        index = np.asarray(data["index"], dtype=np.intp)
        if index.size and index.max() >= bins:
            raise ValueError("decision counts do not match their score bins")
        out.rows[index] = np.asarray(data["rows"], dtype=np.int64)
        out.called[index] = np.asarray(data["called"], dtype=np.int64)
        return out


def fold_decisions(held: DecisionCounts | None, scores: np.ndarray,
                   decisions: np.ndarray | None) -> DecisionCounts | None:
    """`held` with the rows of `scores` (float64; not numbers: nothing counted) and their `decisions` added."""
    if decisions is None or scores.dtype != np.float64 or np.isnan(decisions).all():
        return held
    out = held if held is not None else DecisionCounts()
    out.add(scores, decisions)
    return out
