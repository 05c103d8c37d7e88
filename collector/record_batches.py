"""Kafka record batches read in one tight loop, for kafka-python's fetcher.

kafka-python turns each record of a fetched batch into a `DefaultRecord` through eight calls
of a Python varint decoder, a deserializer call and a size sum, then a `ConsumerRecord`:
about twice the CPU a record this module needs (`bench/collector.py --runs 1:auto
1:auto:kafka-python` compares the two end to end), most of the collector process's CPU with the kafka-python
client. (librdkafka reads batches in C: `--kafka-client confluent`, `driftline.collector.confluent_source`,
which falls back on the guarded reader here for a batch librdkafka cannot get past.) This module keeps
kafka-python's fetcher, group membership and offsets and replaces only the per-record unpacking: `LeanPartitionRecords` reads a v2 batch's records in one loop over the
decompressed bytes, with the one- and two-byte varints (almost every length, delta and
count in practice) decoded inline, and yields the same `ConsumerRecord`s kafka-python does,
field for field (tests/collector/test_record_batches.py compares them over every batch shape).

What the fast loop does not cover goes to kafka-python's own code unchanged: message
formats v0/v1, deserializers, and read-committed isolation (aborted transactions).

Both readers are guarded (`GuardedPartitionRecords`): a batch that cannot be read (a lying
length, varint or record count behind a valid CRC, a bad CRC, undecompressable data, or
data that decompresses to more than `MAX_BATCH_BYTES`) ends the fetch with a `MalformedBatch`
naming the offsets to skip, and the fetch is drained. kafka-python alone leaves the failed
iterator in place and spins on it inside `poll()`, and decompresses a batch whole however
large it grows (`driftline.collector.decompression` streams it to the bound instead).
"""
from __future__ import annotations

import logging
import struct
from typing import Any, Iterator

import kafka.errors as Errors
from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch
from kafka.record.util import decode_varint

from driftline import defaults
from driftline.collector.decompression import LZ4, decompress_bounded

log = logging.getLogger(__name__)

_LOG_APPEND_TIME = 1  # a batch attribute: every record's timestamp is the batch's max timestamp
# Batch framing: base offset int64 + length int32, then (v2) epoch int32, magic int8 at 16, ...,
# last offset delta int32 at 23
_LOG_OVERHEAD, _MAGIC_AT, _V2_LAST_DELTA_AT = 12, 16, 23
# Decompressed bytes read of one record batch at most (read when a batch is decompressed).
MAX_BATCH_BYTES = defaults.COLLECTOR_MAX_BATCH_BYTES


class MalformedBatch(Errors.CorruptRecordError):
    """A fetched record batch that cannot be read (its CRC may be valid): where it lies, and why.

    Raised by `poll()` in place of kafka-python's `CorruptRecordError`, after the records
    before it; `first_offset` is the first offset not delivered, `next_offset` the first one
    after the batch (where reading can go on), `raw` the batch's bytes.
    """

    def __init__(self, topic: str, partition: int, first_offset: int, next_offset: int, reason: str,
                 raw: bytes = b""):
        super().__init__(f"{topic}[{partition}] offsets {first_offset}-{next_offset - 1}: {reason}")
        self.topic, self.partition = topic, partition
        self.first_offset, self.next_offset = first_offset, next_offset
        self.reason, self.raw = reason, raw


class GuardedPartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's reader, with any failure to read a batch ending the fetch as a `MalformedBatch`.

    Without the guard a reading error leaves kafka-python's fetcher holding an exhausted
    record iterator that it never drains: every later `poll()` spins on it at full CPU and
    never returns. Here the fetch is drained and the error names the offsets to skip.
    """

    def __init__(self, fetch_offset: int, tp: Any, records: Any, *args: Any, **kwargs: Any):
        self._raw = getattr(records, "_buffer", b"")  # the fetched bytes, to locate a bad batch in
        super().__init__(fetch_offset, tp, records, *args, **kwargs)

    def take(self, n: int | None = None) -> list[ConsumerRecord]:
        try:
            return super().take(n)
        except MalformedBatch:
            self.drain()  # an exhausted iterator left in place is what made kafka-python spin
            raise

    def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any,
                        value_deserializer: Any) -> Iterator[ConsumerRecord]:
        batches = _Batches(records)
        try:
            yield from self._read(tp, batches, key_deserializer, value_deserializer)
        except Exception as error:  # a lying batch breaks parsing in many ways: all end here
            at = max(self.next_fetch_offset, self.fetch_offset)
            base = batches.current.base_offset if batches.current is not None else None
            first, after, raw = malformed_range(self._raw, at, base)
            raise MalformedBatch(tp.topic, tp.partition, first, after,
                                 f"{type(error).__name__}: {error}", raw) from error

    def _read(self, tp: Any, records: Any, key_deserializer: Any,
              value_deserializer: Any) -> Iterator[ConsumerRecord]:
        return super()._unpack_records(tp, records, key_deserializer, value_deserializer)


class LeanPartitionRecords(GuardedPartitionRecords):
    """`GuardedPartitionRecords` with v2 record batches unpacked by `read_v2_batch`."""

    def _read(self, tp: Any, records: Any, key_deserializer: Any,
              value_deserializer: Any) -> Iterator[ConsumerRecord]:
        if (key_deserializer is not None or value_deserializer is not None
                or self.isolation_level != IsolationLevel.READ_UNCOMMITTED):
            yield from super()._read(tp, records, key_deserializer, value_deserializer)
            return
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise Errors.CorruptRecordError(
                    f"Record batch for partition {self.topic_partition} at offset {batch.base_offset} "
                    f"failed crc check")
            if batch.magic == 2:
                self.leader_epoch = batch.leader_epoch
                if batch.is_control_batch:  # transaction markers are not records for the consumer
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
                unpacked, size, error = read_v2_batch(batch, tp, self.leader_epoch)
                # kafka-python's fetch metrics (not the collector's) count a batch when it is read
                self.records_read += len(unpacked)
                self.bytes_read += size
                for record in unpacked:
                    # Per record, as kafka-python does: a poll may stop inside a batch, and the
                    # consumer's position is this offset when it does.
                    self.next_fetch_offset = record[3] + 1
                    yield record
                if error is not None:  # after the good records before it, as kafka-python does
                    raise error
            else:
                for record, size in _legacy_records(batch, tp, self.leader_epoch, self.check_crcs):
                    self.records_read += 1
                    self.bytes_read += size
                    self.next_fetch_offset = record[3] + 1
                    yield record
            batch = records.next_batch()
        # Format v2 keeps a batch's last offset when compaction removed its last record:
        # fetch from after it, or the same batch comes back forever.
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()


class _Batches:
    """The fetched records, remembering the batch being read (the one to blame when reading fails)."""

    __slots__ = ("records", "current")

    def __init__(self, records: Any):
        self.records = records
        self.current: Any = None

    def next_batch(self) -> Any:
        self.current = None  # a failure inside next_batch has no batch to blame
        batch = self.records.next_batch()
        if batch is not None:  # the same object, decompressing within MAX_BATCH_BYTES (same slots: allowed)
            batch.__class__ = _BOUNDED.get(type(batch), type(batch))
        self.current = batch
        return batch


class _BoundedBatch(DefaultRecordBatch):
    """kafka-python's v2 batch, decompressed within `MAX_BATCH_BYTES` (`BatchTooLarge` past it)."""

    __slots__ = ()

    def _maybe_uncompress(self) -> None:
        if not self._decompressed:
            codec = self.compression_type
            if codec != self.CODEC_NONE:
                self._buffer = decompress_bounded(codec, memoryview(self._buffer)[self._pos:], MAX_BATCH_BYTES)
                self._pos = 0
        self._decompressed = True


class _BoundedLegacyBatch(LegacyRecordBatch):
    """kafka-python's v0/v1 wrapper message, decompressed within `MAX_BATCH_BYTES`."""

    __slots__ = ()

    def _decompress(self, key_offset: int) -> bytes:
        pos = key_offset  # the wrapper's key, then its value: the compressed messages
        key_size = struct.unpack_from(">i", self._buffer, pos)[0]
        pos += self.KEY_LENGTH + max(key_size, 0)
        value_size = struct.unpack_from(">i", self._buffer, pos)[0]
        pos += self.VALUE_LENGTH
        if value_size < 0:
            raise Errors.CorruptRecordError("Value of compressed message is None")
        codec = self.compression_type
        if codec == LZ4 and self._magic == 0:  # Kafka 0.8/0.9's broken lz4 header: needs xxhash, as in kafka-python
            raise Errors.UnsupportedCodecError("lz4 in message format v0 (Kafka 0.8/0.9) is not read")
        return decompress_bounded(codec, self._buffer[pos:pos + value_size], MAX_BATCH_BYTES)


_BOUNDED: dict[type, type] = {DefaultRecordBatch: _BoundedBatch, LegacyRecordBatch: _BoundedLegacyBatch}


def read_v2_batch(batch: Any, tp: Any,
                  leader_epoch: int) -> tuple[list[ConsumerRecord], int, Errors.CorruptRecordError | None]:
    """The records of a (non-control) v2 batch, the sum of their sizes, and the error that ended them.

    Record layout (KIP-98): length varint, attributes int8, timestamp delta varlong, offset
    delta varint, key length varint + key, value length varint + value, header count varint,
    headers. Varints are zigzag-encoded. A record whose fields do not end where its length
    says, or bytes left after the last record, end the records read so far with a
    `CorruptRecordError`, which kafka-python raises at the same record.
    """
    iter(batch)  # decompresses the batch's records in place (lz4, gzip, snappy, zstd: C)
    buf = bytes(batch._buffer)
    pos = batch._pos
    base_offset = batch.base_offset
    timestamp_type = batch.timestamp_type
    log_append_time = batch.max_timestamp if timestamp_type == _LOG_APPEND_TIME else None
    first_timestamp = batch.first_timestamp
    topic, partition = tp.topic, tp.partition
    out: list[ConsumerRecord] = []
    append = out.append
    new_record = tuple.__new__  # the namedtuple without its Python-level __new__: half the cost
    total = 0
    try:
        for _ in range(batch.records_count):
            # Each varint: one byte (< 0x80) or two inline, longer ones through kafka-python.
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                n = (b & 0x7F) | (buf[pos + 1] << 7)
                length = (n >> 1) ^ -(n & 1)
                pos += 2
            else:
                length, pos = decode_varint(buf, pos)
            end = pos + length
            p = pos + 1  # attributes: one byte, unused since v2
            b = buf[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                n = (b & 0x7F) | (buf[p + 1] << 7)
                ts_delta = (n >> 1) ^ -(n & 1)
                p += 2
            else:
                ts_delta, p = decode_varint(buf, p)
            b = buf[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                n = (b & 0x7F) | (buf[p + 1] << 7)
                offset_delta = (n >> 1) ^ -(n & 1)
                p += 2
            else:
                offset_delta, p = decode_varint(buf, p)
            b = buf[p]
            if b == 1:  # -1: no key
                key = None
                key_size = -1
                p += 1
            else:
                key_size, p = decode_varint(buf, p)
                if key_size >= 0:
                    key = buf[p:p + key_size]
                    p += key_size
                else:
                    key = None
            b = buf[p]
            if b < 0x80:
                value_size = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                n = (b & 0x7F) | (buf[p + 1] << 7)
                value_size = (n >> 1) ^ -(n & 1)
                p += 2
            else:
                value_size, p = decode_varint(buf, p)
            if value_size >= 0:
                value = buf[p:p + value_size]
                p += value_size
            else:
                value = None
            if buf[p] == 0:  # no headers
                headers: list[tuple[str, bytes | None]] = []
                header_size = -1
                p += 1
            else:
                headers, header_size, p = _read_headers(buf, p)
            if p != end:
                return out, total, Errors.CorruptRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {p - pos}")
            pos = end
            total += length
            append(new_record(ConsumerRecord, (
                topic, partition, leader_epoch, base_offset + offset_delta,
                log_append_time if log_append_time is not None else first_timestamp + ts_delta,
                timestamp_type, key, value, headers, None, key_size, value_size, header_size)))
    except (IndexError, ValueError) as err:  # ran off the buffer, or a varint beyond 64 bits
        return out, total, Errors.CorruptRecordError(f"Found invalid record structure: {err!r}")
    except Errors.CorruptRecordError as err:  # a negative header count or key size
        return out, total, err
    if pos != len(buf):
        return out, total, Errors.CorruptRecordError(
            f"{len(buf) - pos} unconsumed bytes after all records consumed")
    return out, total, None


def _read_headers(buf: bytes, p: int) -> tuple[list[tuple[str, bytes | None]], int, int]:
    count, p = decode_varint(buf, p)
    if count < 0:
        raise Errors.CorruptRecordError(f"Found invalid number of record headers {count}")
    headers = []
    size = 0
    for _ in range(count):
        key_len, p = decode_varint(buf, p)
        if key_len < 0:
            raise Errors.CorruptRecordError(f"Invalid negative header key size {key_len}")
        key = buf[p:p + key_len].decode("utf-8")
        p += key_len
        value_len, p = decode_varint(buf, p)
        value = None
        if value_len >= 0:
            value = buf[p:p + value_len]
            p += value_len
        headers.append((key, value))
        size += len(key.encode("utf-8")) + (len(value) if value is not None else 0)
    return headers, (size if headers else -1), p


def _legacy_records(batch: Any, tp: Any, leader_epoch: int,
                    check_crcs: bool) -> Iterator[tuple[ConsumerRecord, int]]:
    """Message formats v0 and v1 (brokers and clients before Kafka 0.11), as kafka-python reads them."""
    for record in batch:
        if check_crcs and not record.validate_crc():
            raise Errors.CorruptRecordError(f"Record for partition {tp} at offset {record.offset} "
                                            f"failed crc check")
        key, value = record.key, record.value
        yield (ConsumerRecord(tp.topic, tp.partition, leader_epoch, record.offset, record.timestamp,
                              record.timestamp_type, key, value, record.headers, record.checksum,
                              len(key) if key is not None else -1, len(value) if value is not None else -1, -1),
               record.size_in_bytes)


def use_lean_records(consumer: Any) -> bool:
    """Make a KafkaConsumer's fetcher unpack with `LeanPartitionRecords`; False if it cannot."""
    return use_reader(consumer, LeanPartitionRecords)


def use_reader(consumer: Any, reader: type[GuardedPartitionRecords]) -> bool:
    """Make a KafkaConsumer's fetcher unpack with `reader`; False if it cannot.

    kafka-python builds each fetch's records through `self.PartitionRecords`, so an instance
    attribute replaces the class for this consumer only. If a kafka-python release moves it,
    the consumer keeps its own reader (slower, and unguarded against malformed batches: the
    poll watchdog is then the only way past one) and this says so once.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not isinstance(getattr(fetcher, "PartitionRecords", None), type):
        log.warning("kafka-python's fetcher has no PartitionRecords; records are read by kafka-python's own "
                    "(slower, unguarded) reader")
        return False
    fetcher.PartitionRecords = reader
    return True


def malformed_range(raw: bytes | bytearray | memoryview, at: int,
                    base_offset: int | None = None) -> tuple[int, int, bytes]:
    """The offsets to skip for a batch that failed at offset `at`: (first, first after it, its bytes).

    `base_offset` names the failed batch (None: the one holding `at`). Reads only the framing
    (base offset, length) and, for format v2, the last offset delta. The range starts at `at`
    (records before it were delivered) and ends where the batch says it ends, but never past
    the next batch's base offset, so a lie in the header never skips good batches (the
    collector also cuts it at the log's end). An empty range (first == after) means every
    record of the batch was delivered and reading goes on after it.
    """
    frames: list[tuple[int, int, int, int]] = []  # base offset, next offset, start, end
    pos, size = 0, len(raw)
    while pos + _LOG_OVERHEAD <= size:  # every frame is at least its 12-byte overhead
        base, length = struct.unpack_from(">qi", raw, pos)
        end = pos + _LOG_OVERHEAD + length
        if length < 0 or end > size:
            break
        after = base + 1  # v0/v1: the wrapper's offset is its last message's
        if length >= _V2_LAST_DELTA_AT + 4 - _LOG_OVERHEAD and raw[pos + _MAGIC_AT] == 2:
            after = base + struct.unpack_from(">i", raw, pos + _V2_LAST_DELTA_AT)[0] + 1
        frames.append((base, after, pos, end))
        pos = end
    for i, (base, after, start, end) in enumerate(frames):
        if base != base_offset if base_offset is not None else after <= at:
            continue
        first = max(at, base)
        later = [b for b, *_ in frames[i + 1:] if b > first]
        stop = min(after, later[0]) if later else after
        return first, max(stop, first), bytes(raw[start:end])
    return at, at + 1, b""  # not even framed: one offset at a time
