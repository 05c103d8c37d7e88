"""Fixtures for the alert tests: the fake services (from `tests.support.fake_services`) and window writers."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from driftline import vocabulary
from driftline.config import Settings
from driftline.store.db import session_scope
from driftline.store.models import DetectorResult, WindowEvaluation
from driftline.windows import WindowKey
from tests.support.fake_services import (RETRAIN_TOKEN, ROUTING_KEY, WEBHOOK_SECRET, FakePagerDuty, FakeRetrain,
                                         FakeSlack, FakeWebhook, Trickler)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
T0_MS = int(T0.timestamp() * 1000)
WINDOW_MS = 60_000
FEATURES = [f"feature_{i:02d}" for i in range(14)]


@pytest.fixture
def fake_slack():
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_pagerduty():
    fake = FakePagerDuty().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_webhook():
    fake = FakeWebhook().start()
    yield fake
    fake.stop()


@pytest.fixture
def trickler():
    """A receiver that trickles its status line one byte every 0.5 s (about two minutes in all)."""
    fake = Trickler(status_line=True, total=120).start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_retrain():
    fake = FakeRetrain().start()
    yield fake
    fake.stop()


@pytest.fixture
def settings_for():
    """Settings pointing the channels at the given fakes (None: channel not configured)."""

    def build(slack=None, pagerduty=None, webhook=None, retrain=None) -> Settings:
        return Settings(
            slack_webhook_url=slack.url if slack else None,
            pagerduty_routing_key=ROUTING_KEY if pagerduty else None,
            pagerduty_url=pagerduty.url if pagerduty else "http://127.0.0.1:9/unused",
            webhook_url=webhook.url if webhook else None,
            webhook_secret=WEBHOOK_SECRET,
            retrain_webhook_url=retrain.url if retrain else None,
            retrain_webhook_token=RETRAIN_TOKEN,
            dashboard_url="http://dash.example:8501",
        )

    return build


def window_start(index: int) -> int:
    return T0_MS + index * WINDOW_MS


def window_now(index: int) -> datetime:
    """When the scheduler processes window `index`: half a window after it ends."""
    return T0 + timedelta(milliseconds=(index + 1) * WINDOW_MS + WINDOW_MS // 2)


@pytest.fixture
def write_window():
    """Store one evaluated window with its detector results, as the scheduler would."""

    def write(url: str, index: int, *, model: str = "credit", version: str = "1", drifted=(),
              features=FEATURES, dataset: bool | None = None, latency_ms: float | None = None,
              quality: dict | None = None, status: str = "ok", extra: list[dict] | None = None) -> int:
        start = window_start(index)
        with session_scope(url) as s:
            s.add(WindowEvaluation(model=model, version=version, window_start_ms=start,
                                   window_end_ms=start + WINDOW_MS, events=1000, partitions=1, status=status))
            if status != "ok":
                return start
            common = dict(model=model, version=version, window_start_ms=start, window_end_ms=start + WINDOW_MS)
            for feature in features:
                hit = feature in drifted
                s.add(DetectorResult(**common, detector=vocabulary.DATA_DRIFT, feature=feature, metric=vocabulary.PSI,
                                     value=0.31 if hit else 0.02, threshold=0.2, breached=hit,
                                     details={"reason": "ks p<0.05 and psi >= 0.2"} if hit else {}))
            if dataset is not None:
                share = len([f for f in features if f in drifted]) / len(features)
                s.add(DetectorResult(**common, detector=vocabulary.DATASET_DRIFT, feature="",
                                     metric=vocabulary.DRIFTED_SHARE,
                                     value=share, threshold=0.5, breached=dataset,
                                     details={"drifted_features": sorted(drifted)}))
            if latency_ms is not None:
                s.add(DetectorResult(**common, detector=vocabulary.LATENCY, feature="", metric=vocabulary.P99_MS,
                                     value=latency_ms, threshold=100.0, breached=latency_ms > 100.0))
            if quality is not None:
                s.add(DetectorResult(**common, detector=vocabulary.MODEL_QUALITY, feature="", **quality))
            for row in extra or []:
                s.add(DetectorResult(**common, **row))
        return start

    return write


@pytest.fixture
def clock():
    """Helpers for window times: start(i) in epoch ms, now(i) when window i is processed."""

    class Clock:
        start = staticmethod(window_start)
        now = staticmethod(window_now)
        t0 = T0
        window_ms = WINDOW_MS
        features = FEATURES

    return Clock()


@pytest.fixture
def run_window():
    """Process window `index` as the scheduler does: alerts, then the retraining policy, in one transaction."""
    from driftline.alerts import apply_retrain_policy, process_window

    def run(url: str, index: int, rules, *, model: str = "credit", version: str = "1", retrain: bool = False):
        with session_scope(url) as s:
            key = WindowKey.starting(model, version, window_start(index), WINDOW_MS)
            advanced = process_window(s, key, rules=rules, now=window_now(index))
            if retrain:
                apply_retrain_policy(s, key, policy=rules.retrain, now=window_now(index))
            return advanced

    return run
