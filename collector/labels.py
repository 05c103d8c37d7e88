"""Labels joined with predictions by request id, and where their counts are kept.

A valid inference event with a request id leaves a *prediction* row (model, version,
event time, window, prediction) for `defaults.COLLECTOR_PREDICTION_RETENTION_DAYS`.
A label (topic ``driftline.labels``) is joined with it, whichever arrives first:

* label after prediction (the usual case): the label's flush finds the prediction;
* label before prediction: the label is stored unjoined, and the prediction's flush
  finds it;
* both committed at the same moment by two collectors (neither saw the other): the
  periodic sweep (`defaults.COLLECTOR_LABEL_SWEEP_SECONDS`) joins them.

A join claims the prediction (``labelled_at_ms``) and the label (``joined``) under row
locks in the flush transaction, so a pair is counted once whatever the interleaving.

Where the pair is counted: ``(prediction, label)`` is folded (`WindowState.add_labels`)
into the *prediction's* window, in a window-state row owned by the partition that
brought the second half of the pair. Rows of ``driftline.inference`` partition *p* have
``partition = p``; rows of ``driftline.labels`` partition *q* have
``partition = -1 - q`` (`label_row_partition`), so the two topics' partition numbers never
collide, every row has exactly one owner, and the detectors merge all rows of a window
as usual. Label-only rows have ``events = 0``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from driftline.window_state import WindowState

log = logging.getLogger(__name__)

RowKey = tuple[str, str, int, int]  # (model, version, window_start_ms, row partition)


def label_row_partition(label_partition: int) -> int:
    """The window-state row partition of labels read from `driftline.labels` partition `label_partition`."""
    return -1 - label_partition


@dataclass(slots=True)
class PredictionRow:
    request_id: str
    model: str
    version: str
    ts_ms: int
    window_start_ms: int
    prediction: Any


@dataclass(slots=True)
class LabelRow:
    request_id: str
    model: str
    label: Any
    ts_ms: int


@dataclass
class LabelPairs:
    """Joined (prediction, label) pairs per window-state row, folded in when the row is written."""

    pairs: dict[RowKey, tuple[list[Any], list[Any]]] = field(default_factory=dict)

    def add(self, key: RowKey, prediction: Any, label: Any) -> None:
        predictions, labels = self.pairs.setdefault(key, ([], []))
        predictions.append(prediction)
        labels.append(label)

    def __len__(self) -> int:
        return sum(len(p) for p, _ in self.pairs.values())


def fold_pairs(state: WindowState, predictions: list[Any], labels: list[Any]) -> int:
    """Fold joined pairs into `state`; returns how many pairs it could not count.

    The label summary's task is fixed by the first pairs a window sees (or its
    baseline); a pair that does not fit it (a class name in a binary window, say)
    cannot be counted. It is rejected alone, logged and reported, never silently.
    """
    try:
        state.add_labels(predictions, labels)
        return 0
    except (ValueError, TypeError):
        pass
    rejected = 0
    for prediction, label in zip(predictions, labels):
        try:
            state.add_labels([prediction], [label])
        except (ValueError, TypeError) as exc:
            rejected += 1
            log.warning("label %r for prediction %r does not fit the window's %s quality summary: %s",
                        label, prediction, state.labels.task, exc)
    return rejected
