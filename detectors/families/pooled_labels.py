"""The labels of earlier windows that model quality may pool with a window short of labels, pure.

Labels often arrive late and few: a window with fewer than ``quality_pool_min_labels`` joined labels
(`WindowThresholds.quality_pool_min_labels`) is judged on its own labels merged with those of the windows
just before it (the same model version), newest first, until the pool holds that many or the earlier
windows run out. The caller reads those windows (at most ``quality_pool_max_windows`` back); this module
only merges them.

>>> from driftline.baseline import LabelSummary
>>> earlier = LabelSummary().add([0.9, 0.2], [1, 0])
>>> pooled, windows = PooledLabels(((0, earlier),)).pool(LabelSummary().add([0.7], [1]), min_labels=3)
>>> (pooled.n, windows)
(3, 1)
"""
from __future__ import annotations

from dataclasses import dataclass

from driftline.baseline import LabelSummary

__all__ = ["PooledLabels", "pooling_wanted"]


def pooling_wanted(labels: LabelSummary, min_labels: int) -> bool:
    """Whether a window with `labels` pools earlier windows' labels: it has some, but fewer than `min_labels`."""
    return 0 < labels.n < min_labels


@dataclass(frozen=True)
class PooledLabels:
    """The label summaries of the windows before the one judged: (window start ms, one partial state's labels),
    newest window first (a window written by several collectors has one entry per partial state)."""

    parts: tuple[tuple[int, LabelSummary], ...] = ()

    def pool(self, labels: LabelSummary, min_labels: int) -> tuple[LabelSummary, int]:
        """`labels` merged with the earlier windows', newest first, until at least `min_labels`; returns
        (the pooled labels, the number of earlier windows added). A window is taken whole (all its parts);
        parts without labels or of another task (regression vs binary) are left out. `labels` is not changed."""
        pooled, seen = labels.copy(), set()
        for start, part in self.parts:
            if pooled.n >= min_labels and start not in seen:
                break
            if part.n and part.task == pooled.task:
                pooled = pooled.merge(part)
                seen.add(start)
        return pooled, len(seen)
