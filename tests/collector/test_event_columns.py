"""The columnar decoder: it takes only batches the per-event path accepts, and folds them to the same states.

Pure computation (no broker, no store): `InferenceFolder` with the columnar path and with it switched off
must hand over identical window states, predictions and counts; a batch with any message the per-event path
would dead-letter, or that pyarrow reads more leniently than JSON, must be refused whole.
"""
from __future__ import annotations

import time

import uuid

import numpy as np
import orjson
import pandas as pd
import pytest

import driftline.collector.folding as folding
from driftline.collector.folding import FolderSetup, InferenceFolder
from driftline.collector.labels import StoredAhead
from driftline.baseline import compute_baseline
from driftline.collector.event_columns import parse_inference_columns
from driftline.events import INFERENCE_SCHEMA, rfc3339

# Fixed for the session, on an hour boundary, two days in the past: the collector dead-letters
# events stamped more than COLLECTOR_MAX_FUTURE_SECONDS ahead of its clock.
T0_MS = (int(time.time() * 1000) - 48 * 3_600_000) // 3_600_000 * 3_600_000
MODEL = "columns-model"


def _event(i: int, ts_ms: int | None = None, model: str = MODEL, version: str = "1", **extra) -> dict:
    rng = np.random.default_rng(i)
    ts_ms = T0_MS + 10 * i if ts_ms is None else ts_ms
    doc = {"schema": INFERENCE_SCHEMA, "event_id": uuid.uuid4().hex, "request_id": f"r-{uuid.uuid4().hex}",
           "ts": rfc3339(ts_ms), "model": model, "version": version,
           "features": {"x": float(rng.normal()), "n": int(rng.integers(0, 9)), "color": ["red", "blue"][i % 2],
                        "flag": bool(i % 3)},
           "prediction": float(rng.random()), "latency_ms": {"total": 2.5 + i % 5, "queue": 0.5, "compute": 2.0},
           "status": "ok", "batch_size": 1 + i % 4, "cache_hit": i % 5 == 0}
    doc.update(extra)
    return doc


def _encode(docs: list[dict]) -> list[bytes]:
    return [orjson.dumps(doc) for doc in docs]


def _baseline():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=3_000), "n": rng.integers(0, 9, 3_000).astype(float),
                          "color": rng.choice(["red", "blue", "green"], 3_000), "flag": rng.random(3_000) < 0.5})
    return compute_baseline(frame, predictions=rng.random(3_000))


def _fold(batches: list[list[bytes]], columnar: bool, baseline=None, monkeypatch=None):
    folder = InferenceFolder("driftline.inference", 0, FolderSetup(60_000, 10_000, 50),
                             baseline_for=lambda model, version: baseline, stored_watermark=lambda model, version: None)
    if not columnar:
        monkeypatch.setattr(folding, "parse_inference_columns", lambda values, max_ts_ms=None: None)
    taken = []
    for batch in batches:
        folder.process(list(range(len(batch))), batch)
        taken.append(folder.take())
    monkeypatch.undo()
    return taken


def _assert_same(columnar, per_event):
    for mine, theirs in zip(columnar, per_event):
        assert (mine.valid, mine.late, mine.duplicates) == (theirs.valid, theirs.late, theirs.duplicates)
        assert mine.windows.keys() == theirs.windows.keys()
        for key, partial in mine.windows.items():
            other = theirs.windows[key]
            assert (partial.events, partial.late_events) == (other.events, other.late_events)
            assert partial.state.to_bytes() == other.state.to_bytes(), key
        assert mine.predictions == theirs.predictions
        assert mine.watermarks == theirs.watermarks
        assert mine.dead_letters == theirs.dead_letters == []


def _valid_batches() -> dict[str, list[list[bytes]]]:
    plain = [_event(i) for i in range(300)]
    late = [_event(i, ts_ms=T0_MS + 200_000 + i) for i in range(50)] + [_event(i, ts_ms=T0_MS + i) for i in range(50)]
    repeated = [_event(i) for i in range(40)]
    return {
        "one window": [_encode(plain)],
        "several polls, windows and late events": [_encode(plain[:150]), _encode(late), _encode(plain[150:])],
        "epoch-ms times and extra fields": [_encode([_event(i, ts=T0_MS + i, tags=None, entity_id="e", device="cpu",
                                                            inputs={"age": 30 + i, "region": None}, note={"a": [1]})
                                                     for i in range(60)])],
        "class-label predictions, extra latency part": [_encode(
            [_event(i, prediction=["yes", "no"][i % 2], latency_ms={"total": 3.0, "queue": 1.0, "gpu": 0.5})
             for i in range(60)])],
        "two models and versions interleaved": [_encode([_event(i, model=f"m{i % 2}", version=str(i % 3))
                                                          for i in range(90)])],
        "duplicates inside and across polls, id generations turning over": [
            _encode(repeated[:30] + repeated[:5]), _encode(repeated[20:40]), _encode([_event(i) for i in range(45)])],
        "no request ids": [_encode([{k: v for k, v in _event(i).items() if k != "request_id"} for i in range(30)])],
    }


@pytest.mark.parametrize("with_baseline", [False, True], ids=["unbinned", "baseline"])
@pytest.mark.parametrize("case", list(_valid_batches()))
def test_columnar_path_folds_exactly_like_the_per_event_path(case, with_baseline, monkeypatch):
    batches = _valid_batches()[case]
    assert all(parse_inference_columns(batch) is not None for batch in batches), "the columnar path refused it"
    baseline = _baseline() if with_baseline else None
    _assert_same(_fold(batches, True, baseline, monkeypatch), _fold(batches, False, baseline, monkeypatch))


def _refused() -> dict[str, bytes]:
    good = _event(1)
    raw = orjson.dumps(good)

    def doc(**changes) -> bytes:
        return orjson.dumps({**good, "event_id": uuid.uuid4().hex, **changes})

    def without(name) -> bytes:
        return orjson.dumps({k: v for k, v in good.items() if k != name})

    return {
        # what the per-event path dead-letters
        "broken JSON": raw[: len(raw) // 2], "binary garbage": bytes(range(256)), "empty": b"", "tombstone": None,
        "invalid UTF-8": raw.replace(MODEL.encode(), MODEL.encode() + b"\xff"), "array": b"[1, 2]",
        "missing schema": without("schema"), "other schema": doc(schema="driftline.inference/v9"),
        "event_id a number": doc(event_id=7), "empty model": doc(model=""), "version a number": doc(version=3),
        "ts not a time": doc(ts="yesterday"), "ts in seconds": doc(ts=1_800_000_000),
        "features a list": doc(features=[1]), "feature an object": doc(features={"x": {"y": 1}}),
        "missing prediction": without("prediction"), "empty probabilities": doc(prediction=[]),
        "missing latency total": doc(latency_ms={"queue": 1.0}), "negative latency": doc(latency_ms={"total": -1.0}),
        "status null": doc(status=None), "unknown status": doc(status="meh"), "batch_size zero": doc(batch_size=0),
        "cache_hit a string": doc(cache_hit="yes"), "tag not a string": doc(tags={"team": 7}),
        "model too long for the store": doc(model="m" * 201), "NUL in the model": doc(model="a\x00b"),
        "huge": doc(inputs={"blob": "y" * (1 << 20)}), "null latency part": doc(latency_ms={"total": 1.0, "queue": None}),
        # JSON that pyarrow reads but orjson refuses
        "NaN literal": raw.replace(b'"prediction":', b'"prediction":NaN,"p":'),
        "Infinity in an unknown field": raw[:-1] + b',"extra":[1.0,-Infinity]}',
        "two objects on one line": raw + b" " + raw,
        "a space before the object": b" " + raw, "a space after it": raw + b" ", "a bytearray": bytearray(raw),
        "pretty-printed over lines": orjson.dumps(good, option=orjson.OPT_INDENT_2),
        # valid, but only the per-event path can tell absent from null, or names the type change
        "a null feature": doc(features={**good["features"], "x": None}),
        "a feature missing": doc(features={k: v for k, v in good["features"].items() if k != "x"}),
        "a feature changing type": doc(features={**good["features"], "x": "high"}),
        "a key twice": raw[:-1] + b',"model":"' + MODEL.encode() + b'"}',
        "probabilities": doc(prediction=[0.2, 0.8]),
        "status error": doc(status="error", error="boom"),
        "ts with an offset": doc(ts="2027-01-15T08:00:00.000+00:00"),
    }


@pytest.mark.parametrize("kind", list(_refused()))
def test_a_batch_with_any_message_the_columns_cannot_vouch_for_is_refused(kind):
    valid = _encode([_event(i) for i in range(20)])
    assert parse_inference_columns(valid) is not None
    assert parse_inference_columns(valid[:10] + [_refused()[kind]] + valid[10:]) is None


def test_a_refused_batch_still_dead_letters_only_the_bad_message(monkeypatch):
    valid = _encode([_event(i) for i in range(20)])
    batch = valid[:10] + [_refused()["negative latency"], _refused()["a null feature"]] + valid[10:]
    (delta,) = _fold([batch], True, None, monkeypatch)
    assert delta.valid == 21 and [letter.offset for letter in delta.dead_letters] == [10]


def test_a_failing_columnar_decoder_falls_back_to_the_per_event_path(monkeypatch, caplog):
    """A bug in the columnar path must not stop the collector on the same batch after every restart."""
    def broken(values):
        raise RuntimeError("boom")

    batch = _encode([_event(i) for i in range(20)]) + [_refused()["negative latency"]]
    expected = _fold([batch], False, None, monkeypatch)
    monkeypatch.setattr(folding, "parse_inference_columns", broken)
    folder = InferenceFolder("driftline.inference", 0, FolderSetup(60_000, 10_000, 50),
                             baseline_for=lambda model, version: None, stored_watermark=lambda model, version: None)
    folder.process(list(range(len(batch))), batch)
    folder.process(list(range(len(batch))), [orjson.dumps({**orjson.loads(m), "event_id": uuid.uuid4().hex})
                                             if i < 20 else m for i, m in enumerate(batch)])
    first = folder.take()
    assert first.valid == 2 * expected[0].valid == 40 and len(first.dead_letters) == 2
    assert sum("columnar decoder failed" in r.message for r in caplog.records) == 1  # said once, not per batch


def test_a_store_that_fails_gets_the_predictions_through_the_flush_and_is_tried_again_later(monkeypatch):
    calls = []

    def store_predictions(rows):
        calls.append(len(rows))
        if len(calls) == 1:
            raise ConnectionError("store down")
        return StoredAhead({(rows[0][1], rows[0][0])}, [])  # the first one's label was waiting

    folder = InferenceFolder("driftline.inference", 0, FolderSetup(60_000, 10_000, 500),
                             baseline_for=lambda model, version: None, stored_watermark=lambda model, version: None,
                             store_predictions=store_predictions)
    docs = [_event(i, request_id=f"r{i}") for i in range(30)]
    folder.process(list(range(10)), _encode(docs[:10]))
    first = folder.take()  # the insert fails: the flush gets the rows
    assert calls == [10] and first.stored_predictions == 0 and sorted(first.predictions) == sorted(
        (MODEL, f"r{i}") for i in range(10))
    assert first.predictions[(MODEL, "r3")].prediction == docs[3]["prediction"]
    folder.process(list(range(10, 20)), _encode(docs[10:20]))
    second = folder.take()  # within the retry delay: not tried, straight to the flush
    assert calls == [10] and sorted(second.predictions) == sorted((MODEL, f"r{i}") for i in range(10, 20))
    monkeypatch.setattr(folding.time, "monotonic", lambda: float("inf"))
    folder.process(list(range(20, 30)), _encode(docs[20:30]))
    third = folder.take()  # tried again: stored ahead, the waiting label reported
    assert calls == [10, 10] and (third.stored_predictions, third.predictions, third.labels_waiting) == (10, {}, {(MODEL, "r20")})


def test_a_shadow_answer_is_counted_in_its_window_but_keeps_no_label_join_row(monkeypatch):
    """A shadow event shares its production twin's request id: the label belongs to the answer returned."""
    docs = []
    for i in range(20):
        production = _event(i, role="production")
        docs += [production, _event(i, version="2", role="shadow", request_id=production["request_id"])]
    for columnar in (True, False):
        [delta] = _fold([_encode(docs)], columnar, monkeypatch=monkeypatch)
        assert delta.valid == 40
        assert {key.version for key in delta.windows} == {"1", "2"}
        assert set(delta.predictions) == {(doc["model"], doc["request_id"]) for doc in docs}
        assert {row.version for row in delta.predictions.values()} == {"1"}
        # the shadow's window samples the requests production's does (keyed by request id): they pair up
        samples = {key.version: [r["request_id"] for r in partial.state.sample] for key, partial in delta.windows.items()}
        assert samples["1"] == samples["2"] and len(samples["1"]) == 20
    assert parse_inference_columns(_encode(docs)).roles == ["production", "shadow"] * 20
