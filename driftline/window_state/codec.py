"""The window state's blob: an orjson header with numpy arrays in a raw byte section, zlib-compressed.

Pure encoding: `WindowState.to_bytes`/`from_bytes` build and read the document; this module
only turns a document into bytes and back, refusing non-finite numbers no reader could sum.
"""
from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import numpy as np
import orjson

# the document's layout version, checked when a blob is read; 2 added per-segment sub-states, 3 the token counts
# of generated answers (and the bound on latency parts)
STATE_FORMAT = 3
# formats `from_bytes` reads: a format-1 blob is a state without segments, a format-2 one without token counts
READABLE_FORMATS = (1, 2, 3)
# the first bytes of every blob: anything else is not a window state
MAGIC = b"DLWS"


class WindowStateError(ValueError):
    """A window state that cannot be encoded: it holds a non-finite number (`where` names it)."""

    def __init__(self, where: str):
        super().__init__(f"window state holds a non-finite number at {where}")
        self.where = where


# Top-level entries of a state document that hold plain JSON only (the sample: one small dict
# per event): packed and restored as they are, not walked value by value looking for arrays
# (that walk was most of the cost of `to_bytes`/`from_bytes` on the collector's flush path).
_PLAIN_ENTRIES = frozenset(("sample", "sample_keys"))


def pack_document(doc: Any) -> bytes:
    """orjson header with numpy arrays replaced by references into a raw byte section."""
    arrays: list[np.ndarray] = []

    def strip(value: Any, where: str = "") -> Any:
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise WindowStateError(where)
            arrays.append(np.ascontiguousarray(value))
            return {"__array__": len(arrays) - 1}
        if isinstance(value, dict):
            return {str(k): strip(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            if any(isinstance(v, (dict, list, np.ndarray)) for v in value):
                return [strip(v, f"{where}[{i}]") for i, v in enumerate(value)]
            if any(type(v) is float and not math.isfinite(v) for v in value):
                raise WindowStateError(where)
            return value
        if type(value) is float and not math.isfinite(value):
            raise WindowStateError(where)  # orjson would write null, which no reader can sum
        return value

    header = ({str(k): (v if k in _PLAIN_ENTRIES and not isinstance(v, np.ndarray) else strip(v, str(k)))
               for k, v in doc.items()} if isinstance(doc, dict) else strip(doc))
    layout = []
    offset = 0
    for array in arrays:
        layout.append([array.dtype.str, list(array.shape), offset])
        offset += array.nbytes
    header_bytes = orjson.dumps({"doc": header, "arrays": layout}, option=orjson.OPT_SERIALIZE_NUMPY)
    body = b"".join([struct.pack("<I", len(header_bytes)), header_bytes] + [a.tobytes() for a in arrays])
    return MAGIC + zlib.compress(body, 1)  # level 1: ~5x faster than 6 on the flush path, blobs barely larger


def unpack_document(data: bytes) -> Any:
    if not isinstance(data, (bytes, bytearray, memoryview)) or bytes(data[:4]) != MAGIC:
        raise ValueError("not a driftline window state (bad magic bytes)")
    try:
        body = zlib.decompress(bytes(data[4:]))
        (length,) = struct.unpack_from("<I", body, 0)
        meta = orjson.loads(body[4:4 + length])
    except (zlib.error, struct.error, orjson.JSONDecodeError) as exc:
        raise ValueError(f"corrupt window state blob: {exc}") from None
    raw = memoryview(body)[4 + length:]
    arrays = []
    for dtype, shape, offset in meta["arrays"]:
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if shape else 1
        if offset + count * dt.itemsize > len(raw):
            raise ValueError("corrupt window state blob: array section truncated")
        arrays.append(np.frombuffer(raw, dtype=dt, count=count, offset=offset).reshape(shape).copy())

    def restore(value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and "__array__" in value:
                return arrays[value["__array__"]]
            return {k: restore(v) for k, v in value.items()}
        if isinstance(value, list):
            return [restore(v) for v in value]
        return value

    doc = meta["doc"]
    if isinstance(doc, dict):
        return {k: (v if k in _PLAIN_ENTRIES and not isinstance(v, dict) else restore(v)) for k, v in doc.items()}
    return restore(doc)


def small_uint(counts: np.ndarray) -> np.ndarray:
    """Non-negative counts in the smallest unsigned dtype that holds them (blob size)."""
    top = int(counts.max()) if counts.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.uint64)

