"""The registry: immutable versions with hashes and baselines, the production alias, promote and rollback."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat

import pytest
from sqlalchemy import select

from driftline.baseline import Baseline
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import AliasEvent, BaselineRecord, ModelVersion
from driftline.worker.model import load_model
from driftline.worker.publish import publish
from driftline.worker.registry import HOLDOUT_FILE, MODEL_FILE, Registry
from driftline.worker.server import load_version

MODEL = "credit-default"


@pytest.fixture
def registry(db_url, tmp_path) -> Registry:
    return Registry(db_url, tmp_path / "models")


def test_registering_writes_an_immutable_version_with_hashes_metrics_and_baseline(registry, tiny_results):
    published = publish(registry, MODEL, tiny_results[0])
    assert (published.version, published.promoted, published.previous_production) == ("1", True, None)
    info = registry.get(MODEL, "1")
    artifact = registry.artifacts_dir / MODEL / "1" / MODEL_FILE
    assert info.artifact_path == f"{MODEL}/1/{MODEL_FILE}"  # relative: the home can be moved whole
    assert registry.artifact_file(info) == artifact.resolve()
    assert info.artifact_sha256 == hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert info.training_data_sha256 == tiny_results[0].data_sha256
    assert info.metrics["auc"] == tiny_results[0].metrics["auc"]
    assert json.loads((artifact.parent / "transform.json").read_text()) == info.transform
    assert [f["name"] for f in info.feature_schema][:2] == ["age", "annual_income"]
    with session_scope(registry.db_url) as session:
        record = session.scalar(select(BaselineRecord).where(BaselineRecord.model == MODEL))
        baseline = Baseline.from_dict(record.summary)
    assert record.version == "1" and record.rows == len(tiny_results[0].features)
    assert baseline.kind("debt_to_income") == "numeric" and baseline.kind("region") == "categorical"
    assert baseline.prediction is not None and baseline.quality is not None


def test_versions_count_up_and_never_overwrite(registry, tiny_results):
    assert publish(registry, MODEL, tiny_results[0]).version == "1"
    (registry.artifacts_dir / MODEL / "2").mkdir()  # a leftover folder: its number is skipped, not reused
    second = publish(registry, MODEL, tiny_results[1])
    assert (second.version, second.promoted) == ("3", False)  # production exists: not promoted by default
    assert [v.version for v in registry.versions(MODEL)] == ["1", "3"]
    assert registry.alias(MODEL) == "1"


def test_a_tampered_artifact_is_refused(registry, tiny_results):
    publish(registry, MODEL, tiny_results[0])
    info = registry.get(MODEL, "1")
    artifact = registry.artifact_file(info)
    load_model(artifact, info.artifact_sha256)
    with open(artifact, "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(ValueError, match="sha256"):
        load_model(artifact, info.artifact_sha256)


def test_a_home_copied_whole_still_loads_its_versions(db_url, tmp_path, tiny_results):
    registry = Registry(db_url, tmp_path / "home" / "models")
    publish(registry, MODEL, tiny_results[0])
    shutil.copytree(tmp_path / "home", tmp_path / "copy")
    copied = Registry(db_url, tmp_path / "copy" / "models")
    path = copied.artifact_file(copied.get(MODEL, "1"))
    assert path.is_relative_to((tmp_path / "copy").resolve())
    load_model(path, copied.get(MODEL, "1").artifact_sha256)


def test_promote_and_rollback_walk_the_alias_history(registry, tiny_results):
    for result in (tiny_results[0], tiny_results[1], tiny_results[0]):
        publish(registry, MODEL, result)
    assert registry.alias(MODEL) == "1"
    assert registry.promote(MODEL, "2") == "1"
    assert registry.promote(MODEL, "3") == "2"
    assert registry.rollback(MODEL) == ("3", "2")
    assert registry.rollback(MODEL) == ("2", "1")
    assert registry.alias(MODEL) == "1"
    with pytest.raises(UserError, match="no earlier production version"):
        registry.rollback(MODEL)
    assert [(e["action"], e["version"], e["previous_version"]) for e in registry.history(MODEL)] == [
        ("promote", "1", None), ("promote", "2", "1"), ("promote", "3", "2"),
        ("rollback", "2", "3"), ("rollback", "1", "2")]
    with session_scope(registry.db_url) as session:
        stages = dict(session.execute(select(ModelVersion.version, ModelVersion.stage)).all())
        assert session.scalar(select(AliasEvent).order_by(AliasEvent.id.desc())).action == "rollback"
    assert stages == {"1": "production", "2": "archived", "3": "archived"}


def test_unknown_versions_and_models_are_clear_errors(registry, tiny_results):
    with pytest.raises(UserError, match="no production version to roll back"):
        registry.rollback(MODEL)
    publish(registry, MODEL, tiny_results[0])
    with pytest.raises(UserError, match=r"no version '9' \(registered: 1\)"):
        registry.promote(MODEL, "9")


@pytest.mark.parametrize("name", ["../../x", "..", "a/b", "/abs", "a\\b", "x\n", "", " lead", "m..n", "é"])
def test_unsafe_model_names_are_refused_and_nothing_is_written_outside(registry, tiny_results, name, tmp_path):
    before = {p for p in tmp_path.rglob("*")}
    with pytest.raises(UserError, match="invalid model name"):
        publish(registry, name, tiny_results[0])
    for call in (lambda: registry.get(name, "1"), lambda: registry.alias(name), lambda: registry.versions(name),
                 lambda: registry.promote(name, "1"), lambda: registry.rollback(name), lambda: registry.prune(name)):
        with pytest.raises(UserError, match="invalid model name"):
            call()
    assert {p for p in tmp_path.rglob("*")} - before <= {registry.artifacts_dir}
    with pytest.raises(UserError, match="invalid version name"):
        registry.get(MODEL, "../1")


def test_a_name_that_resolves_outside_the_artifacts_folder_is_refused(registry, tmp_path):
    registry.artifacts_dir.mkdir(parents=True)
    (registry.artifacts_dir / "escape").symlink_to(tmp_path)  # a safe name, but a link pointing out
    with pytest.raises(UserError, match="outside the artifacts folder"):
        registry.version_dir("escape", "1")


@pytest.mark.slow  # 20-35 s on two cores in the whole suite
def test_pruning_keeps_production_recent_rollback_targets_and_young_candidates(registry, tiny_results):
    from datetime import datetime, timedelta, timezone

    publish(registry, MODEL, tiny_results[0])  # 1: production (the first version)
    for _ in range(6):
        publish(registry, MODEL, tiny_results[0], promote=False)  # 2..7: candidates
    for version in ("2", "3", "4", "5", "6"):
        registry.promote(MODEL, version)
    # Production 6; earlier production 5, 4, 3 kept (3 previous), 2 and 1 pruned; 7 is a young candidate.
    assert registry.prune(MODEL, keep_previous=3, candidate_max_age_s=3600) == ["1", "2"]
    remaining = {p.name for p in (registry.artifacts_dir / MODEL).iterdir()}
    assert remaining == {"3", "4", "5", "6", "7"}
    assert registry.get(MODEL, "1").stage == "pruned" and registry.get(MODEL, "7").stage == "registered"
    with session_scope(registry.db_url) as session:  # rows and baselines stay for old windows
        assert len(session.scalars(select(BaselineRecord)).all()) == 7
    with pytest.raises(UserError, match="was pruned"):
        registry.promote(MODEL, "2")
    # Three days later the candidate has aged out; production and its rollback targets stay.
    later = datetime.now(timezone.utc) + timedelta(days=3, seconds=1)
    assert registry.prune(MODEL, keep_previous=3, candidate_max_age_s=3 * 86_400, now=later) == ["7"]
    assert registry.prune(MODEL, keep_previous=3, now=later) == []
    assert registry.rollback(MODEL) == ("6", "5")


def test_cli_refuses_an_unsafe_model_name(tmp_path, sqlite_url, monkeypatch, capsys):
    from driftline.cli import main

    monkeypatch.setenv("DRIFTLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DRIFTLINE_DB", sqlite_url)
    with pytest.raises(SystemExit) as exited:
        main(["train", "--model", "../../x", "--size", "test", "--rows", "200", "--epochs", "1"])
    assert exited.value.code == 2 and "--model" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "home" / "x").exists()


@pytest.fixture
def umask_022():
    """The usual umask, under which plain open()/mkdir() give 0644/0755: what the registry must not rely on."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_version_folders_are_0700_and_its_files_0600(registry, tiny_results, umask_022):
    published = publish(registry, MODEL, tiny_results[0])
    version_dir = registry.version_dir(MODEL, published.version)
    for folder in (registry.artifacts_dir, registry.artifacts_dir / MODEL, version_dir):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    names = {path.name: stat.S_IMODE(os.stat(path).st_mode) for path in version_dir.iterdir()}
    assert names == {MODEL_FILE: 0o600, "transform.json": 0o600, "metrics.json": 0o600, HOLDOUT_FILE: 0o600}


def _point_artifact_at(registry, path: str) -> None:
    with session_scope(registry.db_url) as session:
        session.scalar(select(ModelVersion).where(ModelVersion.model == MODEL)).artifact_path = path


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_a_stored_artifact_path_outside_the_artifacts_folder_is_refused(registry, tiny_results, tmp_path, where):
    publish(registry, MODEL, tiny_results[0])
    inside = registry.version_dir(MODEL, "1") / MODEL_FILE
    outside = tmp_path / "elsewhere" / MODEL_FILE  # the same bytes, so only the location can refuse it
    outside.parent.mkdir()
    shutil.copyfile(inside, outside)
    root = registry.artifacts_dir
    stored = {"absolute": str(outside), "dotdot": f"{root}/{MODEL}/1/../../../elsewhere/{MODEL_FILE}",
              "symlink": f"{root}/{MODEL}/link.pt"}[where]
    if where == "symlink":
        (registry.artifacts_dir / MODEL / "link.pt").symlink_to(outside)
    _point_artifact_at(registry, stored)
    with pytest.raises(UserError, match=f"refusing its stored artifact path {re.escape(repr(stored))}, which is "
                                        "outside the artifacts folder"):
        load_version(registry, MODEL, "1", "cpu")


def test_a_stored_artifact_path_inside_the_folder_loads_relative_or_absolute(registry, tiny_results):
    publish(registry, MODEL, tiny_results[0])
    assert load_version(registry, MODEL, "1", "cpu").info.version == "1"  # the absolute path registration stores
    _point_artifact_at(registry, f"{MODEL}/1/{MODEL_FILE}")
    assert registry.artifact_file(registry.get(MODEL, "1")) == registry.version_dir(MODEL, "1") / MODEL_FILE
    _point_artifact_at(registry, f"{MODEL}/../../elsewhere/{MODEL_FILE}")  # relative, but climbing out
    with pytest.raises(UserError, match="outside the artifacts folder"):
        registry.artifact_file(registry.get(MODEL, "1"))
