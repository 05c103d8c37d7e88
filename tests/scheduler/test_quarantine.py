"""Window quarantine: a window that cannot be evaluated is set aside with its error, shown by `status`,
retried with backoff, and never stops the other windows or models."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from driftline import defaults
from driftline.baseline import compute_baseline
from driftline.commands.status import status
from driftline.config import load_settings
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord, ModelVersion, WindowEvaluation, WindowQuarantine, WindowStateRecord
from driftline.window_state import EventBatch, WindowState
from driftline.scheduler.jobs import SchedulerJobs
from driftline.scheduler.quarantine import RetryPolicy, describe

WINDOW_MS = 10_000
T0 = 1_796_040_000_000  # a window boundary
MODELS = ("m", "n")
MIN_MS = defaults.QUARANTINE_RETRY_MIN_SECONDS * 1000


def _frame(rng, n):
    return pd.DataFrame({"income": rng.normal(50, 10, n), "region": rng.choice(["north", "south"], n)})


def _events(rng, model, start_ms, n=200):
    return [{"event_id": f"{model}-{start_ms}-{i}", "ts_ms": start_ms + i * (WINDOW_MS // n), "model": model,
             "version": "1", "features": row, "prediction": float(rng.uniform()),
             "latency_ms": {"total": float(rng.uniform(5, 20))}, "status": "ok"}
            for i, row in enumerate(_frame(rng, n).to_dict(orient="records"))]


@pytest.fixture
def store(db_url):
    """Two registered models, three closed windows each; window 1 of `m` holds a blob that is no state."""
    rng = np.random.default_rng(3)
    baseline = compute_baseline(_frame(rng, 2000), predictions=rng.uniform(size=2000))
    with session_scope(db_url) as s:
        for model in MODELS:
            s.add(ModelVersion(model=model, version="1"))
            s.add(BaselineRecord(model=model, version="1", rows=2000, summary=baseline.to_dict()))
            for w in range(3):
                start = T0 + w * WINDOW_MS
                blob = (b"\x93not a window state" if (model, w) == ("m", 1) else
                        WindowState.empty(baseline).add_batch(EventBatch.from_events(_events(rng, model, start)))
                        .to_bytes())
                s.add(WindowStateRecord(model=model, version="1", window_start_ms=start, window_end_ms=start + WINDOW_MS,
                                        partition=0, events=200, state=blob))
    return db_url, baseline, rng


def _jobs(db_url, **settings):
    return SchedulerJobs(load_settings(db=db_url, window_seconds=10, allowed_lateness_seconds=2, **settings))


def _evaluated(db_url):
    with session_scope(db_url) as s:
        return sorted((e.model, (e.window_start_ms - T0) // WINDOW_MS) for e in s.scalars(select(WindowEvaluation)))


def _quarantine(db_url):
    with session_scope(db_url) as s:
        return s.scalars(select(WindowQuarantine)).all()


def _status_json(db_url):
    result = CliRunner().invoke(status, ["--json", "--db", db_url])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_corrupt_window_is_quarantined_and_every_other_window_of_every_model_is_evaluated(store):
    db_url, baseline, rng = store
    now = T0 + 3 * WINDOW_MS + 5_000
    jobs = _jobs(db_url)
    # m's window 2 waits behind its quarantined window 1 (judged in order); n goes on
    assert jobs.evaluate_due_windows(now_ms=now) == 4
    assert _evaluated(db_url) == [("m", 0), ("n", 0), ("n", 1), ("n", 2)]
    [row] = _quarantine(db_url)
    assert (row.model, row.version, row.window_start_ms, row.attempts) == ("m", "1", T0 + WINDOW_MS, 1)
    assert row.error_type and row.error

    report = _status_json(db_url)
    assert {"models", "dead_letters", "alerts"} <= set(report)  # the existing keys stay
    [shown] = report["quarantined_windows"]
    assert {k: shown[k] for k in ("model", "version", "window_start_ms", "attempts")} == {
        "model": "m", "version": "1", "window_start_ms": T0 + WINDOW_MS, "attempts": 1}
    assert shown["error"] == row.error and shown["window_start"].endswith("Z") and shown["next_retry"]
    human = CliRunner().invoke(status, ["--db", db_url]).output
    assert "quarantined windows: 1" in human and "m v1 window" in human

    # Not before its backoff; then retried (still failing: the delay doubles).
    assert jobs.evaluate_due_windows(now_ms=now + MIN_MS - 1_000) == 0
    assert _quarantine(db_url)[0].attempts == 1
    assert jobs.evaluate_due_windows(now_ms=now + MIN_MS) == 0
    [row] = _quarantine(db_url)
    assert row.attempts == 2
    assert jobs.evaluate_due_windows(now_ms=now + MIN_MS + 2 * MIN_MS - 1_000) == 0
    assert _quarantine(db_url)[0].attempts == 2

    # The cause is fixed (a good state is written): the next retry evaluates it and it leaves quarantine.
    good = WindowState.empty(baseline).add_batch(EventBatch.from_events(_events(rng, "m", T0 + WINDOW_MS)))
    with session_scope(db_url) as s:
        s.scalar(select(WindowStateRecord).where(WindowStateRecord.model == "m",
                                                 WindowStateRecord.window_start_ms == T0 + WINDOW_MS)).state = good.to_bytes()
    assert jobs.evaluate_due_windows(now_ms=now + 3 * MIN_MS) == 2  # window 1, then the window it held back
    assert ("m", 1) in _evaluated(db_url) and ("m", 2) in _evaluated(db_url)
    assert _quarantine(db_url) == []
    assert _status_json(db_url)["quarantined_windows"] == []


def test_a_raising_detector_is_quarantined_without_secrets_and_with_a_bounded_message(store, monkeypatch):
    import driftline.scheduler.evaluation

    db_url, _, _ = store
    secret = "https://hooks.slack.com/services/T0/B0/very-secret-token"
    real = driftline.scheduler.evaluation.evaluate_window

    def flaky(baseline, state, **kwargs):
        if state.events and state.max_event_ms is not None and state.max_event_ms >= T0 + 2 * WINDOW_MS:
            raise RuntimeError(f"cannot post to {secret}: " + "x" * 5_000)
        return real(baseline, state, **kwargs)

    monkeypatch.setattr(driftline.scheduler.evaluation, "evaluate_window", flaky)
    jobs = _jobs(db_url, slack_webhook_url=secret)
    assert jobs.evaluate_due_windows(now_ms=T0 + 3 * WINDOW_MS + 5_000) == 3  # windows 0 of both, window 1 of n
    rows = {(q.model, (q.window_start_ms - T0) // WINDOW_MS): q for q in _quarantine(db_url)}
    assert set(rows) == {("m", 1), ("n", 2)}  # m's window 2 is not tried while window 1 holds it back
    for row in (rows[("n", 2)],):
        assert row.error_type == "RuntimeError"
        assert secret not in row.error and "very-secret-token" not in row.error
        assert row.error.startswith("cannot post to ***")
        assert len(row.error) <= defaults.QUARANTINE_ERROR_CHARS
    assert "very-secret-token" not in json.dumps(_status_json(db_url))


def test_backoff_doubles_between_its_bounds():
    policy = RetryPolicy(min_seconds=60, max_seconds=3600)
    assert [policy.delay_seconds(n) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert policy.delay_seconds(10**6) == 3600  # no overflow however long it fails


def test_describe_names_the_type_scrubs_secrets_longest_first_and_bounds_the_text():
    kind, text = describe(ValueError("token s3cr-123 and s3cr at https://u:pw@db/x?password=p"), ["s3cr", "s3cr-123"],
                          limit=1000)
    assert (kind, text) == ("ValueError", "token *** and *** at https://db/x?***")
    kind, text = describe(KeyError("k" * 50), [], limit=10)
    assert kind == "KeyError" and len(text) == 10 and text.endswith("…")


def test_label_pooling_skips_an_undecodable_earlier_window_instead_of_failing_the_later_one(db_url):
    from driftline.scheduler.evaluation import BaselineCache, earlier_labels
    from driftline.windows import WindowKey

    rng = np.random.default_rng(4)
    scores = rng.uniform(size=2000)
    baseline = compute_baseline(_frame(rng, 2000), predictions=scores,
                                labels=(rng.uniform(size=2000) < scores).astype(int))
    with session_scope(db_url) as s:
        for w in range(3):
            state = WindowState.empty(baseline).add_batch(EventBatch.from_events(_events(rng, "m", T0 + w * WINDOW_MS)))
            window_scores = rng.uniform(size=50)
            state.add_labels(window_scores.tolist(), (rng.uniform(size=50) < window_scores).astype(int).tolist())
            s.add(WindowStateRecord(model="m", version="1", window_start_ms=T0 + w * WINDOW_MS,
                                    window_end_ms=T0 + (w + 1) * WINDOW_MS, partition=0, events=200,
                                    state=b"\x93corrupt" if w == 1 else state.to_bytes()))
        labels = state.labels
    key = WindowKey("m", "1", T0 + 3 * WINDOW_MS, T0 + 4 * WINDOW_MS)
    with session_scope(db_url) as s:
        pooled, windows = earlier_labels(s, key, BaselineCache(), max_windows=10).pool(labels, min_labels=1_000)
    assert (pooled.n, windows) == (150, 2)  # its own 50, and windows 2 and 0; window 1 left out


def test_a_window_in_quarantine_holds_its_versions_later_windows_for_a_bounded_number_of_tries(store):
    """Judged in order: m's window 2 is not judged while window 1 is in quarantine, for
    QUARANTINE_HOLD_ATTEMPTS tries; then it goes on without it (the model is not left unwatched)."""
    db_url, _, _ = store
    now = T0 + 3 * WINDOW_MS + 5_000
    jobs = _jobs(db_url)
    jobs.evaluate_due_windows(now_ms=now)
    at = now
    for attempt in range(2, defaults.QUARANTINE_HOLD_ATTEMPTS + 1):
        assert ("m", 2) not in _evaluated(db_url)
        at += int(RetryPolicy().delay_seconds(attempt - 1) * 1000)
        jobs.evaluate_due_windows(now_ms=at)
        assert _quarantine(db_url)[0].attempts == attempt
    assert ("m", 2) not in _evaluated(db_url)  # the run that failed window 1 again stopped its version
    assert jobs.evaluate_due_windows(now_ms=at) == 1
    assert ("m", 2) in _evaluated(db_url)  # released once window 1 failed its last held try
    assert ("m", 1) not in _evaluated(db_url)
