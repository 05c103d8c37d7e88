"""One inference partition's records -> validated, de-duplicated events folded into window states.

`InferenceFolder` is the CPU-heavy part of the collector (decode, validate, window,
fold), kept apart from Kafka and from the store so that it can run in the collector's
process or in a decoder process (`driftline.collector.decoders`) with the same code. What it
accumulates since the last `take()` is a `FoldDelta`; the collector merges deltas
into its partition buffers and flushes those with the offsets.

With a `store_predictions` writer (the collector gives one to every folder, in its own
process or a decoder's) the folder also inserts the predictions for the label join
itself, in batches of `PREDICTION_WRITE_BATCH`, ahead of the collector's flush: those
inserts are idempotent (a request id keeps its first row), so a crash before the flush
only means the same rows are offered again. The writer also says which of them had a
label waiting (labels usually come after their prediction, so these are few); only those
go to the flush, which joins them, with a count of the rest. Rows it could not write
(the store is down) go to the flush as before.

Nothing a record holds may stop the folder: a record that cannot be decoded, is stamped
more than `defaults.COLLECTOR_MAX_FUTURE_SECONDS` ahead of the wall clock, or cannot be
folded into a window state that encodes (a bug, or a value the guards missed) becomes a
dead letter with its reason. Each batch is folded into fresh partial states first and
merged into the partition's only once they are whole and finite; if that fails, the
batch is folded again one event at a time and only the culprits are dead-lettered.

The folder keeps the state that must follow a partition's records in order: the
recently seen event ids (duplicates from a producer's retry are dropped) and the
per-model-version watermarks that decide lateness (`driftline.collector.windows`). After a
failed flush the collector rolls both back with `reset`, because the records are
read again from the stored offset.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from driftline.collector.dead_letters import DeadLetterRow
from driftline.collector.event_columns import InferenceColumns, parse_inference_columns
from driftline.collector.labels import (PredictionRow, PredictionValues, RequestKey, StoredAhead, keep_first,
                                        prediction_values, refused_prediction, segment_texts)
from driftline.collector.windows import PartialWindow, PartitionWindows
from driftline import defaults
from driftline.baseline import Baseline
from driftline.baseline.decisions import with_decisions
from driftline.embeddings.contract import FIELD as EMBEDDINGS, EmbeddingError, check_dimensions
from driftline.events import (FEATURE_AGE_MS, FEATURE_TS, MODEL_CHARS, REQUEST_ID_CHARS, VERSION_CHARS, EventError,
                              InferenceEvent, parse_inference)
from driftline.rollouts import ROLE_SHADOW
from driftline.segments import SegmentSpec
from driftline.windows import WindowKey
from driftline.window_state import EventBatch, WindowStateError
from driftline.window_state.freshness import drop_unserved

# Predictions a folder with a writer inserts at a time: SQLite's cost per row falls with
# the batch, and 10 000 rows (~2 MB) hold the store's write lock for well under a second.
PREDICTION_WRITE_BATCH = 10_000
# After a failed insert, predictions go straight to the flush (which retries with backoff)
# for this long: a store that is down (a PostgreSQL connect timeout is 5 s) must not stall
# folding at every batch.
PREDICTION_WRITE_RETRY_S = 10.0

log = logging.getLogger(__name__)

Watermarks = dict[tuple[str, str], "int | None"]
PartitionKey = tuple[str, int]  # (topic, partition)


def check_store_limits(model: str, version: str | None, request_id: str | None) -> None:
    """Values the store cannot hold (PostgreSQL refuses NUL and over-long strings): dead-lettered
    rather than failing every flush."""
    if len(model) > MODEL_CHARS or "\x00" in model:
        raise EventError(f"must be at most {MODEL_CHARS} characters without NUL (the store's limit)", "model")
    if version is not None and (len(version) > VERSION_CHARS or "\x00" in version):
        raise EventError(f"must be at most {VERSION_CHARS} characters without NUL (the store's limit)",
                         "version")
    if request_id is not None and (len(request_id) > REQUEST_ID_CHARS or "\x00" in request_id):
        raise EventError(f"must be at most {REQUEST_ID_CHARS} characters without NUL (the store's limit)",
                         "request_id")


@dataclass
class FoldDelta:
    """What a partition's folder accumulated since its last `take()`."""

    windows: dict[WindowKey, PartialWindow] = field(default_factory=dict)
    dead_letters: list[DeadLetterRow] = field(default_factory=list)
    predictions: dict[RequestKey, PredictionRow] = field(default_factory=dict)  # for the flush to insert
    watermarks: Watermarks = field(default_factory=dict)  # the partition's watermarks now (all of them)
    stored_predictions: int = 0  # predictions inserted by the folder
    labels_waiting: set[RequestKey] = field(default_factory=set)  # ... whose label was waiting (the flush joins them)
    valid: int = 0
    late: int = 0
    duplicates: int = 0


@dataclass(frozen=True)
class FolderSetup:
    """How a collector folds each inference partition: the window length and allowed lateness, how many event ids
    it remembers for duplicates, how far ahead of its clock an event time may be, the clock, and the [segments]
    columns each window state keeps sub-states for."""

    window_ms: int
    lateness_ms: int
    dedup_limit: int
    max_future_ms: int = defaults.COLLECTOR_MAX_FUTURE_SECONDS * 1000
    clock: Callable[[], float] = time.time
    segments: SegmentSpec = SegmentSpec()


class InferenceFolder:
    """Decode, validate, de-duplicate and fold one inference partition's records.

    `baseline_for(model, version)` bins numeric features (None: counted unbinned);
    `stored_watermark(model, version)` is asked once per model version for the
    partition's watermark as of the stored window rows (None: nothing stored);
    `store_predictions(rows)`, when given, inserts prediction rows (idempotently) and
    returns the keys among them whose label is waiting in the store, and the rows it refused
    (their (model, request id) held by another event's prediction: dead-lettered).
    """

    def __init__(self, topic: str, partition: int, setup: FolderSetup,
                 baseline_for: Callable[[str, str], Baseline | None],
                 stored_watermark: Callable[[str, str], int | None],
                 store_predictions: Callable[[list[PredictionValues]], StoredAhead] | None = None):
        self.topic = topic
        self.segments = segments = setup.segments
        self.max_future_ms = setup.max_future_ms
        self.clock = setup.clock
        self.partition = partition
        self.window_ms = window_ms = setup.window_ms
        lateness_ms = setup.lateness_ms
        self.dedup_limit = setup.dedup_limit
        self.baseline_for = baseline_for
        self.stored_watermark = stored_watermark
        self.store_predictions = store_predictions
        self.stored_predictions = 0
        self.labels_waiting: set[RequestKey] = set()
        self._write_failing = False
        self._write_retry_at = 0.0
        self.windows = PartitionWindows(window_ms, lateness_ms, segments=segments)
        self.dead_letters: list[DeadLetterRow] = []
        self.predictions: dict[RequestKey, PredictionRow] = {}  # for the flush to insert
        self.unwritten: list[PredictionValues] = []  # for `store_predictions` (or, without one, the flush)
        # Hashed event ids in two generations: a full `recent` becomes `older`, so
        # between dedup_limit and 2 x dedup_limit of the latest ids are remembered.
        self.recent_ids: set[int] = set()
        self.older_ids: set[int] = set()
        self.watermarks: Watermarks = {}
        self.valid = self.late = self.duplicates = 0
        self._columns_failed = False

    def process(self, offsets: Sequence[int], values: Sequence[bytes | None]) -> None:
        """Fold records (in partition order); invalid ones become dead letters."""
        max_ts_ms = int(self.clock() * 1000) + self.max_future_ms
        try:
            columns = parse_inference_columns(values, max_ts_ms)
        except Exception:  # a bug there must not stop the collector on the same batch after every restart
            if not self._columns_failed:
                log.exception("the columnar decoder failed; this batch and later ones that fail too are decoded "
                              "one event at a time")
            self._columns_failed = True
            columns = None
        if columns is not None:
            self._process_columns(columns, offsets, values)
        else:
            self._process_events(offsets, values, max_ts_ms)
        if len(self.unwritten) >= PREDICTION_WRITE_BATCH:
            self._write_predictions()

    def _is_duplicate(self, event_id: str) -> bool:
        key = hash(event_id)
        if key in self.recent_ids or key in self.older_ids:
            return True
        self.recent_ids.add(key)
        if len(self.recent_ids) >= self.dedup_limit:
            self.older_ids, self.recent_ids = self.recent_ids, set()
        return False

    def _process_columns(self, columns: InferenceColumns, offsets: Sequence[int],
                         values: Sequence[bytes | None]) -> None:
        """A batch the columnar decoder took whole (every event valid): fold it by model version."""
        keep = self._new_events(columns.event_ids)
        self.duplicates += columns.n - len(keep)
        models, versions = columns.models, columns.versions
        groups: dict[tuple[str, str], list[int]] = {}
        if keep and len(keep) == columns.n and models.count(models[0]) == columns.n \
                and versions.count(versions[0]) == columns.n:
            groups[(models[0], versions[0])] = keep  # the usual poll: one model version, no duplicates
        else:
            for i in keep:
                groups.setdefault((models[i], versions[i]), []).append(i)
        request_ids, times = columns.request_ids, columns.batch.event_time_ms.tolist()
        if ROLE_SHADOW in columns.roles:
            request_ids = [None if role == ROLE_SHADOW else rid for rid, role in zip(request_ids, columns.roles)]
        predictions = columns.predictions
        for (model, version), rows in groups.items():
            if len(rows) == columns.n:
                self._fold(model, version, columns.batch, request_ids, times, predictions, offsets, values)
            else:
                self._fold(model, version, columns.batch.take(rows), [request_ids[i] for i in rows],
                           [times[i] for i in rows], [predictions[i] for i in rows], [offsets[i] for i in rows],
                           [values[i] for i in rows])

    def _new_events(self, event_ids: list[str]) -> list[int]:
        """Positions of the events not seen before (`_is_duplicate` for each, in order, in bulk when it can)."""
        keys = list(map(hash, event_ids))
        if (len(self.recent_ids) + len(keys) < self.dedup_limit and len(set(keys)) == len(keys)
                and self.recent_ids.isdisjoint(keys) and self.older_ids.isdisjoint(keys)):
            self.recent_ids.update(keys)  # no repeat and no generation change inside the batch
            return list(range(len(keys)))
        is_duplicate = self._is_duplicate
        return [i for i, event_id in enumerate(event_ids) if not is_duplicate(event_id)]

    def _fold(self, model: str, version: str, batch: EventBatch, request_ids: Sequence[str | None],
              times_ms: Sequence[int], predictions: Sequence[Any], offsets: Sequence[int],
              values: Sequence[bytes | None]) -> None:
        """Fold one model version's events, and keep their predictions for the label join.

        All or nothing per batch (fresh partial states, merged in once whole and finite); a batch
        that fails is folded again event by event and the events that fail alone are dead-lettered.
        """
        baseline = self.baseline_for(model, version)
        try:
            self._fold_checked(model, version, batch, baseline, request_ids, times_ms, predictions)
            return
        except Exception as exc:  # noqa: BLE001 - whatever it is, it must not stop the partition
            log.warning("a batch of %d events of %s/%s could not be folded (%s: %s); folding it event by event",
                        batch.n, model, version, type(exc).__name__, exc)
        for i in range(batch.n):
            try:
                self._fold_checked(model, version, batch.take([i]), baseline, request_ids[i:i + 1],
                                   times_ms[i:i + 1], predictions[i:i + 1])
            except Exception as exc:  # noqa: BLE001
                error = EventError(f"could not be folded into a window state ({type(exc).__name__}: {exc})")
                self.dead_letters.append(DeadLetterRow.from_error(self.topic, self.partition, offsets[i], values[i],
                                                                  error))

    def _fold_checked(self, model: str, version: str, batch: EventBatch, baseline: Baseline | None,
                      request_ids: Sequence[str | None], times_ms: Sequence[int], predictions: Sequence[Any]) -> None:
        """Fold into fresh partial states, check that they encode, then merge them in (raises, changing nothing)."""
        fresh = PartitionWindows(self.window_ms, self.windows.lateness_ms, segments=self.segments)
        folded = fresh.fold(model, version, batch, baseline, self._watermark(model, version))
        for partial in fresh.windows.values():
            where = partial.state.nonfinite_field()
            if where is not None:
                raise WindowStateError(where)
        if batch.decisions is not None:  # the label join counts the model's own decision beside its score
            predictions = with_decisions(predictions, batch.decisions)
        rows = prediction_values(model, version, request_ids, times_ms, predictions, self.window_ms,
                                 segment_texts(batch, self.segments.columns))
        merge_windows(self.windows.windows, fresh.windows)
        self.watermarks[(model, version)] = folded.watermark_ms
        self.valid += folded.events
        self.late += folded.late_events
        self.unwritten += rows

    def _process_events(self, offsets: Sequence[int], values: Sequence[bytes | None], max_ts_ms: int) -> None:
        """One event at a time: names what is wrong with each invalid record."""
        groups: dict[tuple[str, str], list[tuple[InferenceEvent, int, bytes | None]]] = {}
        letters = self.dead_letters
        is_duplicate = self._is_duplicate
        duplicates = 0
        for offset, value in zip(offsets, values):
            try:
                event = parse_inference(value, max_ts_ms)
                check_store_limits(event.model, event.version, event.request_id)
                if event.raw.get(EMBEDDINGS):
                    self._check_embeddings(event)
                if event.raw.get(FEATURE_AGE_MS) or event.raw.get(FEATURE_TS):
                    drop_unserved(event.raw, event.features)  # held until the poll is folded: only what counts
            except EventError as error:
                letters.append(DeadLetterRow.from_error(self.topic, self.partition, offset, value, error))
                continue
            except Exception as exc:  # noqa: BLE001 - a decoder bug: this record only, never the partition
                error = EventError(f"could not be decoded ({type(exc).__name__}: {exc})")
                letters.append(DeadLetterRow.from_error(self.topic, self.partition, offset, value, error))
                continue
            if is_duplicate(event.event_id):
                duplicates += 1
                continue
            group = groups.get((event.model, event.version))
            if group is None:
                group = groups[(event.model, event.version)] = []
            group.append((event, offset, value))

        for (model, version), rows in groups.items():
            events = [row[0] for row in rows]
            try:
                batch = EventBatch.from_events(events)
            except Exception as exc:  # noqa: BLE001 - fold them one by one: _fold names the culprits
                log.warning("%d events of %s/%s could not be put into columns (%s: %s)", len(events), model, version,
                            type(exc).__name__, exc)
                batch = None
            if batch is None:
                for event, offset, value in rows:
                    self._fold_one(model, version, event, offset, value)
                continue
            self._fold(model, version, batch, [_joined_id(e) for e in events], [e.ts_ms for e in events],
                       [e.prediction for e in events], [row[1] for row in rows], [row[2] for row in rows])
        self.duplicates += duplicates

    def _check_embeddings(self, event: InferenceEvent) -> None:
        """The event's vectors have the dimensions its model version's baseline fixes (EventError otherwise)."""
        baseline = self.baseline_for(event.model, event.version)
        if baseline is not None and baseline.embeddings:
            try:
                check_dimensions(event.raw[EMBEDDINGS], {name: reference.dimension
                                                         for name, reference in baseline.embeddings.items()})
            except EmbeddingError as exc:
                raise EventError(exc.reason, exc.field) from None

    def _fold_one(self, model: str, version: str, event: InferenceEvent, offset: int, value: bytes | None) -> None:
        try:
            batch = EventBatch.from_events([event])
        except Exception as exc:  # noqa: BLE001
            error = EventError(f"could not be put into columns ({type(exc).__name__}: {exc})")
            self.dead_letters.append(DeadLetterRow.from_error(self.topic, self.partition, offset, value, error))
            return
        self._fold(model, version, batch, [_joined_id(event)], [event.ts_ms], [event.prediction], [offset], [value])

    def write_predictions(self, min_rows: int = 1) -> None:
        """Insert the pending predictions now if there are at least `min_rows` (a decoder with nothing
        else to do), so that less is left for `take`, which the collector waits for."""
        if len(self.unwritten) >= max(min_rows, 1):
            self._write_predictions()

    def _write_predictions(self) -> None:
        rows, self.unwritten = self.unwritten, []
        if self.store_predictions is None or (self._write_failing and time.monotonic() < self._write_retry_at):
            self._to_flush(rows)
            return
        try:
            stored = self.store_predictions(rows)
        except Exception as exc:  # the store is down: the flush inserts them (and retries) instead
            if not self._write_failing:
                log.warning("cannot store predictions ahead of the flush (%s: %s); the flush will",
                            type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            self._write_failing = True
            self._write_retry_at = time.monotonic() + PREDICTION_WRITE_RETRY_S
            self._to_flush(rows)
            return
        self._write_failing = False
        self.stored_predictions += len(rows) - len(stored.taken)
        self.labels_waiting.update(stored.waiting)
        self.dead_letters += [refused_prediction(self.topic, self.partition, PredictionRow.from_values(r))
                              for r in stored.taken]

    def _to_flush(self, rows: list[PredictionValues]) -> None:
        """Hand rows to the flush to insert, the first row per (model, request id) (as the store keeps it)."""
        for values in rows:
            keep_first(self.predictions, PredictionRow.from_values(values), self.dead_letters, self.topic,
                       self.partition)

    def take(self) -> FoldDelta:
        """Hand over what accumulated since the last take (the folder keeps ids and watermarks)."""
        self.write_predictions()
        delta = FoldDelta(windows=self.windows.windows, dead_letters=self.dead_letters, predictions=self.predictions,
                          watermarks=dict(self.watermarks), stored_predictions=self.stored_predictions,
                          labels_waiting=self.labels_waiting, valid=self.valid, late=self.late,
                          duplicates=self.duplicates)
        self._clear()
        return delta

    def reset(self, watermarks: Watermarks) -> None:
        """Forget everything since the last committed flush: the records are read again.

        (Predictions already inserted stay: they are real events, and inserting them again is a no-op.)"""
        self._clear()
        self.forget_ids()
        self.watermarks = dict(watermarks)

    def _clear(self) -> None:
        self.windows = PartitionWindows(self.window_ms, self.windows.lateness_ms, segments=self.segments)
        self.dead_letters, self.predictions, self.unwritten, self.labels_waiting = [], {}, [], set()
        self.stored_predictions = 0
        self.valid = self.late = self.duplicates = 0

    def forget_ids(self) -> None:
        """A new log (the topic was replaced): event ids seen in the old one say nothing."""
        self.recent_ids, self.older_ids = set(), set()

    def _watermark(self, model: str, version: str) -> int | None:
        """The partition's largest event time for a model version; from the stored rows the first time.

        Per partition, not per collector: partitions are read at different speeds (a backlog,
        a rebalance), so one partition running ahead must not make another's events late.
        """
        key = (model, version)
        if key not in self.watermarks:
            self.watermarks[key] = self.stored_watermark(model, version)
        return self.watermarks[key]


def merge_windows(into: dict[WindowKey, PartialWindow], delta: dict[WindowKey, PartialWindow]) -> None:
    """Add a delta's partial windows to those already pending (a flush that failed keeps them)."""
    for key, partial in delta.items():
        mine = into.get(key)
        if mine is None:
            into[key] = partial
        else:
            mine.state = mine.state.merge(partial.state)
            mine.events += partial.events
            mine.late_events += partial.late_events



class PartitionFolders:
    """The folders of the inference partitions folded in this process, made on first use.

    The collector talks to these the same way as to a `driftline.collector.decoders.DecoderPool`
    (which runs one of these in each decoder process): check, process, take, reset,
    forget_ids, drop, close.
    """

    failed = False  # a DecoderPool's state after a decoder died; folding in this process cannot fail apart

    def __init__(self, new_folder: Callable[[PartitionKey], InferenceFolder]):
        self._new_folder = new_folder
        self._folders: dict[PartitionKey, InferenceFolder] = {}

    def folder(self, key: PartitionKey) -> InferenceFolder:
        found = self._folders.get(key)
        if found is None:
            found = self._folders[key] = self._new_folder(key)
        return found

    def check(self) -> None:
        """Nothing to check: folding in this process has no decoder to lose (see `DecoderPool.check`)."""

    def process(self, key: PartitionKey, offsets: Sequence[int], values: Sequence[bytes | None]) -> None:
        self.folder(key).process(offsets, values)

    def take(self, keys: Sequence[PartitionKey],
             baseline_for: Callable[[str, str], Baseline | None] | None = None) -> dict[PartitionKey, FoldDelta]:
        """Every key's delta since its last take (`baseline_for` is for a pool's states, which arrive as bytes)."""
        return {key: self.folder(key).take() for key in keys}

    def reset(self, key: PartitionKey, watermarks: Watermarks) -> None:
        self.folder(key).reset(watermarks)

    def forget_ids(self, key: PartitionKey) -> None:
        self.folder(key).forget_ids()

    def drop(self, key: PartitionKey) -> None:
        self._folders.pop(key, None)

    def write_predictions(self, min_rows: int) -> None:
        """Store pending predictions of every partition that has at least `min_rows` (see `InferenceFolder`)."""
        for folder in self._folders.values():
            folder.write_predictions(min_rows)

    def close(self) -> None:
        self._folders.clear()


def _joined_id(event: InferenceEvent) -> str | None:
    """The request id a label joins on; none for a shadow answer, which shares its production twin's request id
    (the label belongs to the answer that was returned)."""
    return None if event.role == ROLE_SHADOW else event.request_id
