"""Fuzzing the record-batch readers: malformed bytes give a `MalformedBatch` or records, nothing else.

Inputs: valid batches with bytes overwritten (the CRC recomputed, so the lie reaches the
parser), truncations, and random bytes. Each read is bounded in polls; allocation is bounded
by checking that no record is larger than the input (no preallocation from a lying length).
"""
from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from driftline.collector.record_batches import GuardedPartitionRecords, LeanPartitionRecords, MalformedBatch

TP = TopicPartition("driftline.inference", 0)


def _valid(values: list[bytes], compression: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=1_800_000_000_000, key=None, value=value, headers=[("h", b"v")])
    builder.close()
    return bytes(builder.buffer())


def _read_all(reader, raw: bytes) -> int:
    """Every record's size; only MalformedBatch may escape; at most 1000 polls."""
    part = reader(0, TP, MemoryRecords(raw), check_crcs=True)
    seen = 0
    for _ in range(1_000):
        if not part:
            return seen
        try:
            records = part.take(50)
        except MalformedBatch as bad:
            assert bad.next_offset >= bad.first_offset
            assert not part  # drained: the fetcher cannot spin on it
            return seen
        for record in records:
            assert len(record.value or b"") <= len(raw) and len(record.key or b"") <= len(raw)
        seen += len(records)
        if not records:
            return seen
    raise AssertionError("the reader did not finish within 1000 polls")


values = st.lists(st.binary(max_size=60), min_size=1, max_size=8)
edits = st.lists(st.tuples(st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=255)),
                 min_size=1, max_size=6)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(values=values, edits=edits, compression=st.sampled_from([0, 1]))
def test_lying_bytes_behind_a_valid_crc(values, edits, compression):
    raw = bytearray(_valid(values, compression))
    for at, byte in edits:
        raw[61 + at % max(len(raw) - 61, 1)] = byte  # the records (and for gzip, the compressed stream)
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    for reader in (LeanPartitionRecords, GuardedPartitionRecords):
        _read_all(reader, bytes(raw))


@FUZZ
@given(values=values, cut=st.integers(min_value=0, max_value=600), header_edits=edits)
def test_truncated_and_lying_headers(values, cut, header_edits):
    raw = bytearray(_valid(values, 0))
    for at, byte in header_edits:
        raw[at % 61] = byte  # base offset, length, magic, counts, ...
    for reader in (LeanPartitionRecords, GuardedPartitionRecords):
        _read_all(reader, bytes(raw[:cut]))
        _read_all(reader, bytes(raw))


@FUZZ
@given(raw=st.binary(max_size=400))
def test_random_bytes(raw):
    for reader in (LeanPartitionRecords, GuardedPartitionRecords):
        _read_all(reader, raw)
