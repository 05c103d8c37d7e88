"""Record batches decompress within `COLLECTOR_MAX_BATCH_BYTES`: a decompression bomb costs at most the bound.

kafka-python decompressed a batch whole: a 131 KB gzip batch became a 134 MB record (394 MB
peak), so one producer could have the collector killed for memory at every restart. Pure
computation (no broker): batches are crafted with a compressed payload of our choosing.
"""
from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import lz4.frame
import pytest
from kafka.errors import CorruptRecordError
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from driftline import defaults
from driftline.collector import record_batches
from driftline.collector.decompression import GZIP, LZ4, SNAPPY, ZSTD, BatchTooLarge, decompress_bounded
from driftline.collector.record_batches import GuardedPartitionRecords, LeanPartitionRecords, MalformedBatch

TP = TopicPartition("driftline.inference", 0)
MiB = 1 << 20
# v2 batch header (KIP-98): length int32 at 8, CRC at 17, attributes int16 at 21, records count at 57
_LENGTH_AT, _CRC_AT, _ATTRIBUTES_AT, _COUNT_AT, _RECORDS_AT = 8, 17, 21, 57, 61


def _zeros_gzip(size: int) -> bytes:
    """`size` zero bytes, gzipped a MiB at a time (the bomb never exists uncompressed)."""
    stream = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(MiB)
    return b"".join([stream.compress(chunk) for _ in range(size // MiB)] + [stream.flush()])


def _zeros_lz4(size: int) -> bytes:
    stream = lz4.frame.LZ4FrameCompressor()
    chunk = bytes(MiB)
    return b"".join([stream.begin()] + [stream.compress(chunk) for _ in range(size // MiB)] + [stream.flush()])


BOMBS = {GZIP: _zeros_gzip, LZ4: _zeros_lz4}


def _batch_around(payload: bytes, codec: int, records: int = 3, base_offset: int = 0) -> bytes:
    """A v2 batch whose compressed records are `payload`, with a valid CRC (a producer can send this)."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(records):
        builder.append(timestamp=1_800_000_000_000, key=None, value=b"x", headers=[])
    builder.close()
    raw = bytearray(builder.buffer()[:_RECORDS_AT]) + payload
    struct.pack_into(">q", raw, 0, base_offset)
    struct.pack_into(">i", raw, _LENGTH_AT, len(raw) - 12)
    struct.pack_into(">h", raw, _ATTRIBUTES_AT, codec)
    struct.pack_into(">I", raw, _CRC_AT, calc_crc32c(bytes(raw[_ATTRIBUTES_AT:])))
    return bytes(raw)


@pytest.mark.parametrize("codec", list(BOMBS), ids=["gzip", "lz4"])
@pytest.mark.parametrize("reader", [LeanPartitionRecords, GuardedPartitionRecords], ids=["lean", "kafka-python"])
def test_a_decompression_bomb_is_refused_within_the_bound(monkeypatch, reader, codec):
    limit = 4 * MiB
    monkeypatch.setattr(record_batches, "MAX_BATCH_BYTES", limit)
    raw = _batch_around(BOMBS[codec](128 * MiB), codec, records=3, base_offset=40)
    assert len(raw) < 600_000  # 128 MiB of zeros: a small message
    part = reader(40, TP, MemoryRecords(raw), check_crcs=True)
    tracemalloc.start()
    try:
        with pytest.raises(MalformedBatch) as raised:
            part.take(10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit + 4 * MiB, f"peak {peak / MiB:.0f} MiB while reading a bomb batch"
    assert "BatchTooLarge" in raised.value.reason and f"more than {limit} bytes" in raised.value.reason
    assert (raised.value.first_offset, raised.value.next_offset) == (40, 43)  # the whole batch is skipped
    assert raised.value.raw == raw
    assert not part  # drained


@pytest.mark.parametrize("reader", [LeanPartitionRecords, GuardedPartitionRecords], ids=["lean", "kafka-python"])
def test_a_compressed_batch_under_the_bound_reads_as_before(monkeypatch, reader):
    values = [b'{"i": %d, "pad": "%s"}' % (i, b"p" * 900) for i in range(2_000)]  # ~1.8 MB decompressed
    monkeypatch.setattr(record_batches, "MAX_BATCH_BYTES", 2 * MiB)
    for codec in (GZIP, LZ4):
        builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 24)
        for value in values:
            builder.append(timestamp=1_800_000_000_000, key=None, value=value, headers=[])
        builder.close()
        records = reader(0, TP, MemoryRecords(bytes(builder.buffer())), check_crcs=True).take(None)
        assert [r.value for r in records] == values


def test_a_legacy_compressed_message_is_bounded_too(monkeypatch):
    builder = MemoryRecordsBuilder(magic=1, compression_type=GZIP, batch_size=1 << 24)
    for i in range(300):
        builder.append(timestamp=1_800_000_000_000, key=None, value=b"v" * 10_000)
    builder.close()
    raw = bytes(builder.buffer())
    assert len(GuardedPartitionRecords(0, TP, MemoryRecords(raw), check_crcs=True).take(None)) == 300
    monkeypatch.setattr(record_batches, "MAX_BATCH_BYTES", 1 * MiB)
    with pytest.raises(MalformedBatch, match="BatchTooLarge"):
        GuardedPartitionRecords(0, TP, MemoryRecords(raw), check_crcs=True).take(None)


@pytest.mark.parametrize("codec, compress", [(GZIP, gzip.compress), (LZ4, lz4.frame.compress)], ids=["gzip", "lz4"])
def test_the_bound_is_exact_and_streams_in_chunks(codec, compress):
    data = bytes(range(256)) * 20_000  # 5 MB: several output chunks
    assert decompress_bounded(codec, compress(data), len(data)) == data
    with pytest.raises(BatchTooLarge):
        decompress_bounded(codec, compress(data), len(data) - 1)
    with pytest.raises(CorruptRecordError):  # cut short: not the whole stream
        decompress_bounded(codec, compress(data)[:-100], len(data))


def test_several_gzip_members_are_read_as_gzip_reads_them():
    two = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 1000)
    assert decompress_bounded(GZIP, two, 2000) == gzip.decompress(two)
    with pytest.raises(BatchTooLarge):
        decompress_bounded(GZIP, two, 1999)


def test_zstd_is_bounded():
    import zstandard  # a base dependency: every Kafka codec is read
    data = b"z" * 3_000_000
    two_frames = zstandard.ZstdCompressor().compress(data) + zstandard.ZstdCompressor().compress(b"tail")
    assert decompress_bounded(ZSTD, two_frames, len(data) + 4) == data + b"tail"
    with pytest.raises(BatchTooLarge):
        decompress_bounded(ZSTD, two_frames, len(data))


def test_snappy_blocks_are_checked_before_they_are_decompressed():
    import snappy
    from kafka.codec import snappy_encode

    data = b"s" * 100_000
    for encoded in (snappy.compress(data), snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)):
        assert decompress_bounded(SNAPPY, encoded, len(data)) == data
        with pytest.raises(BatchTooLarge):
            decompress_bounded(SNAPPY, encoded, len(data) - 1)


def test_the_default_bound_is_documented():
    assert record_batches.MAX_BATCH_BYTES == defaults.COLLECTOR_MAX_BATCH_BYTES == 64 * MiB
