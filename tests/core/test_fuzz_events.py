"""Property tests: every event decoding path agrees on every generated message, valid or not.

Paths: the precise validator (`validate_inference` after `_decode`), `parse_inference` (its
fast path first), and the columnar decoder the collector tries first
(`parse_inference_columns`, which may only accept what the others accept, with the same values).
"""
from __future__ import annotations

import math
import time

import numpy as np
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftline.event_columns import parse_inference_columns
from driftline.events import EventError, _decode, _fast_inference, parse_inference, validate_inference
from driftline.window_state import EventBatch

NOW_MS = int(time.time() * 1000)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e200, -1e300, 1.7976931348623157e308, 5e-324, 1e50, 1e51]),
    st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1),
)
texts = st.one_of(st.text(max_size=20), st.sampled_from(["", "NaN", "Infinity", "..", "a/b", "x\x00y", "é", "💥"]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3))
names = st.one_of(st.sampled_from(["credit", "m-1.2_x", "3", "../../x", "a b", "", "a..b", ".hidden", "x" * 129]),
                  st.text(max_size=12), st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1))
timestamps = st.one_of(st.integers(min_value=NOW_MS - 10 ** 10, max_value=NOW_MS + 10 ** 10),
                       st.sampled_from(["2026-11-30T12:00:00.123Z", "2026-11-30T12:00:00Z", "yesterday", 1.5e12,
                                        4_102_444_800_000, 946_684_799_999]),
                       values)


safe_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
wild = {"schema": st.sampled_from(["driftline.inference/v2", "x", None]), "event_id": st.one_of(texts, numbers),
        "ts": timestamps, "model": names, "version": names, "features": values,
        "prediction": st.one_of(values, st.lists(numbers, max_size=3)), "latency_ms": values,
        "status": st.sampled_from(["ok", "error", "meh"]), "error": texts, "request_id": st.one_of(texts, numbers),
        "batch_size": numbers, "cache_hit": scalars, "tags": values, "inputs": values}


@st.composite
def documents(draw) -> dict:
    """A valid event (extreme but legal values included), then sometimes one field made wild or dropped."""
    doc = {"schema": "driftline.inference/v1", "event_id": draw(st.uuids()).hex,
           "ts": draw(st.integers(min_value=NOW_MS - 10 ** 9, max_value=NOW_MS)), "model": draw(safe_names),
           "version": draw(st.sampled_from(["1", "2", "v3.1"])),
           "features": draw(st.dictionaries(st.sampled_from(["x", "y", "c", "é"]), scalars, min_size=1, max_size=4)),
           "prediction": draw(st.one_of(numbers, st.sampled_from(["yes", "no"]), st.booleans())),
           "latency_ms": {"total": draw(st.one_of(st.floats(min_value=0, max_value=1e300),
                                                  st.integers(min_value=0, max_value=2 ** 63 - 1)))}}
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(wild)))
        if draw(st.integers(0, 4)) == 0:
            doc.pop(key, None)
        else:
            doc[key] = draw(wild[key])
    return doc


# Text-level mutations JSON encoders never write but a producer can: literals orjson refuses,
# numbers beyond a double or a 64-bit integer, lone surrogates, deep nesting, invalid UTF-8.
MUTATIONS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"123456789012345678901234567890", b'"\\ud800"',
             b'"\\udfff"', b"[" * 600 + b"]" * 600, b'"\xff"', b"1e-400", b"-0", b"[]", b"{}"]


@st.composite
def messages(draw) -> bytes:
    raw = orjson.dumps(draw(documents()))
    if draw(st.integers(0, 2)) == 0:
        target = draw(st.sampled_from([b'"x":', b'"prediction":', b'"total":', b'"ts":', b'"model":']))
        at = raw.find(target)
        if at >= 0:
            start = at + len(target)
            end = start
            depth = 0
            while end < len(raw) and (depth or raw[end:end + 1] not in (b",", b"}")):
                depth += raw[end:end + 1] in (b"[", b"{")
                depth -= raw[end:end + 1] in (b"]", b"}")
                end += 1
            raw = raw[:start] + draw(st.sampled_from(MUTATIONS)) + raw[end:]
    return raw


def _precise(raw: bytes, max_ts_ms: int | None):
    try:
        return validate_inference(_decode(raw), decoded=True, max_ts_ms=max_ts_ms)
    except EventError as error:
        return (error.reason, error.field)


def _fields(event) -> tuple:
    return (event.event_id, event.ts_ms, event.model, event.version, event.features, event.prediction,
            event.latency_ms, event.status, event.request_id)


@SETTINGS
@given(messages(), st.sampled_from([None, NOW_MS + 3_600_000]))
def test_every_decoding_path_agrees_on_every_message(raw, max_ts_ms):
    precise = _precise(raw, max_ts_ms)
    try:
        parsed = parse_inference(raw, max_ts_ms)
    except EventError as error:
        parsed = (error.reason, error.field)
    if isinstance(precise, tuple):
        assert parsed == precise
    else:
        assert not isinstance(parsed, tuple), parsed
        assert _fields(parsed) == _fields(precise)
        fast = _fast_inference(orjson.loads(raw), max_ts_ms)
        assert fast is None or _fields(fast) == _fields(precise)
    columns = parse_inference_columns([raw], max_ts_ms)
    if columns is None:
        return
    assert not isinstance(precise, tuple), f"the columnar path accepted what the validator refuses: {precise}"
    assert (columns.event_ids[0], columns.models[0], columns.versions[0]) == (
        precise.event_id, precise.model, precise.version)
    assert int(columns.batch.event_time_ms[0]) == precise.ts_ms
    assert columns.request_ids[0] == precise.request_id
    _assert_same_columns(columns.batch, EventBatch.from_events([precise]))


def _assert_same_columns(mine: EventBatch, theirs: EventBatch) -> None:
    assert mine.features.keys() == theirs.features.keys()
    for name, column in mine.features.items():
        other = theirs.features[name]
        if column.dtype == np.float64 or other.dtype == np.float64:
            np.testing.assert_array_equal(column.astype(np.float64), other.astype(np.float64))
        else:
            assert column.tolist() == other.tolist()
        assert mine.feature_types[name] == theirs.feature_types[name]
    np.testing.assert_array_equal(np.asarray(mine.prediction, dtype=object).astype(str),
                                  np.asarray(theirs.prediction, dtype=object).astype(str))
    for part in ("total", "queue", "compute"):
        np.testing.assert_array_equal(mine.latency_ms[part], theirs.latency_ms[part])


@SETTINGS
@given(st.lists(messages(), min_size=2, max_size=6))
def test_a_columnar_batch_is_accepted_only_when_every_message_is_valid(raws):
    columns = parse_inference_columns(raws, NOW_MS + 3_600_000)
    if columns is None:
        return
    events = [_precise(raw, NOW_MS + 3_600_000) for raw in raws]
    assert not any(isinstance(e, tuple) for e in events), events
    assert columns.event_ids == [e.event_id for e in events]
    assert all(math.isfinite(v) for column in columns.batch.features.values() if column.dtype == np.float64
               for v in column.tolist())
