"""The registry: immutable versions with hashes and baselines, the production alias, promote and rollback."""
from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import select

from driftline.baseline import Baseline
from driftline.errors import UserError
from driftline.store.db import session_scope
from driftline.store.models import AliasEvent, BaselineRecord, ModelVersion
from worker.model import load_model
from worker.publish import publish
from worker.registry import MODEL_FILE, Registry

MODEL = "credit-default"


@pytest.fixture
def registry(db_url, tmp_path) -> Registry:
    return Registry(db_url, tmp_path / "models")


def test_registering_writes_an_immutable_version_with_hashes_metrics_and_baseline(registry, tiny_results):
    published = publish(registry, MODEL, tiny_results[0])
    assert (published.version, published.promoted, published.previous_production) == ("1", True, None)
    info = registry.get(MODEL, "1")
    artifact = registry.artifacts_dir / MODEL / "1" / MODEL_FILE
    assert info.artifact_path == str(artifact)
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
    load_model(info.artifact_path, info.artifact_sha256)
    with open(info.artifact_path, "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(ValueError, match="sha256"):
        load_model(info.artifact_path, info.artifact_sha256)


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
