"""`PartitionBuffer`: one owned partition, where it stands and what it consumed since the last flush."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from driftline.collector.dead_letters import DeadLetterRow
from driftline.collector.flush import PartitionFlush
from driftline.collector.folding import FoldDelta, Watermarks, check_store_limits, merge_windows
from driftline.collector.labels import LabelRow, PredictionRow, RequestKey, keep_first, refused_label
from driftline.collector.store import StoredOffset
from driftline.collector.windows import PartitionWindows
from driftline.events import EventError, parse_label


@dataclass
class PartitionBuffer:
    """One owned partition: where it stands and what it consumed since the last flush."""

    topic: str
    partition: int
    row_partition: int
    window_ms: int
    lateness_ms: int
    ready: bool = False  # offsets loaded, log verified, sought: its records are processed
    expected: StoredOffset | None = None  # the stored offset (the fence)
    next_offset: int = 0  # the next offset to process
    topic_id: str | None = None  # the log that next_offset refers to
    windows: PartitionWindows = field(init=False)
    dead_letters: list[DeadLetterRow] = field(default_factory=list)
    predictions: dict[RequestKey, PredictionRow] = field(default_factory=dict)
    labels: dict[RequestKey, LabelRow] = field(default_factory=dict)
    stored_predictions: int = 0  # predictions a folder stored ahead of the flush
    labels_waiting: set[RequestKey] = field(default_factory=set)  # ... whose label was waiting (joined by the flush)
    messages: int = 0  # consumed since the last flush
    # (model, version) -> largest event time on this partition: as of the last gather, and the last flush
    gathered_watermarks: Watermarks = field(default_factory=dict)
    committed_watermarks: Watermarks = field(default_factory=dict)
    inference: bool = False  # a partition of the inference topic: it has a watermark row (driftline.watermarks)
    at_end: bool = False  # its reader had read the whole log at the last look (the consumer's highwater)
    last_record_ms: int | None = None  # wall clock (epoch ms) of its last record, or of its placement

    def __post_init__(self) -> None:
        self.windows = PartitionWindows(self.window_ms, self.lateness_ms)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def idle_since_ms(self) -> int | None:
        """Since when this partition's reader has been at the end of its log with nothing new (None: it is not)."""
        return self.last_record_ms if self.at_end and not self.messages else None

    @property
    def stored_event_time_ms(self) -> int | None:
        """The partition's watermark as last flushed: the largest event time stored (None: nothing yet)."""
        return newest(self.committed_watermarks)

    def to_flush(self) -> PartitionFlush:
        return PartitionFlush(self.topic, self.partition, self.row_partition, self.expected, self.next_offset,
                              self.topic_id, self.windows.windows, self.dead_letters, self.predictions, self.labels,
                              self.stored_predictions, self.labels_waiting, newest(self.gathered_watermarks),
                              self.idle_since_ms, self.inference)

    def add(self, delta: FoldDelta) -> None:
        merge_windows(self.windows.windows, delta.windows)
        self.dead_letters.extend(delta.dead_letters)
        for row in delta.predictions.values():
            keep_first(self.predictions, row, self.dead_letters, self.topic, self.partition)
        self.stored_predictions += delta.stored_predictions
        self.labels_waiting.update(delta.labels_waiting)
        self.gathered_watermarks = delta.watermarks

    def read_labels(self, records: Sequence[Any]) -> int:
        """Keep the valid labels of a label partition's records (the first per (model, request id) stays),
        dead-letter the rest; returns how many were valid."""
        count = 0
        for record in records:
            try:
                label = parse_label(record.value)
                check_store_limits(label.model, None, label.request_id)
            except EventError as error:
                self.dead_letters.append(DeadLetterRow.from_error(self.topic, self.partition, record.offset,
                                                                  record.value, error))
                continue
            count += 1
            row = LabelRow(label.request_id, label.model, label.label, label.ts_ms)
            first = self.labels.setdefault(row.key, row)
            if first is not row and first.label != row.label:
                self.dead_letters.append(refused_label(self.topic, self.partition, row))
        return count

    def skip(self, first: int, after: int, reason: str, raw: bytes | None) -> None:
        """Offsets `first` to `after - 1` cannot be read: one dead letter (with `raw`) stands for them all."""
        self.dead_letters.append(DeadLetterRow(self.topic, self.partition, first, reason, None, None, raw))
        self.next_offset = after
        self.messages += 1

    def split(self) -> "PartitionBuffer":
        """Hand what was consumed so far to a new buffer (a flush in flight); this one goes on from here."""
        frozen = PartitionBuffer(self.topic, self.partition, self.row_partition, self.window_ms, self.lateness_ms,
                                 ready=True, expected=self.expected, next_offset=self.next_offset,
                                 topic_id=self.topic_id, inference=self.inference, at_end=self.at_end,
                                 last_record_ms=self.last_record_ms)
        frozen.windows, frozen.dead_letters, frozen.predictions = self.windows, self.dead_letters, self.predictions
        frozen.labels, frozen.messages = self.labels, self.messages
        frozen.stored_predictions, frozen.labels_waiting = self.stored_predictions, self.labels_waiting
        frozen.gathered_watermarks = dict(self.gathered_watermarks)
        frozen.committed_watermarks = dict(self.committed_watermarks)
        self._clear()
        return frozen

    def rejoin(self, frozen: "PartitionBuffer") -> None:
        """Take back what `split` handed out (its flush failed): it comes first, as it was read first."""
        merge_windows(frozen.windows.windows, self.windows.windows)
        self.windows = frozen.windows
        self.dead_letters = frozen.dead_letters + self.dead_letters
        for row in self.predictions.values():
            keep_first(frozen.predictions, row, self.dead_letters, self.topic, self.partition)
        self.predictions = frozen.predictions
        for key, label in self.labels.items():
            first = frozen.labels.setdefault(key, label)
            if first is not label and first.label != label.label:
                self.dead_letters.append(refused_label(self.topic, self.partition, label))
        self.labels = frozen.labels
        self.stored_predictions += frozen.stored_predictions
        self.labels_waiting = frozen.labels_waiting | self.labels_waiting
        self.messages += frozen.messages
        self.gathered_watermarks = frozen.gathered_watermarks

    def committed_as(self, frozen: "PartitionBuffer") -> None:
        """`frozen` (split from this buffer) was stored: the fence and the watermarks move to where it stood."""
        self.expected = frozen.expected
        self.committed_watermarks = dict(frozen.committed_watermarks)
        self.gathered_watermarks = dict(frozen.committed_watermarks)

    def committed(self) -> None:
        self.expected = StoredOffset(self.next_offset, self.topic_id)
        self.committed_watermarks = dict(self.gathered_watermarks)
        self._clear()

    def discard(self) -> None:
        """Forget what was consumed since the last flush (it will be read again from the stored offset).

        The partition's folder is reset by the collector.
        """
        self._clear()
        self.gathered_watermarks = dict(self.committed_watermarks)

    def _clear(self) -> None:
        self.windows = PartitionWindows(self.window_ms, self.lateness_ms)
        self.dead_letters, self.predictions, self.labels = [], {}, {}
        self.stored_predictions, self.labels_waiting = 0, set()
        self.messages = 0


def newest(watermarks: Watermarks) -> int | None:
    """The largest event time over a partition's model versions (None: none seen)."""
    return max((ts for ts in watermarks.values() if ts is not None), default=None)
