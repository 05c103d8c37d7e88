"""Record-batch decompression with a bound on the output, for the collector's record readers.

kafka-python decompresses a batch whole, in one call, whatever it expands to: a 131 KB gzip
batch of zeros became 134 MB (394 MB peak with its copies), and at a broker's 1 MB message
size a batch can expand to gigabytes, so one hostile producer could have the collector killed
for memory, again at every restart, on the same offset. `decompress_bounded` streams each
codec through its library's incremental decoder and stops at `limit` bytes of output with
`BatchTooLarge`, so a batch costs at most `limit` bytes (plus one chunk) however it was made:

* gzip: `zlib.decompressobj` with `max_length` (several gzip members, as `gzip` reads them);
* lz4 (frame format, what Kafka writes): `lz4.frame.LZ4FrameDecompressor` with `max_length`;
* zstd: `zstandard`'s stream reader (across frames), read in chunks;
* snappy (raw, or xerial-framed blocks): each block states its decompressed length in its
  preamble, which is checked before the block is decompressed.

zstd and snappy need their optional libraries, as in kafka-python; without them a batch is
refused with kafka-python's `UnsupportedCodecError`.
"""
from __future__ import annotations

import struct
import zlib
from typing import Callable

from kafka.errors import CorruptRecordError, UnsupportedCodecError

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
_CHUNK = 1 << 20  # output per step: the overshoot past the limit is at most this
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16


class BatchTooLarge(CorruptRecordError):
    """A record batch that decompresses to more than the collector reads of one batch."""

    def __init__(self, limit: int):
        super().__init__(f"the record batch decompresses to more than {limit} bytes, the collector's limit "
                         f"per batch (COLLECTOR_MAX_BATCH_BYTES)")
        self.limit = limit


class _Output:
    """Decompressed chunks, refused as soon as they pass the limit."""

    __slots__ = ("chunks", "size", "limit")

    def __init__(self, limit: int):
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit

    @property
    def room(self) -> int:
        """How much more to ask for: one byte past the limit tells an over-long batch from an exact one."""
        return min(_CHUNK, self.limit - self.size + 1)

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            self.chunks.clear()
            raise BatchTooLarge(self.limit)
        if chunk:
            self.chunks.append(chunk)

    def joined(self) -> bytes:
        return b"".join(self.chunks)


def decompress_bounded(codec: int, data: bytes | bytearray | memoryview, limit: int) -> bytes:
    """`data` decompressed with Kafka codec `codec` (1 gzip, 2 snappy, 3 lz4, 4 zstd); `BatchTooLarge` past `limit`."""
    decoder = _DECODERS.get(codec)
    if decoder is None:
        raise UnsupportedCodecError(f"Unrecognized compression type: {codec}")
    out = _Output(limit)
    decoder(bytes(data), out)
    return out.joined()


def _gzip(data: bytes, out: _Output) -> None:
    while data:
        stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not stream.eof:
            room = out.room
            chunk = stream.decompress(data, room)
            out.add(chunk)
            data = stream.unconsumed_tail
            if not data and len(chunk) < room:  # all input read and nothing held back: the stream ends early
                break
        if not stream.eof:
            raise CorruptRecordError("the gzip stream of the record batch ends early")
        data = stream.unused_data  # another gzip member follows (gzip.decompress reads them all)


def _lz4(data: bytes, out: _Output) -> None:
    try:
        import lz4.frame
    except ImportError as error:
        raise UnsupportedCodecError("Libraries for lz4 compression codec not found") from error
    stream = lz4.frame.LZ4FrameDecompressor()  # one frame, as lz4.frame.decompress (kafka-python's) reads
    out.add(stream.decompress(data, max_length=out.room))
    while not stream.eof and not stream.needs_input:  # more output is held back for an empty call
        out.add(stream.decompress(b"", max_length=out.room))
    if not stream.eof:
        raise CorruptRecordError("the lz4 frame of the record batch ends early")


def _zstd(data: bytes, out: _Output) -> None:
    try:
        import zstandard
    except ImportError as error:
        raise UnsupportedCodecError("Libraries for zstd compression codec not found") from error
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(out.room)
            if not chunk:
                return
            out.add(chunk)


def _snappy(data: bytes, out: _Output) -> None:
    try:
        import snappy
    except ImportError as error:
        raise UnsupportedCodecError("Libraries for snappy compression codec not found") from error
    blocks = [data]
    if data[:len(_XERIAL_MAGIC)] == _XERIAL_MAGIC and len(data) > _XERIAL_HEADER:
        blocks, pos = [], _XERIAL_HEADER
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            if size < 0 or pos + 4 + size > len(data):
                raise CorruptRecordError("a snappy block of the record batch runs past its end")
            blocks.append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
    for block in blocks:
        if _snappy_length(block) > out.limit - out.size:  # before decompressing it: the preamble says its size
            raise BatchTooLarge(out.limit)
        out.add(snappy.decompress(block))


def _snappy_length(block: bytes) -> int:
    """The decompressed length a raw snappy block states first (a little-endian base-128 varint)."""
    length = shift = 0
    for byte in block[:5]:
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
        shift += 7
    raise CorruptRecordError("a snappy block of the record batch has no valid length")


_DECODERS: dict[int, Callable[[bytes, _Output], None]] = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
