"""The flush transaction on SQLite and PostgreSQL: offsets fence, atomicity, label joins."""
from __future__ import annotations

import orjson
import pytest
from sqlalchemy import func, select, update

from driftline.collector.dead_letters import DeadLetterRow
from driftline.collector.flush import Fenced, FlushSetup, PartitionFlush, flush
from driftline.collector.labels import LabelRow, PredictionRow, label_row_partition, prediction_values, segment_texts
from driftline.collector.store import StoredOffset, insert_predictions, unjoined_labels
from driftline.collector.windows import PartitionWindows
from driftline.config import TOPIC_INFERENCE, TOPIC_LABELS
from driftline.events import EventError, parse_inference
from driftline.segments import NULL_KEY, OTHER_KEY, SegmentSpec
from driftline.store import db as store_db
from driftline.store.models import ConsumerOffset, DeadLetter, LabelRecord, PredictionRecord, WindowStateRecord
from driftline.window_state import EventBatch, WindowState

W = 60_000
BASE = 1_800_000_000_000


def _event(i: int, ts: int, model: str = "m") -> object:
    return parse_inference(
        b'{"schema":"driftline.inference/v1","event_id":"e%d","request_id":"r%d","ts":%d,"model":"%s",'
        b'"version":"1","features":{"x":%d},"prediction":%s,"latency_ms":{"total":2.0}}'
        % (i, i, ts, model.encode(), i, b"0.9" if i % 2 else b"0.1"))


def _part(partition: int, expected: StoredOffset | None, next_offset: int, events: list = (), topic=TOPIC_INFERENCE,
          letters: list = (), predictions: dict | None = None, labels: dict | None = None) -> PartitionFlush:
    windows = PartitionWindows(W, 30_000)
    if events:
        windows.fold("m", "1", EventBatch.from_events(list(events)), None, None)
    row = partition if topic == TOPIC_INFERENCE else label_row_partition(partition)
    return PartitionFlush(topic, partition, row, expected, next_offset, "tid-1", windows.windows, list(letters),
                          predictions or {}, labels or {})


def _flush(url: str, parts: list[PartitionFlush], group: str = "g", sweep: bool = False):
    return flush(FlushSetup(store_db.get_engine(url), group, W, lambda m, v: None), parts, now_ms=BASE + 999,
                 sweep=sweep)


def _count(url: str, model) -> int:
    with store_db.session_scope(url) as session:
        return int(session.scalar(select(func.count()).select_from(model)))


def _letter(offset: int) -> DeadLetterRow:
    return DeadLetterRow.from_error(TOPIC_INFERENCE, 0, offset, b"{nope", EventError("not valid UTF-8 JSON"))


def test_a_collector_that_lost_its_partition_is_fenced_and_writes_nothing(db_url):
    first = _part(0, None, 10, [_event(i, BASE + i) for i in range(10)], letters=[_letter(3)])
    assert _flush(db_url, [first]).events == 10
    # A second collector that also believes it starts from scratch (a stale assignment):
    stale = _part(0, None, 12, [_event(i, BASE + i) for i in range(12)], letters=[_letter(4)])
    with pytest.raises(Fenced) as info:
        _flush(db_url, [stale])
    assert info.value.partitions == [(TOPIC_INFERENCE, 0)]
    # ... and one that resumed from an offset the owner has moved since:
    owner_moves = _part(0, StoredOffset(10, "tid-1"), 20, [_event(i, BASE + i) for i in range(10, 20)])
    _flush(db_url, [owner_moves])
    late = _part(0, StoredOffset(10, "tid-1"), 15, [_event(i, BASE + i) for i in range(10, 15)])
    with pytest.raises(Fenced):
        _flush(db_url, [late])
    with store_db.session_scope(db_url) as session:
        assert session.scalar(select(func.sum(WindowStateRecord.events))) == 20
        assert session.scalar(select(ConsumerOffset.next_offset)) == 20
    assert _count(db_url, DeadLetter) == 1


def test_the_fence_also_checks_which_log_the_offset_belongs_to(db_url):
    _flush(db_url, [_part(0, None, 5, [_event(i, BASE + i) for i in range(5)])])
    other_log = StoredOffset(5, "tid-0")  # same number, another incarnation of the topic
    with pytest.raises(Fenced):
        _flush(db_url, [_part(0, other_log, 9, [_event(i, BASE + i) for i in range(4)])])
    with store_db.session_scope(db_url) as session:
        assert session.scalar(select(func.sum(WindowStateRecord.events))) == 5


def test_offsets_and_data_commit_together_or_not_at_all(db_url):
    _flush(db_url, [_part(0, None, 3, [_event(i, BASE + i) for i in range(3)])])
    # A real failure in the middle of the transaction: the row's stored blob is corrupt,
    # so merging into it raises after the offsets and dead letters were already written.
    with store_db.session_scope(db_url) as session:
        session.execute(update(WindowStateRecord).values(state=b"not a window state"))
    part = _part(0, StoredOffset(3, "tid-1"), 6, [_event(i, BASE + i) for i in range(3, 6)], letters=[_letter(5)])
    with pytest.raises(ValueError):
        _flush(db_url, [part])
    with store_db.session_scope(db_url) as session:
        assert session.scalar(select(ConsumerOffset.next_offset)) == 3
        assert session.scalar(select(WindowStateRecord.events)) == 3
    assert _count(db_url, DeadLetter) == 0


def test_window_rows_merge_across_flushes_and_partitions(db_url):
    _flush(db_url, [_part(0, None, 2, [_event(0, BASE), _event(1, BASE + W)]),
                    _part(1, None, 1, [_event(2, BASE + 1)])])
    _flush(db_url, [_part(0, StoredOffset(2, "tid-1"), 3, [_event(3, BASE + 2)])])
    with store_db.session_scope(db_url) as session:
        got = {(r.window_start_ms, r.partition): (r.events, WindowState.from_bytes(r.state).features["x"].total)
               for r in session.scalars(select(WindowStateRecord))}
    assert got == {(BASE, 0): (2, 0 + 3), (BASE, 1): (1, 2), (BASE + W, 0): (1, 1)}


def _pred(i: int, model: str = "m") -> PredictionRow:
    return PredictionRow(f"r{i}", model, "1", BASE + i, BASE, 0.9 if i % 2 else 0.1)


def _label(i: int, value: int, model: str = "m") -> LabelRow:
    return LabelRow(f"r{i}", model, value, BASE + 10_000)


def _keyed(rows) -> dict:
    """Rows keyed as the collector keys them: by (model, request id)."""
    return {row.key: row for row in rows}


def _label_counts(url: str) -> dict[int, tuple[int, int]]:
    with store_db.session_scope(url) as session:
        return {r.partition: (r.events, WindowState.from_bytes(r.state).labels.n)
                for r in session.scalars(select(WindowStateRecord))}


def test_labels_join_whichever_arrives_first_and_count_once(db_url):
    # r0, r1: predictions first; r2: label first; r3: both in one flush; r4: a label for another model
    _flush(db_url, [_part(0, None, 4, predictions=_keyed(_pred(i) for i in (0, 1))),
                    _part(1, None, 2, topic=TOPIC_LABELS, labels=_keyed([_label(2, 0), _label(4, 1, "other")]))])
    _flush(db_url, [_part(0, StoredOffset(4, "tid-1"), 8, predictions=_keyed(_pred(i) for i in (2, 3, 4))),
                    _part(1, StoredOffset(2, "tid-1"), 6, topic=TOPIC_LABELS,
                          labels=_keyed([_label(0, 0), _label(1, 1), _label(3, 1)]))])
    # a re-sent label and a duplicate prediction change nothing
    _flush(db_url, [_part(0, StoredOffset(8, "tid-1"), 9, predictions=_keyed([_pred(0)])),
                    _part(1, StoredOffset(6, "tid-1"), 7, topic=TOPIC_LABELS, labels=_keyed([_label(1, 0)]))])
    with store_db.session_scope(db_url) as session:
        labelled = {p.request_id: p.label for p in session.scalars(select(PredictionRecord))}
        joined = {lab.request_id: lab.joined for lab in session.scalars(select(LabelRecord))}
    assert labelled == {"r0": 0, "r1": 1, "r2": 0, "r3": 1, "r4": None}
    assert joined == {"r0": True, "r1": True, "r2": True, "r3": True, "r4": False}
    counts = _label_counts(db_url)
    # r2 joined by the prediction's partition (0); r0, r1, r3 by the labels' partition (row -2)
    assert counts[0][1] == 1 and counts[label_row_partition(1)] == (0, 3)
    merged = WindowState.merge_all(
        WindowState.from_bytes(r.state) for r in _rows(db_url) if r.window_start_ms == BASE)
    assert merged.labels.n == 4 and merged.labels.task == "binary"
    # binary counts: labels 1 for scores 0.9 (r1, r3), label 0 for 0.1 (r0, r2)
    assert int(merged.labels.positives.sum()) == 2 and int(merged.labels.negatives.sum()) == 2


@pytest.mark.parametrize("stored_labels", [3, 40])
def test_waiting_labels_are_found_whether_fewer_or_more_than_the_predictions(db_url, stored_labels):
    # Fewer waiting labels than predictions: they are listed and intersected; more: looked up by id.
    with store_db.session_scope(db_url) as session:
        session.add_all(LabelRecord(request_id=f"r{i}", model="m", label=i % 2, ts_ms=BASE, joined=i % 3 == 0)
                        for i in range(stored_labels))
    keys = {("m", f"r{i}") for i in range(1, 9)} | {("m", "nobody"), ("other", "r1")}
    with store_db.get_engine(db_url).begin() as conn:
        found = unjoined_labels(conn, keys, lock=False)
        assert unjoined_labels(conn, [("m", "nobody"), ("m", "nor-me")]) == {}
    assert found == {("m", f"r{i}"): i % 2 for i in range(1, min(9, stored_labels)) if i % 3}


def test_predictions_a_decoder_stored_join_the_labels_that_waited_for_them(db_url):
    # A decoder stores r5, r6 ahead of the flush and reports r5's label waiting; the flush joins it.
    engine = store_db.get_engine(db_url)
    _flush(db_url, [_part(1, None, 1, topic=TOPIC_LABELS, labels=_keyed([_label(5, 1)]))])
    with engine.begin() as conn:
        insert_predictions(conn, [_pred(5).values(), _pred(6).values()])
        waiting = set(unjoined_labels(conn, {("m", "r5"), ("m", "r6")}, lock=False))
    assert waiting == {("m", "r5")}
    part = _part(0, None, 2)
    part.stored_predictions, part.labels_waiting = 2, waiting
    result = _flush(db_url, [part])
    assert (result.predictions, result.labels_joined) == (2, 1)
    assert _label_counts(db_url)[0] == (0, 1)
    with store_db.session_scope(db_url) as session:
        assert {p.request_id: p.label for p in session.scalars(select(PredictionRecord))} == {"r5": 1, "r6": None}
        assert session.scalar(select(LabelRecord.joined).where(LabelRecord.request_id == "r5")) is True
    # reported again (the events read again after a crash): joined once only
    part = _part(0, StoredOffset(2, "tid-1"), 3)
    part.stored_predictions, part.labels_waiting = 2, {("m", "r5")}
    assert _flush(db_url, [part]).labels_joined == 0
    assert _label_counts(db_url)[0] == (0, 1)


def _rows(url: str) -> list[WindowStateRecord]:
    with store_db.session_scope(url) as session:
        return list(session.scalars(select(WindowStateRecord)))


def test_the_sweep_joins_pairs_committed_without_seeing_each_other(db_url):
    # Simulate the race: a prediction and its label both stored unjoined.
    _flush(db_url, [_part(0, None, 1, predictions=_keyed([_pred(7)]))])
    with store_db.session_scope(db_url) as session:
        session.add(LabelRecord(request_id="r7", model="m", label=1, ts_ms=BASE, joined=False))
    result = _flush(db_url, [_part(0, StoredOffset(1, "tid-1"), 2, [_event(8, BASE + 8)])], sweep=True)
    assert result.labels_joined == 1
    assert _label_counts(db_url)[0] == (1, 1)
    # and never again
    assert _flush(db_url, [_part(0, StoredOffset(2, "tid-1"), 3, [_event(9, BASE + 9)])], sweep=True).labels_joined == 0


def test_dead_letter_rows_keep_a_bounded_prefix_and_the_full_size(db_url):
    huge = b"x" * 200_000
    letter = DeadLetterRow.from_error(TOPIC_INFERENCE, 2, 41, huge, EventError("too big"))
    flush(FlushSetup(store_db.get_engine(db_url), "g", W, lambda m, v: None, raw_bound=1000),
          [_part(2, None, 42, letters=[letter])], now_ms=BASE)
    with store_db.session_scope(db_url) as session:
        row = session.scalars(select(DeadLetter)).one()
    assert (row.partition, row.offset, row.reason, row.raw_size, len(row.raw)) == (2, 41, "too big", 200_000, 1000)


def test_prune_drops_predictions_and_labels_past_the_retention(db_url):
    from driftline.collector.store import prune

    _flush(db_url, [_part(0, None, 3, predictions=_keyed([PredictionRow("old", "m", "1", BASE - 10, BASE - 60_000, 0.1),
                                                          PredictionRow("new", "m", "1", BASE + 10, BASE, 0.2)])),
                    _part(0, None, 2, topic=TOPIC_LABELS, labels=_keyed([LabelRow("x", "m", 1, BASE - 5),
                                                                         LabelRow("y", "m", 0, BASE + 5)]))])
    assert prune(store_db.get_engine(db_url), cutoff_ms=BASE) == (1, 1)
    with store_db.session_scope(db_url) as session:
        assert session.scalars(select(PredictionRecord.request_id)).all() == ["new"]
        assert session.scalars(select(LabelRecord.request_id)).all() == ["y"]


def _buffer_with(first: int, count: int, next_offset: int):
    """A partition buffer holding `count` folded events, predictions and labels numbered from `first`."""
    from driftline.collector.partition_buffer import PartitionBuffer

    buf = PartitionBuffer(TOPIC_INFERENCE, 0, 0, W, 30_000, ready=True, expected=StoredOffset(5, "tid-1"),
                          next_offset=next_offset, topic_id="tid-1")
    buf.windows.fold("m", "1", EventBatch.from_events([_event(i, BASE + i) for i in range(first, first + count)]),
                     None, None)
    buf.predictions = _keyed(PredictionRow(f"r{i}", "m", "1", BASE + i, BASE, 0.5) for i in range(first, first + count))
    buf.labels = _keyed(LabelRow(f"q{i}", "m", i % 2, BASE + i) for i in range(first, first + count))
    buf.dead_letters = [f"letter-{first}"]
    buf.messages = count
    return buf


def test_a_flush_in_flight_splits_a_buffer_and_a_failed_one_rejoins_it_in_order():
    """`PartitionBuffer.split` hands what was read so far to the flush in flight; `rejoin` takes it back whole."""
    live = _buffer_with(0, 4, next_offset=9)
    frozen = live.split()
    assert (frozen.messages, frozen.next_offset, frozen.expected) == (4, 9, StoredOffset(5, "tid-1"))
    assert live.messages == 0 and not live.predictions and not live.labels and not live.windows.windows
    assert live.next_offset == 9 and live.ready  # reading goes on from where it stood
    # more is read while the flush is in flight, including a duplicate request id and label
    more = _buffer_with(2, 4, next_offset=13)
    live.windows, live.predictions, live.labels = more.windows, more.predictions, more.labels
    live.dead_letters, live.messages, live.next_offset = more.dead_letters, more.messages, 13
    first_r2 = frozen.predictions[("m", "r2")]
    live.predictions[("m", "r2")] = PredictionRow("r2", "m", "1", BASE + 2, BASE, 0.99)  # another event's

    live.rejoin(frozen)  # the flush failed: everything since the last commit is pending again
    assert live.messages == 8 and live.next_offset == 13
    assert live.dead_letters[:2] == ["letter-0", "letter-2"]
    (refused,) = live.dead_letters[2:]  # the second event re-using r2 is refused, r3 (the same event) is not
    assert (refused.field, refused.model, refused.to_topic) == ("request_id", "m", False)
    assert set(live.predictions) == {("m", f"r{i}") for i in range(6)} and live.predictions[("m", "r2")] is first_r2
    assert set(live.labels) == {("m", f"q{i}") for i in range(6)}
    (window,) = live.windows.windows.values()
    assert window.events == 8 and window.state.features["x"].total == sum(range(4)) + sum(range(2, 6))


def test_a_flush_in_flight_that_commits_moves_the_fence_to_where_it_was_split():
    live = _buffer_with(0, 3, next_offset=7)
    live.gathered_watermarks = {("m", "1"): BASE + 2}
    frozen = live.split()
    live.next_offset = 12  # read on meanwhile
    frozen.committed()
    live.committed_as(frozen)
    assert live.expected == StoredOffset(7, "tid-1")  # not 12: what came after the split is not stored yet
    assert live.committed_watermarks == {("m", "1"): BASE + 2}


REGION = SegmentSpec(columns=("region",), max_values=1)  # tracks 3 values per column


def _region_event(i: int, region: object) -> dict:
    return {"event_id": f"e{i}", "request_id": f"r{i}", "ts_ms": BASE + i, "model": "m", "version": "1",
            "features": {"x": float(i), "region": region}, "prediction": 0.9 if i % 2 else 0.1,
            "latency_ms": {"total": 2.0}, "status": "ok"}


def _segmented_part(partition: int, expected: StoredOffset | None, next_offset: int, events: list,
                    with_predictions: bool = True) -> PartitionFlush:
    """An inference partition's flush with [segments] on: its partial states and its prediction rows."""
    batch = EventBatch.from_events(events)
    windows = PartitionWindows(W, 30_000, segments=REGION)
    windows.fold("m", "1", batch, None, None)
    rows = prediction_values("m", "1", [e["request_id"] for e in events], [e["ts_ms"] for e in events],
                             [e["prediction"] for e in events], W, segment_texts(batch, REGION.columns))
    predictions = {(r[1], r[0]): PredictionRow.from_values(r) for r in rows} if with_predictions else {}
    return PartitionFlush(TOPIC_INFERENCE, partition, partition, expected, next_offset, "tid-1", windows.windows, [],
                          predictions, {})


def _segmented_flush(url: str, parts: list[PartitionFlush], sweep: bool = False):
    return flush(FlushSetup(store_db.get_engine(url), "g", W, lambda m, v: None, segments=REGION), parts,
                 now_ms=BASE + 999, sweep=sweep)


def _segment_labels(url: str) -> tuple[int, dict[str, int]]:
    merged = WindowState.merge_all(WindowState.from_bytes(r.state) for r in _rows(url))
    return merged.labels.n, {key: sub.labels.n for key, sub in merged.segments["region"].items() if sub.labels.n}


def test_labels_count_in_their_predictions_segments_whichever_arrives_first(db_url):
    huge = "y" * 5_000
    regions = ["north", "north", "south", "south", None, huge, "\x00nul", "east", "west"]
    events = [_region_event(i, region) for i, region in enumerate(regions)]
    # r2's label comes before its prediction (joined by the prediction's flush, in row 0)
    _segmented_flush(db_url, [_part(1, None, 1, topic=TOPIC_LABELS, labels=_keyed([_label(2, 0)]))])
    _segmented_flush(db_url, [_segmented_part(0, None, 9, events)])
    with store_db.session_scope(db_url) as session:
        kept = {p.request_id: p.segments for p in session.scalars(select(PredictionRecord))}
    assert kept["r0"] == {"region": "north"} and kept["r4"] == {"region": NULL_KEY}
    assert kept["r5"] == {"region": "y" * 100} and kept["r6"] == {"region": "\x00nul"}  # the window state's keys
    # an old prediction row, stored before [segments]: it joins for the whole window only
    with store_db.get_engine(db_url).begin() as conn:
        insert_predictions(conn, [_pred(20).values()])
    labels = _keyed(_label(i, i % 2) for i in (0, 1, 3, 4, 5, 6, 7, 8, 20))
    _segmented_flush(db_url, [_part(1, StoredOffset(1, "tid-1"), 2, topic=TOPIC_LABELS, labels=labels)])
    whole, by_segment = _segment_labels(db_url)
    assert whole == 10 and sum(by_segment.values()) == 9  # every pair once per column, but r20's
    assert by_segment["north"] == 2
    # the label row (no events) tracks 3 values like any state, the largest first (ties: the smaller key)
    label_row = next(WindowState.from_bytes(r.state) for r in _rows(db_url) if r.partition == label_row_partition(1))
    assert label_row.events == 0
    assert {k: s.labels.n for k, s in label_row.segments["region"].items()} == {
        "north": 2, "\x00nul": 1, NULL_KEY: 1, OTHER_KEY: 4}
    inference_row = next(WindowState.from_bytes(r.state) for r in _rows(db_url) if r.partition == 0)
    assert inference_row.segments["region"]["south"].labels.n == 1  # r2, joined when its prediction came


def test_the_sweep_joins_with_the_predictions_segments(db_url):
    _segmented_flush(db_url, [_segmented_part(0, None, 1, [_region_event(7, "north")])])
    with store_db.session_scope(db_url) as session:
        session.add(LabelRecord(request_id="r7", model="m", label=1, ts_ms=BASE, joined=False))
    result = _segmented_flush(db_url, [_segmented_part(0, StoredOffset(1, "tid-1"), 2, [_region_event(8, "south")],
                                                       with_predictions=False)], sweep=True)
    assert result.labels_joined == 1
    assert _segment_labels(db_url) == (1, {"north": 1})


def _letters(url: str) -> list[DeadLetter]:
    with store_db.session_scope(url) as session:
        return list(session.scalars(select(DeadLetter).order_by(DeadLetter.id)))


def _labels_by_model(url: str) -> dict[str, tuple[int, int]]:
    """model -> (labels counted, positives counted) over its window rows."""
    out = {}
    for model in {r.model for r in _rows(url)}:
        merged = WindowState.merge_all(WindowState.from_bytes(r.state) for r in _rows(url) if r.model == model)
        out[model] = (merged.labels.n, int(merged.labels.positives.sum()))
    return out


@pytest.mark.parametrize("labels_first", [False, True])
def test_two_models_scoring_one_request_id_each_keep_their_prediction_label_and_quality(db_url, labels_first):
    # an order scored by fraud (0.9) and by credit (0.1) under the same business id
    fraud, credit = PredictionRow("order-1", "fraud", "1", BASE, BASE, 0.9), PredictionRow(
        "order-1", "credit", "1", BASE + 1, BASE, 0.1)
    predictions = _part(0, None, 2, predictions=_keyed([fraud, credit]))
    labels = _part(1, None, 2, topic=TOPIC_LABELS,
                   labels=_keyed([LabelRow("order-1", "fraud", 1, BASE), LabelRow("order-1", "credit", 0, BASE)]))
    for part in ([labels, predictions] if labels_first else [predictions, labels]):
        _flush(db_url, [part])
    with store_db.session_scope(db_url) as session:
        kept = {(p.model, p.request_id): (p.prediction, p.label) for p in session.scalars(select(PredictionRecord))}
        joined = {(lab.model, lab.request_id): lab.joined for lab in session.scalars(select(LabelRecord))}
    assert kept == {("fraud", "order-1"): (0.9, 1), ("credit", "order-1"): (0.1, 0)}
    assert joined == {("fraud", "order-1"): True, ("credit", "order-1"): True}
    assert _labels_by_model(db_url) == {"fraud": (1, 1), "credit": (1, 0)}  # each model's realized quality
    assert _letters(db_url) == []


def test_a_second_event_reusing_a_request_id_cannot_take_over_the_first(db_url):
    # another client's model posts the guessable id first: it keeps its own row, nothing more
    squatter = PredictionRow("order-7", "squatter", "1", BASE, BASE, 0.5)
    first = PredictionRow("order-7", "fraud", "1", BASE + 1, BASE, 0.9)
    _flush(db_url, [_part(0, None, 2, predictions=_keyed([squatter, first]))])
    # a second fraud event re-using the id, in the next flush and (through another partition) in one flush
    second = PredictionRow("order-7", "fraud", "1", BASE + 5, BASE, 0.1)
    third = PredictionRow("order-7", "fraud", "2", BASE + 6, BASE, 0.2)
    result = _flush(db_url, [_part(0, StoredOffset(2, "tid-1"), 3, predictions=_keyed([second])),
                             _part(2, None, 1, predictions=_keyed([third])),
                             _part(1, None, 1, topic=TOPIC_LABELS, labels=_keyed([LabelRow("order-7", "fraud", 1, BASE)]))])
    assert len(result.refused) == 2 and result.labels_joined == 1
    # the same event read again (after a crash) is no second event: nothing refused
    assert _flush(db_url, [_part(0, StoredOffset(3, "tid-1"), 4, predictions=_keyed([first]))]).refused == []
    # a different label for the same request: the first label stays
    result = _flush(db_url, [_part(1, StoredOffset(1, "tid-1"), 3, topic=TOPIC_LABELS,
                                   labels=_keyed([LabelRow("order-7", "fraud", 0, BASE)]))])
    assert len(result.refused) == 1
    with store_db.session_scope(db_url) as session:
        kept = {(p.model, p.request_id): (p.version, p.ts_ms, p.prediction, p.label)
                for p in session.scalars(select(PredictionRecord))}
        label = session.scalar(select(LabelRecord.label).where(LabelRecord.model == "fraud"))
    assert kept == {("squatter", "order-7"): ("1", BASE, 0.5, None), ("fraud", "order-7"): ("1", BASE + 1, 0.9, 1)}
    assert label == 1
    assert _labels_by_model(db_url)["fraud"] == (1, 1)  # the label counted once, with the first prediction
    letters = _letters(db_url)
    assert [(d.topic, d.field, d.model, d.offset) for d in letters] == [
        (TOPIC_INFERENCE, "request_id", "fraud", -1)] * 2 + [(TOPIC_LABELS, "request_id", "fraud", -1)]
    assert all("already used by an earlier event" in d.reason for d in letters[:2])
    assert sorted(orjson.loads(d.raw)["prediction"] for d in letters[:2]) == [0.1, 0.2]  # the refused rows
    assert "first label is kept" in letters[2].reason


def test_predictions_stored_ahead_refuse_a_second_event_and_report_waiting_labels_by_model(db_url):
    from driftline.collector.store import store_predictions_ahead

    engine = store_db.get_engine(db_url)
    _flush(db_url, [_part(1, None, 1, topic=TOPIC_LABELS, labels=_keyed([_label(5, 1, "a"), _label(6, 1, "b")]))])
    rows = [_pred(5, "a").values(), _pred(5, "b").values()]
    stored = store_predictions_ahead(engine, rows)
    assert stored.waiting == {("a", "r5")} and stored.taken == []
    assert store_predictions_ahead(engine, rows).taken == []  # stored again: a no-op
    other = PredictionRow("r5", "a", "1", BASE + 40, BASE, 0.3).values()
    assert store_predictions_ahead(engine, [other]).taken == [other]
