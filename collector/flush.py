"""One flush: everything a set of partitions consumed since the last flush, in ONE transaction.

The transaction, in this order:

1. **offsets** of every partition that moved, from the offset the collector expects to
   the next one (`store.advance_offset`). A partition whose stored offset is not where
   this collector left it belongs to another collector now: the whole transaction is
   rolled back and `Fenced` names the partitions (their pending data is dropped, the
   new owner reads it again from the stored offsets);
2. **predictions** (for the label join), and the labels that waited for them; predictions a
   folder already stored (idempotent inserts ahead of the flush, see
   `driftline.collector.folding`) come as a count, with the request ids whose label was waiting
   when they were stored (`labels_waiting`), which are joined here;
3. **labels**, joined with stored predictions, or stored to wait for them;
4. the **label sweep** when due (`driftline.collector.labels`);
5. **dead letters** (already acknowledged on the DLQ topic before the transaction);
6. **watermarks** of the inference partitions: the largest event time stored and the reader's
   idleness (`store.write_watermark`, driftline.watermarks), so the scheduler never closes a window
   on events that are not stored yet;
7. **window states**: each (model, version, window, partition) row is read, merged
   with the partial state and any label pairs, and written back, with its event and
   late-event counts. A row whose merged state cannot be encoded (`WindowStateError`: the
   folder's checks make this a bug, not bad input) is left as it was and its partial becomes
   a dead letter naming the window, so one window never holds back every partition's flush.

So a crash (SIGKILL) before the commit leaves no trace and the events are read again
from the stored offsets; after it, everything is there and the offsets are past it.
Nothing is ever counted twice, nothing is lost.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy import Engine

from driftline.collector import store
from driftline.collector.dead_letters import DeadLetterRow
from driftline.collector.labels import (LabelPairs, LabelRow, PredictionRow, RequestKey, RowKey, refused_label,
                                        refused_prediction)
from driftline.collector.store import StoredOffset
from driftline.collector.windows import PartialWindow
from driftline import defaults
from driftline.baseline import Baseline
from driftline.segments import SegmentSpec
from driftline.windows import WindowKey
from driftline.window_state import WindowStateError

# Pairs joined by one sweep at most: the sweep runs inside a flush and must stay short.
SWEEP_LIMIT = 10_000


class Fenced(Exception):
    """The stored offsets of these (topic, partition)s moved under us: another collector owns them."""

    def __init__(self, partitions: list[tuple[str, int]]):
        super().__init__(f"partitions owned by another collector now: {partitions}")
        self.partitions = partitions


@dataclass
class PartitionFlush:
    """What one partition brings to a flush."""

    topic: str
    partition: int
    row_partition: int  # its window-state rows (driftline.collector.labels.label_row_partition for labels)
    expected: StoredOffset | None  # the stored offset as this collector last saw it
    next_offset: int
    topic_id: str | None
    windows: dict[WindowKey, PartialWindow] = field(default_factory=dict)
    dead_letters: list[DeadLetterRow] = field(default_factory=list)
    predictions: dict[RequestKey, PredictionRow] = field(default_factory=dict)
    labels: dict[RequestKey, LabelRow] = field(default_factory=dict)
    stored_predictions: int = 0  # predictions a folder stored ahead of the flush
    labels_waiting: set[RequestKey] = field(default_factory=set)  # ... whose label was waiting when they were stored
    # the partition's watermark (driftline.watermarks): the largest event time this flush stores, and since
    # when its reader has been at the end of the log (epoch ms; None: records are flowing); inference only
    event_time_ms: int | None = None
    idle_since_ms: int | None = None
    watermark: bool = False  # whether this partition's watermark row is written (the inference topic's)

    @property
    def moves(self) -> bool:
        return self.expected is None or self.expected != StoredOffset(self.next_offset, self.topic_id)


@dataclass
class FlushResult:
    partitions: int = 0
    rows: int = 0
    events: int = 0
    late_events: int = 0
    dead_letters: int = 0
    predictions: int = 0
    labels: int = 0
    labels_joined: int = 0
    labels_rejected: int = 0
    # predictions and labels refused here (dead letters): their (model, request id) is held by another event
    refused: list[DeadLetterRow] = field(default_factory=list)


@dataclass(frozen=True)
class FlushSetup:
    """Where and how one collector's flushes write: the store, its consumer group, the window length, the
    baselines that bin window states, the bound on a dead letter's stored bytes, and the [segments] columns a
    row made for labels alone keeps sub-states for."""

    engine: Engine
    group_id: str
    window_ms: int
    baseline_for: Callable[[str, str], Baseline | None]
    raw_bound: int = defaults.COLLECTOR_DEAD_LETTER_RAW_BYTES
    segments: SegmentSpec = SegmentSpec()


def flush(setup: FlushSetup, parts: list[PartitionFlush], *, now_ms: int, sweep: bool = False) -> FlushResult:
    """Write `parts` in one transaction (module docstring). Raises `Fenced`, or the database's error."""
    engine, group_id, window_ms = setup.engine, setup.group_id, setup.window_ms
    baseline_for, raw_bound, segments = setup.baseline_for, setup.raw_bound, setup.segments
    result = FlushResult()
    parts = [p for p in parts if p.moves]
    if not parts:
        return result
    with engine.begin() as conn:
        fenced = [(p.topic, p.partition) for p in parts
                  if not store.advance_offset(conn, group_id, p.topic, p.partition, p.expected, p.next_offset,
                                              p.topic_id)]
        if fenced:
            raise Fenced(fenced)
        pairs = LabelPairs(window_ms)
        refused: list[DeadLetterRow] = []  # rows of a second event re-using a request id (first writer wins)
        _predictions(conn, parts, pairs, now_ms, result, refused)
        _labels(conn, parts, pairs, now_ms, result, refused)
        if sweep:
            _sweep(conn, parts, pairs, now_ms, result)

        letters = [letter.store_values(raw_bound) for p in parts for letter in p.dead_letters]
        letters += [letter.store_values(raw_bound) for letter in refused]
        store.insert_dead_letters(conn, letters)
        result.dead_letters = len(letters)
        result.refused = refused

        # in the transaction that stores the events: a watermark never runs ahead of what is stored
        for p in parts:
            if p.watermark:
                store.write_watermark(conn, group_id, p.topic, p.partition, p.event_time_ms, p.idle_since_ms)

        # Rows in a fixed order, so two collectors never lock rows in opposite orders.
        rows: dict[RowKey, PartialWindow | None] = {}
        sources: dict[RowKey, PartitionFlush] = {}
        for p in parts:
            for window, partial in p.windows.items():
                rows[(window, p.row_partition)] = partial
                sources[(window, p.row_partition)] = p
        for key in pairs.pairs:
            rows.setdefault(key, None)
        for key in sorted(rows):
            window, row_partition = key
            partial = rows[key]
            try:
                result.labels_rejected += store.merge_window_row(
                    conn, window, row_partition, partial, baseline_for(window.model, window.version),
                    pairs.pairs.get(key), segments)
            except WindowStateError as exc:  # raised before the row is written: the transaction goes on
                letter = _unencodable_window(sources.get(key) or parts[0], window, partial, exc)
                store.insert_dead_letters(conn, [letter.store_values(raw_bound)])
                result.dead_letters += 1
                continue
            if partial:
                result.events += partial.events
                result.late_events += partial.late_events
        result.rows = len(rows)
        result.partitions = len(parts)
    return result


def _unencodable_window(part: PartitionFlush, window: WindowKey, partial: PartialWindow | None,
                        error: WindowStateError) -> DeadLetterRow:
    events = partial.events if partial else 0
    reason = (f"window {window.window_start_ms} of {window.model}/{window.version}: {events} events of this flush "
              f"not counted, its merged state cannot be encoded ({error})")
    return DeadLetterRow(part.topic, part.partition, max(part.next_offset - 1, 0), reason, None, window.model, b"")


def _first_per_request(parts: list[PartitionFlush], attr: str, letters: list[DeadLetterRow]
                       ) -> tuple[dict[RequestKey, Any], dict[RequestKey, PartitionFlush]]:
    """The first row per (model, request id) across the flushed partitions (`attr`: "predictions" or
    "labels"), and the partition that brought each (its window rows own the pair). A later row of
    another event under a key already held is refused into `letters`."""
    rows: dict[RequestKey, Any] = {}
    owner: dict[RequestKey, PartitionFlush] = {}
    for p in parts:
        for key, row in getattr(p, attr).items():
            first = rows.get(key)
            if first is None:
                rows[key] = row
                owner[key] = p
            elif attr == "predictions" and not first.same_event(row):
                letters.append(refused_prediction(p.topic, p.partition, row))
            elif attr == "labels" and first.label != row.label:
                letters.append(refused_label(p.topic, p.partition, row))
    return rows, owner


def _predictions(conn: Any, parts: list[PartitionFlush], pairs: LabelPairs, now_ms: int,
                 result: FlushResult, letters: list[DeadLetterRow]) -> None:
    predictions, owner = _first_per_request(parts, "predictions", letters)
    stored: dict[RequestKey, int] = {}  # stored ahead, label waiting -> the row partition that owns it
    for p in parts:
        for key in p.labels_waiting:
            if key not in predictions and key not in stored:
                stored[key] = p.row_partition
    result.predictions = len(predictions) + sum(p.stored_predictions for p in parts)
    if not predictions and not stored:
        return
    waiting = store.unjoined_labels(conn, set(predictions) | set(stored))  # locked, so looked up again here
    candidates = {key: waiting[key] for key in predictions if key in waiting}
    taken = store.insert_predictions(conn, [predictions[key].values() for key in sorted(predictions)], candidates,
                                     now_ms)
    refused = {(r[1], r[0]) for r in taken}
    for key in sorted(refused):
        part = owner[key]
        letters.append(refused_prediction(part.topic, part.partition, predictions[key]))
    joined = {}
    for key, label in candidates.items():
        if key not in refused:
            row = predictions[key]
            joined[key] = label
            pairs.add(pairs.row(row.model, row.version, row.window_start_ms, owner[key].row_partition), row.prediction, label,
                      row.segments)
    stored_waiting = sorted(key for key in stored if key in waiting)
    if stored_waiting:
        found = store.unlabelled_predictions(conn, stored_waiting)
        for key in stored_waiting:
            prediction = found.get(key)
            if prediction is not None:
                joined[key] = waiting[key]
                pairs.add(pairs.row(prediction.model, prediction.version, prediction.window_start_ms, stored[key]),
                          prediction.prediction, waiting[key], prediction.segments)
    if joined:
        # The prediction may have been stored before (the same event read again): label that row too.
        store.mark_predictions_labelled(conn, joined, now_ms)
        store.mark_labels_joined(conn, sorted(joined))
    result.labels_joined += len(joined)


def _labels(conn: Any, parts: list[PartitionFlush], pairs: LabelPairs, now_ms: int, result: FlushResult,
            letters: list[DeadLetterRow]) -> None:
    labels, owner = _first_per_request(parts, "labels", letters)
    if not labels:
        return
    keys = sorted(labels)
    found = store.unlabelled_predictions(conn, keys)
    refused = {(r[1], r[0]) for r in store.insert_labels(
        conn, [(label.request_id, label.model, label.label, label.ts_ms, key in found)
               for key, label in ((key, labels[key]) for key in keys)])}
    joined: dict[RequestKey, Any] = {}
    for key in keys:
        label, prediction = labels[key], found.get(key)
        if key in refused:  # another label holds the key: this one is not stored, nor joined
            letters.append(refused_label(owner[key].topic, owner[key].partition, label))
        elif prediction is not None:
            joined[key] = label.label
            pairs.add(pairs.row(prediction.model, prediction.version, prediction.window_start_ms, owner[key].row_partition),
                      prediction.prediction, label.label, prediction.segments)
    if joined:
        store.mark_predictions_labelled(conn, joined, now_ms)
        # A label stored earlier for the same key (the same label sent again) is joined now too.
        store.mark_labels_joined(conn, sorted(joined))
    result.labels = len(labels)
    result.labels_joined += len(joined)


def _sweep(conn: Any, parts: list[PartitionFlush], pairs: LabelPairs, now_ms: int, result: FlushResult) -> None:
    # The pairs go to a row this flush owns (its offset is fenced in this transaction).
    row_partition = min(p.row_partition for p in parts)
    found = store.unjoined_pairs(conn, SWEEP_LIMIT)
    if not found:
        return
    for r in found:
        pairs.add(pairs.row(r.model, r.version, r.window_start_ms, row_partition), r.prediction, r.label,
                  r.segments)
    store.mark_predictions_labelled(conn, {(r.model, r.request_id): r.label for r in found}, now_ms)
    store.mark_labels_joined(conn, sorted((r.model, r.request_id) for r in found))
    result.labels_joined += len(found)
