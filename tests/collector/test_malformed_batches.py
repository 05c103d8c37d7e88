"""A record batch that lies behind a valid CRC is dead-lettered and skipped; the collector goes on.

kafka-python (and the lean reader before it was guarded) left the failed fetch in place
and spun on it inside `poll()` at full CPU, never returning. A real broker of its own
(one partition) holds good events, a crafted batch, then good events again.
"""
from __future__ import annotations

import struct

import orjson
import pytest
from sqlalchemy import select

from driftline.collector.record_batches import GuardedPartitionRecords, LeanPartitionRecords, MalformedBatch, malformed_range
from driftline.store import db as store_db
from driftline.store.models import DeadLetter
from tests.support.collector_helpers import collector_thread, config, event, events, produce_raw, record_batch
from tests.support.waiting import wait_until

# Offsets in a v2 batch (KIP-98): records count int32 at 57, the first record's length varint at 61
_COUNT_AT, _FIRST_RECORD_AT = 57, 61

MUTATIONS = {
    # the first record says it is 63 bytes long: nothing in the batch can be read
    "record length": lambda raw: raw.__setitem__(_FIRST_RECORD_AT, 0x7E),
    # three records, counted as two: bytes are left over after the second
    "record count too small": lambda raw: struct.pack_into(">i", raw, _COUNT_AT, 2),
    # three records, counted as 2^31 - 1: reading runs off the end after the third
    "record count too large": lambda raw: struct.pack_into(">i", raw, _COUNT_AT, 0x7FFFFFFF),
}
# The offsets of the crafted batch (3 records) that cannot be delivered, from its base offset
UNREADABLE = {"record length": (0, 3), "record count too small": (2, 3), "record count too large": None}


@pytest.fixture(scope="module")
def own_broker(embedded_broker_factory) -> str:
    """A broker of this module's own: the crafted batches must not reach other tests' collectors."""
    return embedded_broker_factory(partitions=1).bootstrap_servers


def _values(model, start, n):
    return [orjson.dumps(event(model, i)) for i in range(start, start + n)]


def _dead_letters(url):
    with store_db.session_scope(url) as session:
        return [(d.offset, d.reason, d.raw_size) for d in session.scalars(select(DeadLetter))]


def _run(broker, url, mutation, reader, unique_id):
    model = f"bad-batch-{unique_id}"
    produce_raw(broker, record_batch(_values(model, 0, 3)))
    bad_base = produce_raw(broker, record_batch(_values(model, 3, 3), MUTATIONS[mutation]))
    produce_raw(broker, record_batch(_values(model, 6, 3)))
    unreadable = UNREADABLE[mutation]
    expected = 9 - (unreadable[1] - unreadable[0] if unreadable else 0)
    with collector_thread(config(broker, url, record_reader=reader, decoders=0, kafka_client="kafka-python")):
        wait_until(lambda: events(url, model) >= expected, timeout=60, message="the events after the batch")
    assert events(url, model) == expected
    ours = [d for d in _dead_letters(url) if bad_base <= d[0] < bad_base + 3]
    if unreadable is None:  # every record was delivered: nothing to dead-letter
        assert ours == []
    else:
        first, after = bad_base + unreadable[0], bad_base + unreadable[1]
        assert len(ours) == 1
        offset, reason, raw_size = ours[0]
        assert offset == first
        assert f"malformed record batch, offsets {first}-{after - 1} skipped" in reason
        assert raw_size > 61  # the batch's bytes


@pytest.mark.parametrize("reader", ["lean", "kafka-python"])
@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_malformed_batch_is_dead_lettered_and_the_collector_goes_on(own_broker, sqlite_url, mutation,
                                                                      reader, unique_id):
    _run(own_broker, sqlite_url, mutation, reader, unique_id)


def test_a_malformed_batch_is_dead_lettered_on_both_stores(own_broker, db_url, unique_id):
    _run(own_broker, db_url, "record length", "lean", unique_id)


@pytest.mark.parametrize("reader", [LeanPartitionRecords, GuardedPartitionRecords])
def test_a_failed_fetch_is_drained_so_the_next_poll_cannot_spin(reader):
    """kafka-python's fetcher takes from an undrained fetch until it yields records: forever."""
    from kafka.record.memory_records import MemoryRecords
    from kafka.structs import TopicPartition

    raw = record_batch([b"a", b"b", b"c"], MUTATIONS["record length"])
    part = reader(0, TopicPartition("t", 0), MemoryRecords(raw), check_crcs=True)
    with pytest.raises(MalformedBatch) as raised:
        part.take(10)
    assert (raised.value.first_offset, raised.value.next_offset) == (0, 3)
    assert raised.value.raw == raw
    assert not part  # drained: the fetcher moves on to the next fetch


def test_the_skipped_range_never_reaches_past_the_next_batch():
    lying_end = record_batch([b"a", b"b"], lambda raw: struct.pack_into(">i", raw, 23, 1_000_000))
    good = bytearray(record_batch([b"c"]))
    struct.pack_into(">q", good, 0, 2)  # the next batch's base offset
    assert malformed_range(lying_end + bytes(good), 0, 0)[:2] == (0, 2)
    assert malformed_range(lying_end, 1, 0)[:2] == (1, 1_000_001)  # the log's end cuts this one (collector)
    assert malformed_range(b"\x00" * 5, 7) == (7, 8, b"")  # not even framed: one offset


def test_a_decompression_bomb_is_dead_lettered_on_the_topic_and_the_store_and_read_past_once(
        own_broker, sqlite_url, unique_id, monkeypatch, kafka_client):
    """A batch over COLLECTOR_MAX_BATCH_BYTES decompressed: one dead letter, the offsets stored past it, and a
    restarted collector (same group) reads on after it instead of meeting it again. Through librdkafka, which
    fetches the batch again forever, the partition stalls and the guarded reader gives the same dead letter."""
    from driftline.collector import record_batches
    from tests.collector.test_batch_decompression import GZIP, _batch_around, _zeros_gzip
    from tests.collector.test_dead_letters import _read_dlq

    monkeypatch.setattr(record_batches, "MAX_BATCH_BYTES", 1 << 20)
    model = f"bomb-{unique_id}"
    produce_raw(own_broker, record_batch(_values(model, 0, 3)))
    bomb_base = produce_raw(own_broker, _batch_around(_zeros_gzip(16 << 20), GZIP, records=4))
    produce_raw(own_broker, record_batch(_values(model, 3, 3)))
    cfg = config(own_broker, sqlite_url, decoders=0, kafka_client=kafka_client, stall_s=1.0)
    with collector_thread(cfg):
        wait_until(lambda: events(sqlite_url, model) >= 6, timeout=60, message="the events after the bomb")
    ours = [d for d in _dead_letters(sqlite_url) if d[0] == bomb_base]
    assert len(ours) == 1
    assert f"offsets {bomb_base}-{bomb_base + 3} skipped" in ours[0][1] and "more than 1048576 bytes" in ours[0][1]
    on_topic = _read_dlq(own_broker, expected=1)
    value, headers = on_topic[("driftline.inference", 0, bomb_base)]
    assert headers["driftline.reason"].decode() == ours[0][1] and len(value) == ours[0][2]

    produce_raw(own_broker, record_batch(_values(model, 6, 3)))
    with collector_thread(cfg):  # the same group: its stored offsets are past the bomb
        wait_until(lambda: events(sqlite_url, model) >= 9, timeout=60, message="the events after a restart")
    assert events(sqlite_url, model) == 9
    assert len([d for d in _dead_letters(sqlite_url) if d[0] == bomb_base]) == 1


# librdkafka reads a record count's lie as the records the batch holds, and a record-length lie as one record
# without a value before it stalls on the rest: (valid events of the batch, dead letters (offset from its base, reason))
CONFLUENT = {"record length": (0, [(0, "empty message"), (1, "malformed record batch, offsets {second}-{third} skipped")]),
             "record count too small": (3, []), "record count too large": (3, [])}


def test_librdkafka_reads_or_dead_letters_each_malformed_batch_and_goes_on(own_broker, sqlite_url, unique_id):
    """Every mutation in one log and one collector run (each batch 3 records, good batches between them)."""
    model = f"bad-batch-{unique_id}"
    bases = {}
    produce_raw(own_broker, record_batch(_values(model, 0, 3)))
    for i, (mutation, mutate) in enumerate(MUTATIONS.items()):
        bases[mutation] = produce_raw(own_broker, record_batch(_values(model, 3 + 6 * i, 3), mutate))
        produce_raw(own_broker, record_batch(_values(model, 6 + 6 * i, 3)))
    expected = 3 + sum(3 + CONFLUENT[m][0] for m in MUTATIONS)
    letters = sum(len(CONFLUENT[m][1]) for m in MUTATIONS)

    def ours() -> list[tuple[int, str, int]]:
        return sorted(d for d in _dead_letters(sqlite_url) if any(b <= d[0] < b + 3 for b in bases.values()))

    with collector_thread(config(own_broker, sqlite_url, decoders=0, kafka_client="confluent", stall_s=1.0)):
        wait_until(lambda: events(sqlite_url, model) >= expected and len(ours()) >= letters, timeout=90,
                   message="the events after the batches")
    assert events(sqlite_url, model) == expected
    found = ours()
    for mutation, base in bases.items():
        mine = [(offset - base, reason) for offset, reason, _ in found if base <= offset < base + 3]
        assert [at for at, _ in mine] == [at for at, _ in CONFLUENT[mutation][1]], mutation
        for (_, reason), (_, expect) in zip(mine, CONFLUENT[mutation][1]):
            assert expect.format(second=base + 1, third=base + 2) in reason
