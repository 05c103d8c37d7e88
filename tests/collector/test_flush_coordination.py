"""`FlushCoordinator`'s decisions on a real, migrated store: when a flush is due, what a failing store or a
fence does to the buffers and the backoff, when reading must pause. No broker: records are handed to the
real folders as the collector's poll loop hands them."""
from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any, Iterator, NamedTuple

from sqlalchemy import func, select, text

from driftline.collector.backoff import StoreBackoff
from driftline.collector.config import CollectorConfig
from driftline.collector.dead_letters import DeadLetterPublisher
from driftline.collector.flush_coordination import FlushCoordinator
from driftline.collector.folding import FolderSetup, InferenceFolder, PartitionFolders
from driftline.collector.metrics import CollectorMetrics
from driftline.collector.partition_buffer import PartitionBuffer
from driftline.collector.store import StoredOffset, load_offsets
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import DeadLetter, LabelRecord
from tests.support.collector_helpers import event, events, label, merged

GROUP = "g"
TOPIC_ID = "tid-1"
WINDOW_S, LATENESS_S = 60, 30


class Record(NamedTuple):
    """What the poll loop reads of a Kafka record."""

    offset: int
    value: bytes


class Stack(NamedTuple):
    coordinator: FlushCoordinator
    folders: PartitionFolders
    fenced: list[bool]


def _stack(url: str, **overrides: Any) -> Stack:
    """A coordinator wired as `Collector` wires it; `fenced` records each call of its `on_fenced`."""
    config = CollectorConfig("127.0.0.1:1", url, group_id=GROUP, window_seconds=WINDOW_S,
                             allowed_lateness_seconds=LATENESS_S, **overrides)
    engine = store_db.get_engine(url)
    setup = FolderSetup(WINDOW_S * 1000, LATENESS_S * 1000, 1_000)
    folders = PartitionFolders(lambda key: InferenceFolder(key[0], key[1], setup, lambda model, version: None,
                                                           lambda model, version: None))
    fenced: list[bool] = []
    coordinator = FlushCoordinator(config, engine, CollectorMetrics(), DeadLetterPublisher("127.0.0.1:1"), folders,
                                   lambda model, version: None, StoreBackoff(config.retry_min_s, config.retry_max_s),
                                   on_fenced=lambda: fenced.append(True))
    return Stack(coordinator, folders, fenced)


def _buffer(topic: str = TOPIC_INFERENCE, partition: int = 0) -> PartitionBuffer:
    """A partition placed at the log's beginning, nothing stored for it yet."""
    return PartitionBuffer(topic, partition, partition, WINDOW_S * 1000, LATENESS_S * 1000, ready=True,
                           expected=None, next_offset=0, topic_id=TOPIC_ID)


def _read(folders: PartitionFolders, buf: PartitionBuffer, model: str, first: int, count: int) -> None:
    """Events `first`..`first + count - 1` of `model`, read from the buffer's partition as the poll loop does."""
    offsets = list(range(buf.next_offset, buf.next_offset + count))
    folders.process(buf.key, offsets, [encode_event(event(model, i)) for i in range(first, first + count)])
    buf.next_offset = offsets[-1] + 1
    buf.messages += count


def _outcomes(coordinator: FlushCoordinator, outcome: str) -> float:
    return coordinator.metrics.flushes.labels(outcome)._value.get()


@contextlib.contextmanager
def _offsets_table_gone(url: str) -> Iterator[None]:
    """The store refuses every flush (its offsets table is away) until the block ends."""
    engine = store_db.get_engine(url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE consumer_offsets RENAME TO consumer_offsets_away"))
    try:
        yield
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE consumer_offsets_away RENAME TO consumer_offsets"))


def test_a_flush_is_due_after_the_interval_or_at_once_when_a_flush_worth_of_messages_waits(db_url):
    coordinator, folders, _ = _stack(db_url, flush_interval_s=3_600, flush_max_events=10)
    model = f"due-{uuid.uuid4().hex[:8]}"
    buf = _buffer()
    _read(folders, buf, model, 0, 4)
    coordinator.tick([buf], now=time.monotonic())
    assert events(db_url, model) == 0 and buf.messages == 4  # neither the interval nor the count reached

    coordinator.tick([buf], now=time.monotonic() + 3_600)  # the interval is over
    assert events(db_url, model) == 4 and coordinator.flushed == 4
    assert buf.messages == 0 and buf.expected == StoredOffset(4, TOPIC_ID)  # the fence moved with the commit

    _read(folders, buf, model, 4, 9)
    coordinator.tick([buf], now=time.monotonic())
    assert events(db_url, model) == 4  # 9 wait: the interval starts again after each flush
    _read(folders, buf, model, 13, 1)
    coordinator.tick([buf], now=time.monotonic())  # 10 wait: a flush's worth, due at once
    assert events(db_url, model) == 14 and coordinator.flushed == 14
    assert sum(s.features["x"].total for s in merged(db_url, model).values()) == sum(range(14))
    assert _outcomes(coordinator, "ok") == 2


def test_a_partition_whose_offset_moves_is_flushed_without_messages_and_a_still_one_never(db_url):
    coordinator, _, _ = _stack(db_url, flush_interval_s=3_600)
    fresh = _buffer(TOPIC_LABELS, 1)  # placed, nothing read: its offset row does not exist yet
    coordinator.tick([fresh], now=time.monotonic() + 3_600)
    assert load_offsets(coordinator.engine, GROUP, TOPIC_LABELS, [1]) == {1: StoredOffset(0, TOPIC_ID)}
    assert _outcomes(coordinator, "ok") == 1

    coordinator.tick([fresh], now=time.monotonic() + 7_200)  # nothing read, nothing to move: no transaction
    assert _outcomes(coordinator, "ok") == 1 and fresh.expected == StoredOffset(0, TOPIC_ID)


def test_a_failing_store_backs_off_doubling_holds_the_data_and_pauses_reading_then_stores_it_once(sqlite_url):
    coordinator, folders, fenced = _stack(sqlite_url, flush_interval_s=3_600, flush_max_events=10,
                                          retry_min_s=60, retry_max_s=240)
    backoff, model, buf = coordinator.backoff, f"outage-{uuid.uuid4().hex[:8]}", _buffer()
    _read(folders, buf, model, 0, 10)
    with _offsets_table_gone(sqlite_url):
        coordinator.tick([buf], now=time.monotonic())  # due by count, and the store fails
        assert _outcomes(coordinator, "error") == 1 and backoff.flush_failing and not fenced
        assert backoff.delay == 120  # the next wait doubles
        assert buf.messages == 10 and buf.expected is None  # held, not committed
        assert coordinator.backlogged(coordinator.pending([buf]))  # a flush's worth held while failing: pause
        assert not coordinator.backlogged(9)

        coordinator.tick([buf], now=backoff.retry_at - 1)
        assert _outcomes(coordinator, "error") == 1  # the backoff holds the next attempt back
        coordinator.tick([buf], now=backoff.retry_at)
        assert _outcomes(coordinator, "error") == 2 and backoff.delay == 240
        coordinator.tick([buf], now=backoff.retry_at)
        assert _outcomes(coordinator, "error") == 3 and backoff.delay == 240  # capped at retry_max_s
        assert events(sqlite_url, model) == 0

    coordinator.tick([buf], now=backoff.retry_at)
    assert _outcomes(coordinator, "ok") == 1 and coordinator.flushed == 10
    assert not backoff.flush_failing and backoff.delay == 60 and backoff.ready(time.monotonic())
    assert events(sqlite_url, model) == 10  # three gathers, each event counted once
    assert sum(s.features["x"].total for s in merged(sqlite_url, model).values()) == sum(range(10))
    assert not coordinator.backlogged(coordinator.pending([buf]))


def test_two_flushes_worth_pending_pause_reading_even_while_the_store_is_fine(sqlite_url):
    coordinator, folders, _ = _stack(sqlite_url, flush_max_events=10)
    buf = _buffer()
    _read(folders, buf, "m", 0, 19)
    assert coordinator.pending([buf]) == 19 and not coordinator.backlogged(19)
    _read(folders, buf, "m", 19, 1)
    assert coordinator.backlogged(coordinator.pending([buf]))


def test_a_fenced_flush_drops_what_it_read_asks_for_placement_and_is_no_outage(db_url):
    owner, owner_folders, owner_fenced = _stack(db_url)
    stale, stale_folders, stale_fenced = _stack(db_url)  # a second collector that still believes it owns 0
    model = f"fence-{uuid.uuid4().hex[:8]}"
    mine, theirs = _buffer(), _buffer()
    _read(owner_folders, mine, model, 0, 5)
    assert owner.flush([mine])
    _read(stale_folders, theirs, model, 0, 3)

    assert stale.flush([theirs]) is False
    assert stale_fenced == [True] and not owner_fenced
    assert not theirs.ready and theirs.messages == 0 and not theirs.windows.windows  # re-placed from the store
    assert not stale.backoff.flush_failing and stale.backoff.ready(time.monotonic())
    assert _outcomes(stale, "fenced") == 1 and stale.flushed == 0
    assert events(db_url, model) == 5
    assert load_offsets(stale.engine, GROUP, TOPIC_INFERENCE, [0]) == {0: StoredOffset(5, TOPIC_ID)}


def test_a_label_partition_commits_its_labels_and_counts_a_refused_second_label_as_a_dead_letter(db_url):
    coordinator, _, _ = _stack(db_url)
    model = f"labels-{uuid.uuid4().hex[:8]}"
    buf = _buffer(TOPIC_LABELS, 2)
    values = [label(model, "a", 1), label(model, "b", 0), label(model, "a", 0)]  # "a" again, another label
    valid = buf.read_labels([Record(i, encode_event(v)) for i, v in enumerate(values)])
    buf.next_offset, buf.messages = 3, 3
    assert valid == 3 and len(buf.labels) == 2

    assert coordinator.flush([buf])
    assert coordinator.metrics.dead_letters.labels(TOPIC_LABELS)._value.get() == 1
    with store_db.session_scope(db_url) as session:
        stored = dict(session.execute(select(LabelRecord.request_id, LabelRecord.label)
                                      .where(LabelRecord.model == model)).all())
        letters = session.scalar(select(func.count()).select_from(DeadLetter).where(DeadLetter.model == model))
    assert stored == {"a": 1, "b": 0} and letters == 1
