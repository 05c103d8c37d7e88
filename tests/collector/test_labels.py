"""Labels from driftline.labels joined with predictions and counted in the prediction's window."""
from __future__ import annotations

import pytest

from sqlalchemy import func, select

from driftline.config import TOPIC_LABELS
from driftline.events import encode_event
from driftline.segments import SegmentSpec
from driftline.store import db as store_db
from driftline.store.models import DeadLetter, LabelRecord, PredictionRecord, WindowStateRecord
from driftline.window_state import WindowState
from tests.support.collector_helpers import T0_MS, collector_thread, config, event, events, label, produce
from tests.support.waiting import wait_until


def _labelled(url: str, model: str) -> int:
    with store_db.session_scope(url) as session:
        return int(session.scalar(select(func.count()).select_from(PredictionRecord).where(
            PredictionRecord.model == model, PredictionRecord.labelled_at_ms.is_not(None))))


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
def test_labels_are_joined_whenever_they_arrive_and_counted_once(broker, db_url, unique_id):
    model = f"labels-{unique_id}"
    rid = [f"{unique_id}-{i}" for i in range(120)]
    t0 = T0_MS

    def predictions(ids: range) -> list[bytes]:
        # scores 0.9 / 0.1 alternate; window = t0 .. t0 + 1 min
        return [encode_event(event(model, i, ts_ms=t0 + i, request_id=rid[i], prediction=0.9 if i % 2 else 0.1))
                for i in ids]

    def labels(ids: list[int], value=lambda i: i % 2) -> None:
        # keyed by request id, as driftline.client does: a re-sent label follows the first one
        produce(broker, [encode_event(label(model, rid[i], value(i))) for i in ids],
                keys=[rid[i].encode() for i in ids], topic=TOPIC_LABELS)

    # labels that arrive before their predictions, and labels whose prediction never comes
    labels(list(range(100, 110)))
    produce(broker, [encode_event(label(model, f"{unique_id}-ghost", 1))], topic=TOPIC_LABELS)
    produce(broker, predictions(range(0, 100)))
    with collector_thread(config(broker, db_url)) as collector:
        wait_until(lambda: events(db_url, model) == 100, message="the first predictions")
        # labels after their predictions: 0..49 right (label = i % 2), 50..59 wrong; a re-sent label for 0
        labels(list(range(50)))
        labels(list(range(50, 60)), lambda i: 1 - i % 2)
        labels([0], lambda i: 1)
        produce(broker, predictions(range(100, 120)))
        wait_until(lambda: _labelled(db_url, model) == 70, message="70 labelled predictions")
        wait_until(lambda: not collector._pending(), message="the last flush")

    with store_db.session_scope(db_url) as session:
        rows = session.scalars(select(WindowStateRecord).where(WindowStateRecord.model == model)).all()
        unjoined = session.scalars(select(LabelRecord.request_id).where(LabelRecord.model == model,
                                                                        LabelRecord.joined.is_(False))).all()
        label_of_0 = session.scalar(select(PredictionRecord.label).where(PredictionRecord.request_id == rid[0]))
    assert unjoined == [f"{unique_id}-ghost"]
    assert label_of_0 == 0  # the first label wins; the re-sent one is not counted again
    merged = WindowState.merge_all(WindowState.from_bytes(r.state) for r in rows)
    assert merged.events == 120 and merged.labels.n == 70 and merged.labels.task == "binary"
    # right: 0..49 and 100..109 (60 pairs), wrong: 50..59 (10 pairs); positives are odd i
    positives, negatives = merged.labels.positives, merged.labels.negatives
    high = slice(len(positives) // 2, None)  # score bins above 0.5
    assert int(positives[high].sum()) == 25 + 5 and int(negatives[high].sum()) == 5
    assert int(positives.sum()) + int(negatives.sum()) == 70
    by_partition = {}
    for r in rows:
        by_partition[r.partition] = by_partition.get(r.partition, 0) + WindowState.from_bytes(r.state).labels.n
    # labels after their predictions are counted in label rows (negative partitions, no events) ...
    assert sum(n for p, n in by_partition.items() if p < 0) == 60
    assert all(r.events == 0 for r in rows if r.partition < 0)
    # ... labels that waited for their prediction, in the prediction's partition row
    assert sum(n for p, n in by_partition.items() if p >= 0) == 10


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
def test_with_segments_a_joined_label_counts_in_its_predictions_segment(broker, db_url, unique_id):
    model = f"seg-labels-{unique_id}"
    rid = [f"{unique_id}-{i}" for i in range(40)]
    produce(broker, [encode_event(event(model, i, request_id=rid[i])) for i in range(40)])
    # labels of the blue predictions (even i) before their predictions are read, of the red ones after
    produce(broker, [encode_event(label(model, rid[i], 0)) for i in range(0, 40, 2)], topic=TOPIC_LABELS)
    # a label and its prediction committed at once miss each other on PostgreSQL until the sweep joins them
    cfg = config(broker, db_url, segments=SegmentSpec(columns=("color",)), label_sweep_s=1.0)
    with collector_thread(cfg) as collector:
        wait_until(lambda: events(db_url, model) == 40, message="the predictions")
        produce(broker, [encode_event(label(model, rid[i], 1)) for i in range(1, 40, 2)],
                topic=TOPIC_LABELS)
        wait_until(lambda: _labelled(db_url, model) == 40, message="40 labelled predictions")
        wait_until(lambda: not collector._pending(), message="the last flush")
    with store_db.session_scope(db_url) as session:
        kept = session.scalar(select(PredictionRecord.segments).where(PredictionRecord.request_id == rid[1]))
        rows = session.scalars(select(WindowStateRecord).where(WindowStateRecord.model == model)).all()
    assert kept == {"color": "red"}
    merged = WindowState.merge_all(WindowState.from_bytes(r.state) for r in rows)
    colors = merged.segments["color"]
    assert merged.labels.n == 40 and (colors["red"].labels.n, colors["blue"].labels.n) == (20, 20)
    assert int(colors["red"].labels.positives.sum()) == 20 and int(colors["blue"].labels.negatives.sum()) == 20
    assert (colors["red"].events, colors["blue"].events) == (20, 20)


def test_two_models_scoring_the_same_request_ids_each_join_their_own_labels(broker, db_url, unique_id):
    fraud, credit = f"fraud-{unique_id}", f"credit-{unique_id}"
    rid = [f"{unique_id}-order-{i}" for i in range(20)]
    t0 = T0_MS
    # every order scored by both models, under the same business id
    produce(broker, [encode_event(event(model, i, ts_ms=t0 + i, request_id=rid[i], prediction=score))
                     for i in range(20) for model, score in ((fraud, 0.9), (credit, 0.1))])
    # half the labels before the predictions are read, half after
    fraud_labels = [encode_event(label(fraud, rid[i], 1)) for i in range(20)]
    credit_labels = [encode_event(label(credit, rid[i], 0)) for i in range(20)]
    produce(broker, fraud_labels[:10] + credit_labels[:10], topic=TOPIC_LABELS)
    with collector_thread(config(broker, db_url)) as collector:
        wait_until(lambda: events(db_url, fraud) == 20 and events(db_url, credit) == 20,
                   message="both models' predictions")
        produce(broker, fraud_labels[10:] + credit_labels[10:], topic=TOPIC_LABELS)
        wait_until(lambda: _labelled(db_url, fraud) == 20 and _labelled(db_url, credit) == 20,
                   message="every prediction of both models labelled")
        # a second fraud event re-using an order's id with another score: counted, but its row refused
        produce(broker, [encode_event(event(fraud, 0, ts_ms=t0 + 500, request_id=rid[0], prediction=0.2))])
        wait_until(lambda: events(db_url, fraud) == 21, message="the second event counted in its window")
        wait_until(lambda: not collector._pending(), message="the last flush")

    with store_db.session_scope(db_url) as session:
        first = session.scalar(select(PredictionRecord).where(PredictionRecord.model == fraud,
                                                              PredictionRecord.request_id == rid[0]))
        letters = session.scalars(select(DeadLetter).where(DeadLetter.model == fraud)).all()
        rows = session.scalars(select(WindowStateRecord).where(WindowStateRecord.model.in_((fraud, credit)))).all()
    assert (first.prediction, first.label, first.ts_ms) == (0.9, 1, t0)
    assert [(d.field, d.offset) for d in letters] == [("request_id", -1)]
    assert "already used by an earlier event" in letters[0].reason
    for model, positives in ((fraud, 20), (credit, 0)):  # each model's realized quality from its own labels
        merged = WindowState.merge_all(WindowState.from_bytes(r.state) for r in rows if r.model == model)
        assert merged.labels.n == 20 and int(merged.labels.positives.sum()) == positives
