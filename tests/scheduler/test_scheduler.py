"""The scheduled evaluation: closed windows are found, their partial states merged, the detectors run,
results replaced (idempotent), re-evaluated when late data changes a window, and alerts advanced."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select

from driftline.alerts.times import iso_from_ms
from driftline.baseline import compute_baseline
from driftline.config import load_settings
from driftline.store.db import session_scope
from driftline.store.models import (Alert, BaselineRecord, DetectorResult, EvidenceState, ModelVersion, WindowEvaluation,
                                    WindowStateRecord)
from driftline.window_state import EventBatch, WindowState
from driftline.windows import WindowKey
from driftline.scheduler.evaluation import due_windows
from driftline.scheduler.jobs import SchedulerJobs
from driftline.vocabulary import MULTIVARIATE_DRIFT, MULTIVARIATE_METRICS

WINDOW_MS = 10_000
T0 = 1_796_040_000_000  # a window boundary


def training_frame(rng, n):
    return pd.DataFrame({"income": rng.normal(50, 10, n), "age": rng.normal(40, 8, n),
                         "region": rng.choice(["north", "south"], n, p=[0.6, 0.4])})


def events(rng, n, start_ms, income_shift=0.0):
    frame = training_frame(rng, n)
    frame["income"] += income_shift
    return [{"event_id": f"e{start_ms}-{i}-{rng.integers(1 << 30)}", "ts_ms": start_ms + int(i * WINDOW_MS / n),
             "model": "m", "version": "1", "features": row, "prediction": float(rng.uniform()),
             "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"}
            for i, row in enumerate(frame.to_dict(orient="records"))]


@pytest.fixture
def seeded(db_url):
    rng = np.random.default_rng(5)
    train = training_frame(rng, 5000)
    baseline = compute_baseline(train, predictions=rng.uniform(size=5000))
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=5000, summary=baseline.to_dict()))
    return db_url, baseline, rng


def write_window(db_url, baseline, window_start, partition, batch_events):
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(batch_events))
    with session_scope(db_url) as s:
        row = s.scalar(select(WindowStateRecord).where(WindowStateRecord.window_start_ms == window_start,
                                                       WindowStateRecord.partition == partition))
        if row is None:
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=window_start,
                                    window_end_ms=window_start + WINDOW_MS, partition=partition,
                                    events=len(batch_events), state=state.to_bytes()))
        else:
            merged = WindowState.from_bytes(row.state, baseline).merge(state)
            row.state, row.events = merged.to_bytes(), row.events + len(batch_events)


def jobs_for(db_url):
    settings = load_settings(db=db_url, window_seconds=10, allowed_lateness_seconds=2)
    return SchedulerJobs(settings)


def test_closed_windows_are_evaluated_once_and_partitions_merged(seeded):
    db_url, baseline, rng = seeded
    for w in range(4):  # windows 0-2 clean, window 3 shifted; each split over two partitions
        shift = 25.0 if w == 3 else 0.0
        evs = events(rng, 600, T0 + w * WINDOW_MS, income_shift=shift)
        write_window(db_url, baseline, T0 + w * WINDOW_MS, 0, evs[:250])
        write_window(db_url, baseline, T0 + w * WINDOW_MS, 1, evs[250:])
    jobs = jobs_for(db_url)
    now = T0 + 4 * WINDOW_MS + 2_000  # window 3 ended 2 s ago: exactly at its lateness
    assert jobs.evaluate_due_windows(now_ms=now - 1) == 3  # window 3 is not closed yet
    assert jobs.evaluate_due_windows(now_ms=now) == 1
    assert jobs.evaluate_due_windows(now_ms=now) == 0  # nothing changed: nothing to do
    with session_scope(db_url) as s:
        evaluations = s.scalars(select(WindowEvaluation).order_by(WindowEvaluation.window_start_ms)).all()
        assert [(e.events, e.partitions, e.status) for e in evaluations] == [(600, 2, "ok")] * 4
        drift = {(r.window_start_ms - T0) // WINDOW_MS: r.breached for r in s.scalars(
            select(DetectorResult).where(DetectorResult.detector == "data_drift",
                                         DetectorResult.feature == "income", DetectorResult.metric == "psi"))}
        assert drift == {0: False, 1: False, 2: False, 3: True}
        age_breaches = s.scalar(select(func.count()).select_from(DetectorResult).where(
            DetectorResult.feature == "age", DetectorResult.detector == "data_drift", DetectorResult.breached))
        assert age_breaches == 0
        latency = s.scalars(select(DetectorResult).where(DetectorResult.detector == "latency",
                                                         DetectorResult.metric == "p99_ms")).all()
        assert len(latency) == 4 and all(5 <= r.value <= 20.5 for r in latency)
        # Multivariate drift flows like the other families: both metrics stored for every window.
        multivariate = {((r.window_start_ms - T0) // WINDOW_MS, r.metric): r.breached for r in s.scalars(
            select(DetectorResult).where(DetectorResult.detector == MULTIVARIATE_DRIFT))}
        assert multivariate == {(w, m): w == 3 for w in range(4) for m in MULTIVARIATE_METRICS}


def test_late_data_triggers_re_evaluation_that_replaces_results(seeded):
    db_url, baseline, rng = seeded
    write_window(db_url, baseline, T0, 0, events(rng, 400, T0))
    jobs = jobs_for(db_url)
    now = T0 + WINDOW_MS + 5_000
    assert jobs.evaluate_due_windows(now_ms=now) == 1
    with session_scope(db_url) as s:
        first = s.scalar(select(func.count()).select_from(DetectorResult))
    write_window(db_url, baseline, T0, 1, events(rng, 300, T0, income_shift=40.0))  # late, shifted
    with session_scope(db_url) as s:
        assert len(due_windows(s, now, 2_000)) == 1
    assert jobs.evaluate_due_windows(now_ms=now) == 1
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count()).select_from(DetectorResult)) == first  # replaced, not appended
        evaluation = s.scalars(select(WindowEvaluation)).one()
        assert (evaluation.events, evaluation.partitions) == (700, 2)
        income = s.scalar(select(DetectorResult).where(DetectorResult.feature == "income",
                                                       DetectorResult.detector == "data_drift",
                                                       DetectorResult.metric == "psi"))
        assert income.breached


@pytest.mark.parametrize("policy", ["sequential", "for_windows"])
def test_persistent_drift_fires_an_alert_on_its_evidence_or_after_k_windows(seeded, caplog, tmp_path, policy):
    caplog.set_level("INFO", logger="driftline.scheduler")
    db_url, baseline, rng = seeded
    config = tmp_path / "driftline.toml"
    config.write_text(f'[alerts]\npolicy = "{policy}"\n')
    jobs = SchedulerJobs(load_settings(config, db=db_url, window_seconds=10, allowed_lateness_seconds=2))
    for w in range(5):
        write_window(db_url, baseline, T0 + w * WINDOW_MS, 0, events(rng, 500, T0 + w * WINDOW_MS, income_shift=30.0))
        jobs.evaluate_due_windows(now_ms=T0 + (w + 1) * WINDOW_MS + 3_000)
        with session_scope(db_url) as s:
            alert = s.scalar(select(Alert).where(Alert.detector == "data_drift", Alert.feature == "income"))
            state, summary = (alert.state, alert.summary) if alert else (None, "")
        # a 3-sd shift is overwhelming evidence in one window; the K-windows rule waits for its third
        expected = "firing" if policy == "sequential" or w >= 2 else "pending"
        assert state == expected, (w, state)
        assert ("; evidence e=" in summary and f"since window {iso_from_ms(T0)}" in summary) == (policy == "sequential")
    assert "alert firing: m v1 data_drift income" in caplog.text


def test_window_without_baseline_is_evaluated_for_latency_only(db_url):
    rng = np.random.default_rng(1)
    evs = events(rng, 300, T0)
    for e in evs:
        e["model"] = "unregistered"
    state = WindowState.empty(None).add_batch(EventBatch.from_events(evs))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="unregistered", version="1", window_start_ms=T0, window_end_ms=T0 + WINDOW_MS,
                                partition=0, events=300, state=state.to_bytes()))
    assert jobs_for(db_url).evaluate_due_windows(now_ms=T0 + 60_000) == 1
    with session_scope(db_url) as s:
        evaluation = s.scalars(select(WindowEvaluation)).one()
        detectors = set(s.scalars(select(DetectorResult.detector)))
    assert evaluation.status == "no_baseline" and detectors == {"latency"}


def test_thresholds_and_slos_come_from_the_config_file_with_per_model_overrides(tmp_path):
    from driftline.errors import UserError
    from driftline.scheduler.evaluation_config import EvaluationConfig

    toml = tmp_path / "driftline.toml"
    toml.write_text('[drift]\npsi = 0.3\n[drift.models.m]\npsi = 0.4\n'
                    '[skew]\nparity_mismatch_rate = 0.1\n[skew.models.m]\nparity_mismatch_rate = 0.2\n'
                    '[latency]\np99_ms = 150\n[latency.models.m]\np99_ms = 300\n')
    config = EvaluationConfig.from_settings(load_settings(toml))
    mine, other = config.thresholds_for("m"), config.thresholds_for("other")
    assert (mine.drift.psi, mine.parity_mismatch_rate) == (0.4, 0.2)
    assert (other.drift.psi, other.parity_mismatch_rate) == (0.3, 0.1)
    assert (config.slo_for("m").p99_ms, config.slo_for("other").p99_ms) == (300, 150)
    toml.write_text("[skew]\nno_such_threshold = 1\n")
    with pytest.raises(UserError, match="no_such_threshold"):
        EvaluationConfig.from_settings(load_settings(toml))


# --- model quality on pooled labels --------------------------------------------------------------

def _labelled_window(db_url, baseline, rng, w, n_labels, relation):
    """Window `w` (600 events) whose first `n_labels` predictions got labels drawn by `relation(scores)`."""
    evs = events(rng, 600, T0 + w * WINDOW_MS)
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(evs))
    scores = np.array([e["prediction"] for e in evs[:n_labels]])
    state.add_labels(scores.tolist(), relation(scores).tolist())
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="1", window_start_ms=T0 + w * WINDOW_MS,
                                window_end_ms=T0 + (w + 1) * WINDOW_MS, partition=w % 2, events=len(evs),
                                state=state.to_bytes()))


def _quality(db_url, w):
    with session_scope(db_url) as s:
        return s.scalars(select(DetectorResult).where(DetectorResult.detector == "model_quality",
                                                      DetectorResult.window_start_ms == T0 + w * WINDOW_MS)).all()


def _labelled_baseline(db_url, rng):
    """A baseline whose training labels follow the scores (P(label=1 | score) = score)."""
    train = training_frame(rng, 5000)
    scores = rng.uniform(size=5000)
    baseline = compute_baseline(train, predictions=scores, labels=(rng.uniform(size=5000) < scores).astype(int))
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="1"))
        s.add(BaselineRecord(model="m", version="1", rows=5000, summary=baseline.to_dict()))
    return baseline


def test_sparse_labels_are_pooled_with_earlier_windows_up_to_the_configured_bounds(db_url, tmp_path):
    rng = np.random.default_rng(11)
    baseline = _labelled_baseline(db_url, rng)
    # The relation broke: the label is a coin flip whatever the score (concept drift).
    coin = lambda scores: (rng.uniform(size=scores.size) < 0.5).astype(int)  # noqa: E731
    for w in range(9):
        _labelled_window(db_url, baseline, rng, w, 150, coin)
    jobs = jobs_for(db_url)
    assert jobs.evaluate_due_windows(now_ms=T0 + 9 * WINDOW_MS + 5_000) == 9
    last = _quality(db_url, 8)
    assert last and all(r.details["window_labels"] == 150 for r in last)
    # 150 labels a window: six earlier windows bring the pool to 1 050, the first above 1 000.
    assert {(r.details["pooled_windows"], r.details["pooled_labels"]) for r in last} == {(6, 1_050)}
    assert any(r.breached for r in last), [(r.metric, r.value, r.threshold) for r in last]
    first = _quality(db_url, 0)  # nothing before it to pool
    assert first and all("pooled_windows" not in r.details for r in first)

    config = tmp_path / "pool.toml"
    config.write_text("[model_quality]\nquality_pool_max_windows = 2\n")
    bounded = SchedulerJobs(load_settings(config_file=config, db=db_url, window_seconds=10,
                                          allowed_lateness_seconds=2))
    _labelled_window(db_url, baseline, rng, 9, 150, coin)
    assert bounded.evaluate_due_windows(now_ms=T0 + 10 * WINDOW_MS + 5_000) == 1
    assert {(r.details["pooled_windows"], r.details["pooled_labels"]) for r in _quality(db_url, 9)} == {(2, 450)}


def test_pooling_off_judges_each_window_on_its_own_labels(db_url, tmp_path):
    rng = np.random.default_rng(12)
    baseline = _labelled_baseline(db_url, rng)
    follows = lambda scores: (rng.uniform(size=scores.size) < scores).astype(int)  # noqa: E731
    for w in range(3):
        _labelled_window(db_url, baseline, rng, w, 150, follows)
    config = tmp_path / "off.toml"
    config.write_text("[model_quality]\nquality_pool_min_labels = 0\n")
    jobs = SchedulerJobs(load_settings(config_file=config, db=db_url, window_seconds=10, allowed_lateness_seconds=2))
    assert jobs.evaluate_due_windows(now_ms=T0 + 3 * WINDOW_MS + 5_000) == 3
    results = _quality(db_url, 2)
    assert results and all("pooled_windows" not in r.details for r in results)
    assert not any(r.breached for r in results)  # labels that follow the training relation


def test_pooling_reads_an_earlier_windows_state_once_while_the_row_is_unchanged(db_url):
    """The label summaries of earlier windows are cached: a later evaluation reads no state blob again."""
    from sqlalchemy import event

    from driftline.store.db import get_engine
    from driftline.scheduler.evaluation import BaselineCache, earlier_labels

    rng = np.random.default_rng(13)
    baseline = _labelled_baseline(db_url, rng)
    follows = lambda scores: (rng.uniform(size=scores.size) < scores).astype(int)  # noqa: E731
    for w in range(5):
        _labelled_window(db_url, baseline, rng, w, 100, follows)
    with session_scope(db_url) as s:
        current = s.scalar(select(WindowStateRecord).where(WindowStateRecord.window_start_ms == T0 + 4 * WINDOW_MS))
        labels = WindowState.from_bytes(current.state, baseline).labels
    key = WindowKey("m", "1", T0 + 4 * WINDOW_MS, T0 + 5 * WINDOW_MS)
    cache, statements = BaselineCache(), []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = get_engine(db_url)
    event.listen(engine, "before_cursor_execute", record)
    try:
        for attempt in range(2):
            statements.clear()
            with session_scope(engine) as s:
                pooled, windows = earlier_labels(s, key, cache, max_windows=10).pool(labels, min_labels=1_000)
            assert (pooled.n, windows) == (500, 4)
            blob_reads = [sql for sql in statements if f"{WindowStateRecord.__tablename__}.state" in sql]
            assert len(blob_reads) == (4 if attempt == 0 else 0), statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_two_schedulers_on_one_store_evaluate_each_window_exactly_once(seeded, monkeypatch):
    import threading
    from collections import Counter

    from driftline.scheduler import jobs as jobs_module
    from driftline.scheduler.quarantine import record_failure
    from driftline.store.models import WindowQuarantine

    db_url, baseline, rng = seeded
    windows = [T0 + w * WINDOW_MS for w in range(4)]
    for start in windows:
        write_window(db_url, baseline, start, 0, events(rng, 300, start))
    now = T0 + 4 * WINDOW_MS + 5_000
    with session_scope(db_url) as s:  # window 0 failed an hour ago; its retry is due
        record_failure(s, WindowKey("m", "1", T0, T0 + WINDOW_MS), RuntimeError("flaky"), now - 3_600_000)
    # both schedulers list the due windows before either evaluates one: the race two deployments have
    listed = threading.Barrier(2)
    real_due, real_evaluate = jobs_module.due_windows, jobs_module.evaluate
    evaluations, count_lock = Counter(), threading.Lock()

    first_listing = threading.local()

    def list_then_wait(*args, **kwargs):
        keys = real_due(*args, **kwargs)
        if not getattr(first_listing, "done", False):  # the race is in each scheduler's first listing
            first_listing.done = True
            listed.wait(timeout=120)
        return keys

    def counting_evaluate(session, key, *args, **kwargs):
        with count_lock:
            evaluations[key.window_start_ms] += 1
        return real_evaluate(session, key, *args, **kwargs)

    monkeypatch.setattr(jobs_module, "due_windows", list_then_wait)
    monkeypatch.setattr(jobs_module, "evaluate", counting_evaluate)
    schedulers = [jobs_for(db_url), jobs_for(db_url)]
    evaluated, errors = [0, 0], []

    def run(i):
        try:
            evaluated[i] = schedulers[i].evaluate_due_windows(now_ms=now)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == [] and not any(thread.is_alive() for thread in threads)
    assert dict(evaluations) == {start: 1 for start in windows}
    assert sum(evaluated) == len(windows)
    with session_scope(db_url) as s:
        per_window = Counter(s.scalars(select(WindowEvaluation.window_start_ms)))
        assert per_window == {start: 1 for start in windows}
        assert s.scalars(select(WindowQuarantine)).all() == []  # the retried window left quarantine
        for start in windows:  # one result set: no (detector, feature, metric, segment) twice
            results = s.execute(select(DetectorResult.detector, DetectorResult.feature, DetectorResult.metric,
                                       DetectorResult.segment).where(DetectorResult.window_start_ms == start)).all()
            assert results and len(results) == len(set(results))


def _income_evidence(db_url: str) -> list[dict]:
    with session_scope(db_url) as s:
        rows = s.scalars(select(DetectorResult).where(DetectorResult.detector == "data_drift",
                                                      DetectorResult.feature == "income")
                         .order_by(DetectorResult.window_start_ms)).all()
        return [dict(r.details["evidence"]) for r in rows]


def test_evidence_goes_on_across_restarts_and_schedulers_and_a_late_event_does_not_step_it_twice(seeded):
    db_url, baseline, rng = seeded
    for w in range(4):  # a small shift: evidence builds up window after window
        write_window(db_url, baseline, T0 + w * WINDOW_MS, 0, events(rng, 400, T0 + w * WINDOW_MS, income_shift=1.5))
        jobs_for(db_url).evaluate_due_windows(now_ms=T0 + (w + 1) * WINDOW_MS + 3_000)  # a new scheduler each time
    evidence = _income_evidence(db_url)
    assert [e["windows"] for e in evidence] == [1, 2, 3, 4]
    assert all(e["since_window_start_ms"] == T0 for e in evidence if e["log_e_value"] > 0)
    with session_scope(db_url) as s:
        stored = s.scalar(select(EvidenceState).where(EvidenceState.stream == "data_drift/income/psi"))
        assert stored.last_window_start_ms == T0 + 3 * WINDOW_MS and stored.state["windows"] == 4
    # a late event re-opens window 1: it is evaluated again and keeps the evidence its first evaluation had
    write_window(db_url, baseline, T0 + WINDOW_MS, 1, events(rng, 5, T0 + WINDOW_MS))
    assert jobs_for(db_url).evaluate_due_windows(now_ms=T0 + 4 * WINDOW_MS + 3_000) == 1
    assert _income_evidence(db_url) == evidence
    with session_scope(db_url) as s:
        assert s.scalar(select(EvidenceState).where(EvidenceState.stream == "data_drift/income/psi")).state["windows"] == 4


def test_a_new_version_starts_its_evidence_from_nothing(seeded):
    db_url, baseline, rng = seeded
    write_window(db_url, baseline, T0, 0, events(rng, 400, T0, income_shift=30.0))
    jobs_for(db_url).evaluate_due_windows(now_ms=T0 + WINDOW_MS + 3_000)
    with session_scope(db_url) as s:
        s.add(ModelVersion(model="m", version="2"))
        s.add(BaselineRecord(model="m", version="2", rows=5000, summary=baseline.to_dict()))
    second = [dict(e, version="2") for e in events(rng, 400, T0 + WINDOW_MS)]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(second))
    with session_scope(db_url) as s:
        s.add(WindowStateRecord(model="m", version="2", window_start_ms=T0 + WINDOW_MS, window_end_ms=T0 + 2 * WINDOW_MS,
                                partition=0, events=400, state=state.to_bytes()))
    jobs_for(db_url).evaluate_due_windows(now_ms=T0 + 2 * WINDOW_MS + 3_000)
    with session_scope(db_url) as s:
        first = {(r.version, r.state["windows"]) for r in s.scalars(select(EvidenceState).where(
            EvidenceState.stream == "data_drift/income/psi"))}
        details = s.scalar(select(DetectorResult.details).where(DetectorResult.version == "2",
                                                                DetectorResult.feature == "income"))
    assert first == {("1", 1), ("2", 1)}
    assert details["evidence"]["paging"] is False and details["evidence"]["windows"] == 1


def test_registering_the_versions_baseline_again_starts_its_evidence_from_nothing(seeded):
    db_url, baseline, rng = seeded
    for w in range(2):  # evidence builds up on the first baseline
        write_window(db_url, baseline, T0 + w * WINDOW_MS, 0, events(rng, 400, T0 + w * WINDOW_MS, income_shift=1.5))
        jobs_for(db_url).evaluate_due_windows(now_ms=T0 + (w + 1) * WINDOW_MS + 3_000)
    assert [e["windows"] for e in _income_evidence(db_url)] == [1, 2]
    again = compute_baseline(training_frame(rng, 5000), predictions=rng.uniform(size=5000))  # other training rows
    assert again.fingerprint != baseline.fingerprint
    with session_scope(db_url) as s:
        s.execute(BaselineRecord.__table__.delete().where(BaselineRecord.model == "m"))
        s.add(BaselineRecord(model="m", version="1", rows=5000, summary=again.to_dict()))
    start = T0 + 2 * WINDOW_MS
    write_window(db_url, again, start, 0, events(rng, 400, start, income_shift=1.5))
    jobs_for(db_url).evaluate_due_windows(now_ms=start + WINDOW_MS + 3_000)
    assert [e["windows"] for e in _income_evidence(db_url)] == [1, 2, 1]  # the version's streams started afresh
    with session_scope(db_url) as s:
        stored = s.scalar(select(EvidenceState).where(EvidenceState.stream == "data_drift/income/psi"))
        assert stored.state["windows"] == 1 and stored.state["baseline"] == again.fingerprint
