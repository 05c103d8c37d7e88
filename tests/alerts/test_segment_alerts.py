"""Segment alerts: their own fingerprint, messages that name the segment, one group and inhibition per segment."""
from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from driftline.alerts.fingerprint import fingerprint
from driftline.alerts.grouping import group_of, inhibited
from driftline.alerts.lifecycle import observations
from driftline.alerts.messages import alert_summary, group_message
from driftline.vocabulary import DATA_DRIFT, DATASET_DRIFT
from driftline.windows import WindowKey

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def alert(detector, feature="", segment="", state="firing"):
    fp = fingerprint("m", "1", detector, feature, segment)
    summary = alert_summary(detector, feature, "psi", 0.3, 0.2, segment=segment)
    return SimpleNamespace(fingerprint=fp, detector=detector, feature=feature, segment=segment, state=state,
                           value=0.3, threshold=0.2, severity="warning", summary=summary, details={"metric": "psi"},
                           started_at=NOW, fired_at=NOW, resolved_at=None, last_notified_at=None,
                           last_window_start_ms=0)


def test_the_fingerprint_includes_the_segment_and_the_whole_populations_is_unchanged():
    whole = fingerprint("m", "1", DATA_DRIFT, "income")
    assert whole == fingerprint("m", "1", DATA_DRIFT, "income", "")
    north, south = (fingerprint("m", "1", DATA_DRIFT, "income", s) for s in ("region=north", "region=south"))
    assert len({whole, north, south}) == 3


def test_observations_keep_segments_apart():
    rows = [SimpleNamespace(detector=DATA_DRIFT, feature="income", segment=seg, breached=seg == "region=north",
                            metric="psi", value=0.3, threshold=0.2, details={}) for seg in ("", "region=north")]
    found = observations(rows)
    assert set(found) == {(DATA_DRIFT, "income", ""), (DATA_DRIFT, "income", "region=north")}
    assert found[(DATA_DRIFT, "income", "region=north")].breached
    assert not found[(DATA_DRIFT, "income", "")].breached


def test_the_message_names_the_segment():
    line = alert_summary(DATA_DRIFT, "income", "psi", 0.31, 0.2, segment="region=north")
    assert line == "data drift on income in segment region=north: psi 0.31 vs threshold 0.2"
    members = [alert(DATA_DRIFT, "income", "region=north"), alert(DATA_DRIFT, "age", "region=north")]
    message = group_message("trigger", window=WindowKey("m", "1", 0, 1000), group=group_of("drift", "region=north"),
                            group_key="k", alerts=members,
                            related_features=[], dashboard_url="http://127.0.0.1:8501", now=NOW)
    assert message["segments"] == ["region=north"]
    assert [line["segment"] for line in message["alerts"]] == ["region=north", "region=north"]
    assert "region=north" in message["title"] and message["group"] == "drift [region=north]"
    whole = group_message("trigger", window=WindowKey("m", "1", 0, 1000), group="drift", group_key="k",
                          alerts=[alert(DATA_DRIFT, "income")],
                          related_features=[], dashboard_url="http://127.0.0.1:8501", now=NOW)
    assert whole["segments"] == [] and "segment" not in whole["title"]


def test_a_dataset_drift_inhibits_data_drift_of_its_own_segment_only():
    rules = [SimpleNamespace(source=DATASET_DRIFT, targets=(DATA_DRIFT,))]
    source = alert(DATASET_DRIFT, segment="region=north")
    same, whole, other = (alert(DATA_DRIFT, "income", s) for s in ("region=north", "", "region=south"))
    assert inhibited([source, same, whole, other], rules) == {same.fingerprint}
    assert group_of("drift", "") == "drift"
