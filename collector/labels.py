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

Segments: with ``[segments]`` columns, each prediction row also keeps the event's value key
per column (``segments``, the keys its window state folded it under), and a joined pair is
counted in those segments of the row it is folded into, so model quality is judged per
segment. A prediction stored without them (before ``[segments]`` was set) counts for the
whole window only.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Sequence

import numpy as np
import orjson
import pandas as pd

from driftline.collector.dead_letters import DeadLetterRow
from driftline.window_state import EventBatch, WindowState
from driftline.window_state.segments import column_keys
from driftline.windows import WindowKey

log = logging.getLogger(__name__)

RowKey = tuple[WindowKey, int]  # a window-state row: its window and its row partition
# A prediction or label is keyed by its model and request id: two models may score the same
# business id, and a request id chosen by one client never reaches another model's rows.
RequestKey = tuple[str, str]  # (model, request id)


def label_row_partition(label_partition: int) -> int:
    """The window-state row partition of labels read from `driftline.labels` partition `label_partition`."""
    return -1 - label_partition


# A row of the predictions table as it is inserted: request id, model, version, event time,
# window start, the prediction as JSON text, its segment values as JSON text (None: no [segments]).
PredictionValues = tuple[str, str, str, int, int, str, "str | None"]


@dataclass(slots=True)
class PredictionRow:
    request_id: str
    model: str
    version: str
    ts_ms: int
    window_start_ms: int
    prediction: Any
    segments: dict[str, str] | None = None  # segment column -> the event's value key

    def values(self) -> PredictionValues:
        return (self.request_id, self.model, self.version, self.ts_ms, self.window_start_ms,
                orjson.dumps(self.prediction).decode(),
                None if self.segments is None else orjson.dumps(self.segments).decode())

    @property
    def key(self) -> RequestKey:
        return self.model, self.request_id

    def same_event(self, other: "PredictionRow") -> bool:
        """The same prediction (an event read again), not a second event re-using the request id."""
        return (self.version, self.ts_ms, self.prediction) == (other.version, other.ts_ms, other.prediction)

    @classmethod
    def from_values(cls, values: PredictionValues) -> "PredictionRow":
        return cls(values[0], values[1], values[2], values[3], values[4], orjson.loads(values[5]),
                   None if values[6] is None else orjson.loads(values[6]))


def segment_texts(batch: EventBatch, columns: Sequence[str]) -> list[str] | None:
    """Each event's segment value keys as JSON text ({column: key}), the form its prediction row keeps.

    Keys are the window state's (`column_keys`: bounded, nulls one key); one text per distinct
    combination is encoded, not one per event. None without segment columns.
    """
    if not columns or batch.n == 0:
        return None
    out: np.ndarray | None = None
    for column in columns:
        codes, distinct = pd.factorize(column_keys(batch, column))
        part = np.array([orjson.dumps(column).decode() + ":" + orjson.dumps(str(key)).decode() for key in distinct],
                        dtype=object)[codes]
        out = part if out is None else out + "," + part
    return ("{" + out + "}").tolist()


def prediction_values(model: str, version: str, request_ids: Sequence[str | None], times_ms: Sequence[int],
                      predictions: Sequence[Any], window_ms: int,
                      segments: Sequence[str] | None = None) -> list[PredictionValues]:
    """The prediction rows of one model version's events (those with a request id and a prediction).

    In bulk, because a decoder makes one for every event: the predictions are written as
    one JSON array and split at its commas when they are all numbers, booleans or nulls
    (no comma inside one of those); the rows are zipped, not built one by one. `segments`:
    each event's `segment_texts` (None: no [segments]).
    """
    text = orjson.dumps(list(predictions)).decode()
    if predictions and '"' not in text and "{" not in text and text.count("[") == 1:
        texts = text[1:-1].split(",")
    else:
        texts = [orjson.dumps(p).decode() for p in predictions]
    starts = [t - t % window_ms for t in times_ms]
    rows = list(zip(request_ids, repeat(model), repeat(version), times_ms, starts, texts,
                    repeat(None) if segments is None else segments))
    if None in request_ids or None in predictions:
        rows = [row for row, p in zip(rows, predictions) if row[0] is not None and p is not None]
    return rows


@dataclass(slots=True)
class LabelRow:
    request_id: str
    model: str
    label: Any
    ts_ms: int

    @property
    def key(self) -> RequestKey:
        return self.model, self.request_id


@dataclass(frozen=True)
class StoredAhead:
    """What storing predictions ahead of the flush found: the keys whose label waits, the rows refused."""

    waiting: set[RequestKey]
    taken: list[PredictionValues]


def refused_prediction(topic: str, partition: int, row: PredictionRow) -> DeadLetterRow:
    """The dead letter of a prediction whose (model, request id) an earlier event holds: first writer wins."""
    reason = (f"request_id is already used by an earlier event of model {row.model!r} with another prediction; "
              "the first event's prediction is kept for the label join (this event still counts in its window)")
    raw = orjson.dumps({"request_id": row.request_id, "model": row.model, "version": row.version, "ts_ms": row.ts_ms,
                        "prediction": row.prediction})
    return DeadLetterRow(topic, partition, -1, reason, "request_id", row.model, raw, to_topic=False)


def refused_label(topic: str, partition: int, row: LabelRow) -> DeadLetterRow:
    """The dead letter of a label whose (model, request id) holds another label already: the first stays."""
    reason = f"request_id already has another label for model {row.model!r}; the first label is kept"
    raw = orjson.dumps({"request_id": row.request_id, "model": row.model, "label": row.label, "ts_ms": row.ts_ms})
    return DeadLetterRow(topic, partition, -1, reason, "request_id", row.model, raw, to_topic=False)


def keep_first(rows: dict[RequestKey, PredictionRow], row: PredictionRow, letters: list[DeadLetterRow],
               topic: str, partition: int) -> None:
    """Add `row` unless its key is held: by the same event (read again: dropped), or by another (refused: a letter)."""
    first = rows.setdefault(row.key, row)
    if first is not row and not first.same_event(row):
        letters.append(refused_prediction(topic, partition, row))


@dataclass
class LabelPairs:
    """Joined (prediction, label) pairs per window-state row, folded in when the row is written, with
    each prediction's segment values (None: kept none)."""

    window_ms: int
    pairs: dict[RowKey, tuple[list[Any], list[Any], list[Any]]] = field(default_factory=dict)

    def row(self, model: str, version: str, window_start_ms: int, row_partition: int) -> RowKey:
        """The row a prediction of the window starting at `window_start_ms` is folded into."""
        return (WindowKey.starting(model, version, window_start_ms, self.window_ms), row_partition)

    def add(self, key: RowKey, prediction: Any, label: Any, segments: dict[str, str] | None = None) -> None:
        predictions, labels, kept = self.pairs.setdefault(key, ([], [], []))
        predictions.append(prediction)
        labels.append(label)
        kept.append(segments)

    def __len__(self) -> int:
        return sum(len(p) for p, _, _ in self.pairs.values())


def fold_pairs(state: WindowState, predictions: list[Any], labels: list[Any],
               segments: list[Any] | None = None) -> int:
    """Fold joined pairs into `state` (and its segments); returns how many pairs it could not count.

    The label summary's task is fixed by the first pairs a window sees (or its
    baseline); a pair that does not fit it (a class name in a binary window, say)
    cannot be counted. It is rejected alone, logged and reported, never silently.
    """
    try:
        state.add_labels(predictions, labels, segments)
        return 0
    except (ValueError, TypeError):
        pass
    rejected = 0
    for i, (prediction, label) in enumerate(zip(predictions, labels)):
        try:
            state.add_labels([prediction], [label], None if segments is None else segments[i:i + 1])
        except (ValueError, TypeError) as exc:
            rejected += 1
            log.warning("label %r for prediction %r does not fit the window's %s quality summary: %s",
                        label, prediction, state.labels.task, exc)
    return rejected
