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
