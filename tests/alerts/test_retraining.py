"""The retraining trigger: persistent drift or a quality drop asks once, with a cooldown; outcome stored."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from driftline.alerts import AlertRules, Channels, apply_retrain_policy, deliver_due
from driftline.alerts.channels.retrain import RetrainChannel
from driftline.alerts.retraining import quality_drop
from driftline.store.db import session_scope
from driftline.store.models import Notification, RetrainRequest
from driftline.vocabulary import DATASET_DRIFT
from driftline.windows import WindowKey
from tests.support.fake_services import RETRAIN_TOKEN as TOKEN


def rules(**retrain) -> AlertRules:
    return AlertRules.from_mapping({"for_windows": 2, "retrain": {"windows": 3, "cooldown": "1h", **retrain}},
                                   channels=[])


def requests(url):
    with session_scope(url) as s:
        return list(s.scalars(select(RetrainRequest).order_by(RetrainRequest.id)))


def test_drift_for_n_windows_asks_once_then_cools_down_and_the_outcome_is_stored(db_url, write_window, run_window,
                                                                                fake_retrain, clock):
    r = rules()
    for i in range(7):
        write_window(db_url, i, drifted=["feature_02", "feature_07"])
        run_window(db_url, i, r, retrain=True)
    made = requests(db_url)
    assert len(made) == 1
    body = made[0].reason
    assert body["trigger"] == "drift" and body["features"] == ["feature_02", "feature_07"]
    assert [w["start_ms"] for w in body["windows"]] == [clock.start(0), clock.start(1), clock.start(2)]
    assert (body["model"], body["version"], body["schema"]) == ("credit", "1", "driftline.retrain/v1")
    assert body["rollout"] == r.retrain.rollout == "promote"  # what the receiver does with a winning version
    assert made[0].status == "requested" and made[0].idempotency_key == "policy:" + body["idempotency_key"]

    report = deliver_due(db_url, channels=Channels(retrain=RetrainChannel(fake_retrain.url, TOKEN, timeout=2)),
                         now=clock.now(7))
    assert len(report.sent) == 1
    request = fake_retrain.requests[0]
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["idempotency-key"] == body["idempotency_key"]
    assert request.json() == body
    stored = requests(db_url)[0]
    assert stored.status == "running" and stored.response["request_id"] == "1"

    for i in range(70, 73):  # an hour later the drift still persists: a second request
        write_window(db_url, i, drifted=["feature_02"])
        run_window(db_url, i, r, retrain=True)
    assert len(requests(db_url)) == 2 and requests(db_url)[1].reason["windows"][-1]["start_ms"] == clock.start(72)


def test_only_the_chosen_features_count_and_a_clean_window_restarts_the_count(db_url, write_window, run_window):
    r = rules(features=["feature_05"])
    pattern = [["feature_00"]] * 3 + [["feature_05"]] * 2 + [[]] + [["feature_05", "feature_01"]] * 2
    for i, drifted in enumerate(pattern):
        write_window(db_url, i, drifted=drifted, dataset=False)
        run_window(db_url, i, r, retrain=True)
    assert requests(db_url) == []
    write_window(db_url, len(pattern), drifted=["feature_05"])
    run_window(db_url, len(pattern), r, retrain=True)
    made = requests(db_url)
    assert len(made) == 1 and made[0].reason["features"] == ["feature_05"]


def test_dataset_level_drift_counts_when_no_features_are_chosen(db_url, write_window, run_window):
    r = rules(detectors=[DATASET_DRIFT])
    for i in range(3):
        write_window(db_url, i, drifted=["feature_00"], dataset=True)
        run_window(db_url, i, r, retrain=True)
    assert len(requests(db_url)) == 1 and requests(db_url)[0].reason["reason"].startswith("drift on the dataset in 3")


# The details keys the model-quality detector writes: training, expected (calibration reference), margin.
@pytest.mark.parametrize("metric, value, details, asks", [
    ("roc_auc", 0.80, {"training": 0.88, "compared_with": "training", "margin": 0.03}, True),
    ("roc_auc", 0.86, {"training": 0.88, "compared_with": "training", "margin": 0.01}, False),  # drop < 0.05
    ("log_loss", 0.50, {"training": 0.30, "expected": 0.40, "compared_with": "calibration", "margin": 0.04}, True),
    # against training this is a 0.12 rise, but the detector's reference (expected) says 0.02
    ("log_loss", 0.42, {"training": 0.30, "expected": 0.40, "compared_with": "calibration", "margin": 0.04}, False),
    ("accuracy", 0.70, {"training": 0.80, "margin": 0.15}, False),  # inside the detector's noise margin
    ("accuracy", 0.70, {"training": 0.80, "margin": 0.05, "insufficient_data": True}, False),
    ("accuracy", 0.70, {}, False),
])
def test_a_quality_drop_beyond_x_asks_for_a_retrain(sqlite_url, write_window, run_window, metric, value, details,
                                                     asks):
    write_window(sqlite_url, 0, quality={"metric": metric, "value": value, "threshold": None, "breached": False,
                                         "details": details})
    run_window(sqlite_url, 0, rules(quality_drop=0.05), retrain=True)
    made = requests(sqlite_url)
    assert len(made) == int(asks)
    if asks:
        assert made[0].reason["trigger"] == "quality" and made[0].reason["quality"]["metric"] == metric
        assert made[0].reason["quality"]["drop"] == pytest.approx(quality_drop(metric, value, details))


def test_running_the_policy_twice_for_a_window_asks_once(sqlite_url, write_window, clock):
    r = rules(cooldown="0s")
    for i in range(3):
        write_window(sqlite_url, i, drifted=["feature_01"])
    for _ in range(2):
        with session_scope(sqlite_url) as s:
            apply_retrain_policy(s, WindowKey.starting("credit", "1", clock.start(2), clock.window_ms), policy=r.retrain,
                                 now=clock.now(2))
    assert len(requests(sqlite_url)) == 1
    with session_scope(sqlite_url) as s:
        assert s.scalar(select(Notification.channel)) == "retrain"


def test_a_refused_request_is_stored_as_rejected(sqlite_url, write_window, run_window, fake_retrain, clock):
    r = rules()
    for i in range(3):
        write_window(sqlite_url, i, drifted=["feature_01"])
        run_window(sqlite_url, i, r, retrain=True)
    report = deliver_due(sqlite_url, channels=Channels(retrain=RetrainChannel(fake_retrain.url, "wrong", timeout=2)),
                         now=clock.now(3))
    assert len(report.failed) == 1
    made = requests(sqlite_url)[0]
    assert made.status == "rejected" and made.response == {"detail": "missing or wrong bearer token"}
    assert made.completed_at is not None


def test_the_policy_is_off_without_a_retraining_webhook(sqlite_url, write_window, run_window, settings_for):
    from driftline.alerts import load_rules

    r = load_rules(settings_for(), config_file=None)
    assert r.retrain.enabled is False
    for i in range(6):
        write_window(sqlite_url, i, drifted=["feature_01"])
        run_window(sqlite_url, i, r, retrain=True)
    assert requests(sqlite_url) == []


def test_a_receiver_that_records_the_request_in_the_same_store_owns_the_one_row(sqlite_url, write_window,
                                                                                 run_window, fake_retrain, clock):
    fake_retrain.store_url = sqlite_url  # like the worker's POST /admin/retrain
    r = rules()
    for i in range(3):
        write_window(sqlite_url, i, drifted=["feature_01"])
        run_window(sqlite_url, i, r, retrain=True)
    assert [row.idempotency_key[:7] for row in requests(sqlite_url)] == ["policy:"]
    deliver_due(sqlite_url, channels=Channels(retrain=RetrainChannel(fake_retrain.url, TOKEN, timeout=2)),
                now=clock.now(3))
    rows = requests(sqlite_url)
    assert len(rows) == 1 and rows[0].idempotency_key == fake_retrain.requests[0].headers["idempotency-key"]
    assert rows[0].reason["trigger"] == "drift" and rows[0].status == "requested"
    for i in range(3, 6):  # the receiver's row keeps the cooldown going
        write_window(sqlite_url, i, drifted=["feature_01"])
        run_window(sqlite_url, i, r, retrain=True)
    assert len(requests(sqlite_url)) == 1


def test_the_webhook_gets_its_own_token_never_the_admin_token():
    from driftline.config import Settings

    url = "https://retrain.example/hook"
    assert Channels.from_settings(Settings(retrain_webhook_url=url, retrain_token="admin")).retrain.token is None
    channel = Channels.from_settings(Settings(retrain_webhook_url=url, retrain_token="admin",
                                              retrain_webhook_token="hook")).retrain
    assert channel.token == "hook"


@pytest.mark.parametrize("url, allow_http, refused", [
    ("http://retrain.example/hook", False, True), ("http://10.0.0.7:8080/hook", False, True),
    ("HTTP://retrain.example/hook", False, True), ("http://retrain.example/hook", True, False),
    ("https://retrain.example/hook", False, False), ("http://127.0.0.1:8000/admin/retrain", False, False),
    ("http://localhost:8000/admin/retrain", False, False), ("http://[::1]:8000/admin/retrain", False, False),
])
def test_a_webhook_off_loopback_must_be_https_unless_allowed(url, allow_http, refused):
    from driftline.errors import UserError

    if refused:
        with pytest.raises(UserError, match="DRIFTLINE_RETRAIN_WEBHOOK_ALLOW_HTTP") as error:
            RetrainChannel(url, TOKEN, allow_http=allow_http)
        assert TOKEN not in str(error.value)
    else:
        assert RetrainChannel(url, TOKEN, allow_http=allow_http).url == url
