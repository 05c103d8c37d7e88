"""Late events: folded into their own window, counted in late_events, never dropped."""
from __future__ import annotations

from sqlalchemy import select

from driftline.events import encode_event
from driftline.store import db as store_db
from driftline.store.models import WindowStateRecord
from tests.support.collector_helpers import T0_MS, collector_thread, config, event, events, merged, produce
from tests.support.waiting import wait_until

MINUTE = 60_000


def _window_rows(url: str, model: str) -> dict[int, tuple[int, int]]:
    with store_db.session_scope(url) as session:
        return {r.window_start_ms: (r.events, r.late_events)
                for r in session.scalars(select(WindowStateRecord).where(WindowStateRecord.model == model))}


def test_events_of_closed_windows_are_folded_in_and_flagged_late(broker, sqlite_url, unique_id):
    model = f"late-{unique_id}"
    t0 = T0_MS
    key = [unique_id.encode()]  # one key: one partition, so arrival order is production order

    def send(times: list[int], first: int) -> None:
        values = [encode_event(event(model, first + i, ts_ms=t)) for i, t in enumerate(times)]
        produce(broker, values, keys=key * len(values))

    send([t0 + 1_000 * i for i in range(10)], 0)  # window A = [t0, t0 + 1 min)
    send([t0 + 5 * MINUTE + i for i in range(3)], 10)  # watermark jumps to A's end + 4 min: A is closed
    send([t0 + 2_000, t0 + 59_999], 13)  # late for A
    send([t0 + 4 * MINUTE + 45_000], 15)  # window [t0+4, t0+5 min) ends 15 s before the watermark: on time
    cfg = config(broker, sqlite_url)
    with collector_thread(cfg) as collector:
        wait_until(lambda: events(sqlite_url, model) == 16, message="16 events stored")
    assert _window_rows(sqlite_url, model) == {t0: (12, 2), t0 + 5 * MINUTE: (3, 0), t0 + 4 * MINUTE: (1, 0)}
    assert collector.metrics.late._value.get() >= 2
    state = merged(sqlite_url, model)[t0]
    assert state.features["x"].total == sum(range(10)) + 13 + 14  # the late values are in A's summary

    # A new collector (same group) knows the partition's watermark from the store: A is still closed.
    send([t0 + 30_000], 16)
    with collector_thread(config(broker, sqlite_url, group_id=cfg.group_id)):
        wait_until(lambda: events(sqlite_url, model) == 17, message="the 17th event")
    assert _window_rows(sqlite_url, model)[t0] == (13, 3)
