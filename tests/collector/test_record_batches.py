"""The collector's record-batch reader yields exactly what kafka-python's own reader yields.

Pure computation (no broker): each case builds fetched bytes with kafka-python's own batch
builder, reads them with `Fetcher.PartitionRecords` (the reference) and with
`LeanPartitionRecords`, in polls of several sizes, and compares every `ConsumerRecord`, the
fetch position after each poll, the read counters, and the error raised for corrupt input (both
guarded readers raise kafka-python's `CorruptRecordError` as a `MalformedBatch` and drain the fetch).
"""
from __future__ import annotations

import struct

import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from driftline.collector.record_batches import (GuardedPartitionRecords, LeanPartitionRecords, MalformedBatch, read_v2_batch,
                                      use_lean_records)

TP = TopicPartition("driftline.inference", 3)
T0 = 1_800_000_000_000
NONE, GZIP, LZ4 = 0, 1, 3

# v2 batch header offsets (KIP-98)
_ATTRIBUTES_AT, _CRC_AT = 21, 17


def _batch(rows, *, base_offset=0, compression=NONE, magic=2, skip_after=None, trailing_skip=0,
           attributes_or=0) -> bytes:
    """One batch of (timestamp, key, value, headers) rows, as a broker would hand it out."""
    builder = MemoryRecordsBuilder(magic=magic, compression_type=compression, batch_size=1 << 26)
    for i, (ts, key, value, headers) in enumerate(rows):
        if magic == 2:
            builder.append(timestamp=ts, key=key, value=value, headers=headers)
        else:
            builder.append(timestamp=ts, key=key, value=value)
        if skip_after is not None and i == skip_after:
            builder.skip(5)  # compaction removed five records here
    if trailing_skip:
        builder.skip(trailing_skip)
    builder.close()
    raw = bytearray(builder.buffer())
    if magic == 2:
        struct.pack_into(">q", raw, 0, base_offset)  # the broker assigns the base offset
        if trailing_skip:  # the batch keeps its last offset when compaction removed its last records
            last_delta = struct.unpack_from(">i", raw, 23)[0]
            struct.pack_into(">i", raw, 23, last_delta + trailing_skip)
        if attributes_or or trailing_skip:
            attributes = struct.unpack_from(">h", raw, _ATTRIBUTES_AT)[0] | attributes_or
            struct.pack_into(">h", raw, _ATTRIBUTES_AT, attributes)
            struct.pack_into(">I", raw, _CRC_AT, calc_crc32c(bytes(raw[_ATTRIBUTES_AT:])))
    else:
        struct.pack_into(">q", raw, 0, base_offset)  # legacy: the (outer) message's offset
    return bytes(raw)


def _rows(n, *, key=None, value=lambda i: b'{"i": %d}' % i, headers=(), ts=lambda i: T0 + i):
    return [(ts(i), key, value(i), list(headers)) for i in range(n)]


def _read(cls, raw, fetch_offset, poll_size, **kwargs):
    """Every poll's records and the position after it, until empty; an error ends the polls."""
    part = cls(fetch_offset, TP, MemoryRecords(raw), check_crcs=True, **kwargs)
    polls = []
    for _ in range(20_000):
        if not part:  # drained
            break
        try:
            records = part.take(poll_size)
        except CorruptRecordError as error:  # MalformedBatch from the guarded readers
            polls.append((type(error), part.next_fetch_offset))
            break
        polls.append((records, part.next_fetch_offset))
        if not records:
            break
    return polls, part.next_fetch_offset, part.records_read, part.bytes_read


def _same(raw, fetch_offset=0, **kwargs):
    for poll_size in (1, 7, 500, None):
        ref = _read(Fetcher.PartitionRecords, raw, fetch_offset, poll_size, **kwargs)
        guarded = _read(GuardedPartitionRecords, raw, fetch_offset, poll_size, **kwargs)
        lean = _read(LeanPartitionRecords, raw, fetch_offset, poll_size, **kwargs)
        assert lean == guarded, f"poll size {poll_size}"
        if ref[0][-1][0] is CorruptRecordError:  # kafka-python's error, raised as a MalformedBatch
            assert guarded[0][-1][0] is MalformedBatch and ref[0][:-1] == guarded[0][:-1]
        else:
            assert guarded == ref, f"poll size {poll_size}"
    return lean


CASES = {
    "small values": _batch(_rows(20)),
    "one record": _batch(_rows(1)),
    "lz4": _batch(_rows(300), compression=LZ4),
    "gzip": _batch(_rows(300), compression=GZIP),
    "values of 2 and 3 byte lengths": _batch(_rows(40, value=lambda i: b"x" * (50 + 997 * i))),
    "70 kB value": _batch(_rows(2, value=lambda i: b"v" * 70_000), compression=LZ4),
    "null and empty values": _batch(_rows(6, value=lambda i: None if i % 2 else b"")),
    "keys": _batch(_rows(10, key=b"k")),
    "empty key": _batch(_rows(3, key=b"")),
    "long key": _batch(_rows(3, key=b"k" * 300)),
    "headers": _batch(_rows(5, headers=[("trace", b"abc"), ("none", None), ("größe", b"x" * 200)])),
    "9000 records (3-byte offset deltas)": _batch(_rows(9000), compression=LZ4),
    "timestamps going back and far ahead": _batch(_rows(50, ts=lambda i: T0 - 5_000 * i if i % 2 else T0 + 10**7 * i)),
    "high base offset": _batch(_rows(30), base_offset=2**40),
    "compaction gap inside": _batch(_rows(30), base_offset=100, skip_after=9),
    "compaction removed the last records": _batch(_rows(10), base_offset=50, trailing_skip=4),
    "log append time": _batch(_rows(10), attributes_or=0x08),
    "several batches": b"".join(_batch(_rows(25), base_offset=25 * k, compression=(NONE, LZ4)[k % 2])
                                for k in range(6)),
    "control batch between batches": b"".join([
        _batch(_rows(5), base_offset=0),
        _batch([(T0, struct.pack(">hh", 0, 1), struct.pack(">hih", 0, 0, 0), [])], base_offset=5,
               attributes_or=0x20 | 0x10),  # a COMMIT marker
        _batch(_rows(5), base_offset=6)]),
    "legacy v0": _batch(_rows(10, key=b"k"), magic=0, base_offset=9),
    "legacy v1": _batch(_rows(10), magic=1, base_offset=9),
    "legacy v1 gzip": _batch(_rows(10), magic=1, compression=GZIP, base_offset=9),
}


@pytest.mark.parametrize("name", CASES)
def test_records_fields_and_positions_match_kafka_python(name):
    polls, _, records_read, _ = _same(CASES[name])
    assert sum(len(records) for records, _ in polls) == records_read > 0


def test_a_fetch_that_starts_inside_a_batch_skips_the_records_before_it():
    polls, *_ = _same(_batch(_rows(50), base_offset=1000, compression=LZ4), fetch_offset=1017)
    assert polls[0][0][0].offset == 1017


def test_deserializers_and_read_committed_are_left_to_kafka_python():
    class Upper:
        def deserialize(self, topic, headers, data):
            return data.upper()
    raw = _batch(_rows(10, key=b"k"))
    _same(raw, value_deserializer=Upper())
    _same(raw, isolation_level=IsolationLevel.READ_COMMITTED)


def test_the_lean_reader_really_reads_v2_batches():
    """Guards the comparison above: the lean path must be the one that ran."""
    raw = _batch(_rows(3), base_offset=7, compression=LZ4)
    records, size, error = read_v2_batch(MemoryRecords(raw).next_batch(), TP, -1)
    assert error is None
    assert [r.offset for r in records] == [7, 8, 9]
    assert [r.value for r in records] == [b'{"i": 0}', b'{"i": 1}', b'{"i": 2}']
    assert size == sum(len(r.value) for r in records) + 3 * 6  # 6 bytes of fields around each small value


def _corrupt(raw: bytes, at: int, byte: int) -> bytes:
    """Change one byte of an uncompressed v2 batch and make its crc right again."""
    out = bytearray(raw)
    out[at] = byte
    struct.pack_into(">I", out, _CRC_AT, calc_crc32c(bytes(out[_ATTRIBUTES_AT:])))
    return bytes(out)


GOOD = _batch(_rows(4, value=lambda i: b"value-%d" % i))
FIRST_RECORD_AT = 61  # after the v2 batch header

CORRUPT = {
    "bad crc": GOOD[:-1] + bytes([GOOD[-1] ^ 0xFF]),
    "record longer than the batch": _corrupt(GOOD, FIRST_RECORD_AT, 0x7E),
    "record shorter than its fields": _corrupt(GOOD, FIRST_RECORD_AT, GOOD[FIRST_RECORD_AT] - 2),
    "value length past the record": _corrupt(GOOD, FIRST_RECORD_AT + 5, 0x40),
    "negative header count": _corrupt(GOOD, FIRST_RECORD_AT + 1 + 1 + 1 + 1 + 1 + 1 + 7, 0x03),
    "bytes after the last record": _corrupt(GOOD, 60, 3),  # records count 4 -> 3
}


@pytest.mark.parametrize("name", CORRUPT)
def test_corrupt_batches_give_the_records_before_the_error_then_raise_it(name):
    polls, *_ = _same(CORRUPT[name])
    assert polls[-1][0] is MalformedBatch


def test_a_consumer_is_switched_to_the_lean_reader():
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:1", api_version=(2, 8))
    try:
        assert use_lean_records(consumer)
        assert consumer._fetcher.PartitionRecords is LeanPartitionRecords
        assert Fetcher.PartitionRecords is not LeanPartitionRecords  # other consumers keep kafka-python's
    finally:
        consumer.close()


def test_a_fetcher_without_the_hook_keeps_its_reader(caplog):
    class Elsewhere:
        _fetcher = object()
    assert not use_lean_records(Elsewhere())
    assert "slower" in caplog.text


def test_an_unknown_record_reader_is_refused():
    from driftline.collector.config import CollectorConfig
    with pytest.raises(ValueError, match="lean, kafka-python"):
        CollectorConfig("127.0.0.1:9092", "sqlite://", record_reader="confluent")
