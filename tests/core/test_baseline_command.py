"""`driftline baseline` registers a version and its baseline from a file; bad files get one-line errors."""
from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner
from sqlalchemy import select

from driftline.baseline import Baseline
from driftline.cli import cli
from driftline.store.db import session_scope
from driftline.store.models import AliasEvent, BaselineRecord, ModelAlias, ModelVersion
from tests.support.entry_points import register_transforms


def training_file(tmp_path, rows=2000):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"income": rng.lognormal(8, 0.5, rows), "age": rng.integers(18, 90, rows).astype(float),
                          "region": rng.choice(["north", "south", "east"], rows),
                          "score": rng.uniform(0, 1, rows), "y": rng.integers(0, 2, rows), "id": np.arange(rows)})
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    return path


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, standalone_mode=False)


def test_registers_version_baseline_and_alias(sqlite_url, tmp_path):
    path = training_file(tmp_path)
    invoke("baseline", "--model", "ext", "--version", "7", "--file", str(path), "--prediction", "score",
           "--label", "y", "--ignore", "id", "--db", sqlite_url)
    with session_scope(sqlite_url) as s:
        version = s.scalars(select(ModelVersion)).one()
        record = s.scalars(select(BaselineRecord)).one()
        alias = s.get(ModelAlias, ("ext", "production"))
    assert (version.model, version.version, alias.version) == ("ext", "7", "7")
    assert len(version.training_data_sha256) == 64
    baseline = Baseline.from_dict(record.summary)
    assert baseline.rows == 2000
    assert sorted(baseline.feature_names) == ["age", "income", "region"]
    assert baseline.kind("region") == "categorical" and baseline.kind("income") == "numeric"
    assert baseline.prediction is not None and baseline.quality is not None


def test_an_in_sample_quality_reference_is_said_and_quality_file_sets_a_holdout_one(sqlite_url, tmp_path):
    path = training_file(tmp_path)
    result = CliRunner().invoke(cli, ["baseline", "--model", "ext", "--version", "1", "--file", str(path),
                                      "--prediction", "score", "--label", "y", "--ignore", "id", "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    assert "measured on the training rows (in-sample)" in result.output and "--quality-file" in result.output
    holdout = pd.DataFrame({"score": [0.9, 0.8, 0.2, 0.1, 0.7], "y": [1, 1, 0, 0, 0]})
    holdout.to_csv(tmp_path / "holdout.csv", index=False)
    result = CliRunner().invoke(cli, ["baseline", "--model", "ext", "--version", "2", "--file", str(path),
                                      "--prediction", "score", "--label", "y", "--ignore", "id",
                                      "--quality-file", str(tmp_path / "holdout.csv"), "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    assert "in-sample" not in result.output and "quality reference: holdout" in result.output
    with session_scope(sqlite_url) as s:
        stored = {r.version: Baseline.from_dict(r.summary) for r in s.scalars(select(BaselineRecord))}
    assert stored["1"].quality_reference == "training rows" and stored["1"].quality.n == 2000
    assert stored["2"].quality_reference == "holdout" and stored["2"].quality.n == 5
    assert stored["2"].quality.positives.sum() == 2 and stored["1"].fingerprint == stored["2"].fingerprint


def test_promoting_moves_the_alias_like_the_registry_does(sqlite_url, tmp_path):
    """One alias writer: the stages and the history rows rollback replays are those of `driftline promote`."""
    path = training_file(tmp_path)
    for version in ("1", "2"):
        invoke("baseline", "--model", "ext", "--version", version, "--file", str(path), "--db", sqlite_url)
    invoke("baseline", "--model", "ext", "--version", "3", "--file", str(path), "--no-promote", "--db", sqlite_url)
    with session_scope(sqlite_url) as s:
        stages = {v.version: v.stage for v in s.scalars(select(ModelVersion))}
        history = [(e.alias, e.action, e.version, e.previous_version, e.reason)
                   for e in s.scalars(select(AliasEvent).order_by(AliasEvent.id))]
    assert stages == {"1": "archived", "2": "production", "3": "registered"}
    assert history == [("production", "promote", "1", None, "driftline baseline"),
                       ("production", "promote", "2", "1", "driftline baseline")]


def test_second_baseline_for_the_same_version_is_refused(sqlite_url, tmp_path):
    path = training_file(tmp_path, rows=200)
    invoke("baseline", "--model", "ext", "--version", "1", "--file", str(path), "--db", sqlite_url)
    runner = CliRunner()
    result = runner.invoke(cli, ["baseline", "--model", "ext", "--version", "1", "--file", str(path),
                                 "--db", sqlite_url])
    assert result.exception is not None and "immutable" in str(result.exception)


def test_unknown_column_and_missing_file(sqlite_url, tmp_path):
    path = training_file(tmp_path, rows=50)
    result = CliRunner().invoke(cli, ["baseline", "--model", "m", "--version", "1", "--file", str(path),
                                      "--prediction", "nope", "--db", sqlite_url])
    assert "column 'nope' is not in" in str(result.exception)
    result = CliRunner().invoke(cli, ["baseline", "--model", "m", "--version", "1", "--file",
                                      str(tmp_path / "missing.csv"), "--db", sqlite_url])
    assert "does not exist" in str(result.exception)


USER_TRANSFORM = '''
def to_features(records):
    """This user's training transform: raw loan inputs -> the model's features."""
    return [{"income": r["income"], "debt_ratio": r["debt"] / r["income"]} for r in records]
'''
T0 = 1_796_040_000_000  # a window boundary


def _served_window(sqlite_url, income, debt, parity_bug_every):
    """One closed window of served events whose raw inputs were logged; every Nth debt_ratio is 12x."""
    from driftline.baseline import Baseline
    from driftline.store.models import WindowStateRecord
    from driftline.window_state import EventBatch, WindowState

    events = []
    for i in range(600):
        inputs = {"income": float(income[i]), "debt": float(debt[i])}
        features = {"income": inputs["income"], "debt_ratio": inputs["debt"] / inputs["income"]}
        if parity_bug_every and i % parity_bug_every == 0:
            features["debt_ratio"] *= 12  # monthly instead of annual income: a serving-side bug
        events.append({"event_id": f"e{i}", "ts_ms": T0 + i * 10, "model": "mine", "version": "1",
                       "features": features, "inputs": inputs, "prediction": 0.5,
                       "latency_ms": {"total": 5.0}, "status": "ok"})
    with session_scope(sqlite_url) as s:
        baseline = Baseline.from_dict(s.scalars(select(BaselineRecord)).one().summary)
        state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
        s.add(WindowStateRecord(model="mine", version="1", window_start_ms=T0, window_end_ms=T0 + 10_000,
                                partition=0, events=len(events), state=state.to_bytes()))


def _parity(sqlite_url):
    from driftline.scheduler.jobs import SchedulerJobs
    from driftline.config import load_settings
    from driftline.store.models import DetectorResult

    jobs = SchedulerJobs(load_settings(db=sqlite_url, window_seconds=10, allowed_lateness_seconds=2))
    assert jobs.evaluate_due_windows(now_ms=T0 + 13_000) == 1
    with session_scope(sqlite_url) as s:
        return {r.feature: r.breached for r in s.scalars(select(DetectorResult).where(
            DetectorResult.detector == "skew", DetectorResult.metric == "parity_mismatch_rate"))}


def _user_model(sqlite_url, tmp_path, monkeypatch, *transform_args):
    (tmp_path / "user_features.py").write_text(USER_TRANSFORM)
    monkeypatch.syspath_prepend(str(tmp_path))
    register_transforms(tmp_path / "site", monkeypatch, "user_features:to_features")  # as the user's package does
    rng = np.random.default_rng(7)
    income = rng.lognormal(10, 0.4, 3000)
    debt = income * rng.beta(2, 5, 3000)
    pd.DataFrame({"income": income, "debt_ratio": debt / income}).to_csv(tmp_path / "train.csv", index=False)
    invoke("baseline", "--model", "mine", "--version", "1", "--file", str(tmp_path / "train.csv"),
           *transform_args, "--db", sqlite_url)
    return income, debt


def test_a_users_own_transform_gets_the_parity_skew_check(sqlite_url, tmp_path, monkeypatch):
    income, debt = _user_model(sqlite_url, tmp_path, monkeypatch, "--transform", "user_features:to_features")
    with session_scope(sqlite_url) as s:
        assert s.scalars(select(ModelVersion)).one().transform == {"import": "user_features:to_features"}
    _served_window(sqlite_url, income, debt, parity_bug_every=3)
    assert _parity(sqlite_url) == {"income": False, "debt_ratio": True}


def test_without_a_transform_parity_is_not_judged(sqlite_url, tmp_path, monkeypatch):
    income, debt = _user_model(sqlite_url, tmp_path, monkeypatch)
    _served_window(sqlite_url, income, debt, parity_bug_every=3)
    assert _parity(sqlite_url) == {}


def test_a_stored_transform_off_the_allow_list_is_never_imported_and_the_window_still_evaluated(
        sqlite_url, tmp_path, monkeypatch, caplog):
    income, debt = _user_model(sqlite_url, tmp_path, monkeypatch, "--transform", "user_features:to_features")
    # someone with write access to the store points the version at a module nobody registered
    (tmp_path / "planted.py").write_text("import pathlib\npathlib.Path(__file__).with_name('planted.ran').touch()\n"
                                         + USER_TRANSFORM)
    with session_scope(sqlite_url) as s:
        s.scalars(select(ModelVersion)).one().transform = {"import": "planted:to_features"}
    _served_window(sqlite_url, income, debt, parity_bug_every=3)
    assert _parity(sqlite_url) == {}  # evaluated (the other detectors ran), parity not judged with it
    assert not (tmp_path / "planted.ran").exists()
    assert "'planted:to_features' is not an allowed transform" in caplog.text
    assert "mine version 1: its feature transform is refused" in caplog.text


def test_a_transform_that_cannot_be_loaded_is_refused_at_registration(sqlite_url, tmp_path, monkeypatch):
    path = training_file(tmp_path, rows=50)
    register_transforms(tmp_path / "site", monkeypatch, "no_such_module_x:f", "driftline.names:nope",
                        "driftline.names:MAX_NAME_CHARS")
    for target, why in (("no_such_module_x:f", "ModuleNotFoundError"), ("driftline.names:nope", "AttributeError"),
                        ("driftline.names", "not an allowed transform"),
                        ("driftline.names:MAX_NAME_CHARS", "neither"),
                        ("driftline.names:name_problem", "TransformNotAllowed")):
        result = CliRunner().invoke(cli, ["baseline", "--model", "m", "--version", "1", "--file", str(path),
                                          "--transform", target, "--db", sqlite_url])
        assert f"--transform {target}: cannot load it" in str(result.exception) and why in str(result.exception)
