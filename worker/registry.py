"""The model registry: immutable versions on disk and in the store, and the production alias.

A version is a folder `<artifacts_dir>/<model>/<version>/` holding `model.pt` (weights +
architecture; its sha256 is recorded and checked on load), `transform.json` and
`metrics.json`, plus a `ModelVersion` row and a `BaselineRecord`. Versions are numbered
1, 2, 3 ... per model; nothing in a version folder is ever overwritten (files are opened
with O_EXCL and a version number already on disk is skipped).

The production alias is a `ModelAlias` row; every move is an `AliasEvent`. Rollback
replays that history as a stack (promote/retrain push, rollback pops), so repeated
rollbacks walk back through earlier production versions.

Model and version names are checked against the safe alphabet (driftline.names) on every
call, and a version folder is resolved and must lie inside the artifacts folder, so no
name can read or write elsewhere. The store is input too: a version's stored `artifact_path`
is loaded only once it resolves (symlinks followed) inside the artifacts folder. Folders are
created 0700 and files 0600 (driftline.private_files): the holdout is training data. `prune` deletes the artifact folders of versions
nobody is likely to serve again (their rows and baselines stay: old windows need them).
"""
from __future__ import annotations

import gzip
import json
import logging
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from driftline import defaults
from driftline.errors import UserError
from driftline.names import name_problem
from driftline.private_files import DIR_MODE, open_private, private_dir
from driftline.store.aliases import PRODUCTION, alias_version, move_alias
from driftline.store.db import session_scope
from driftline.store.models import AliasEvent, BaselineRecord, ModelVersion
from driftline.worker.feature_transform import FeatureTransform

log = logging.getLogger(__name__)

PRUNED = "pruned"  # the stage of a version whose artifact folder was deleted
MODEL_FILE = "model.pt"
# The version's training holdout (features and labels), kept so a later candidate can be judged on it.
HOLDOUT_FILE = "holdout.json.gz"


def check_name(name: object, what: str = "model") -> str:
    """`name` when it is in the safe alphabet; else a UserError saying why."""
    problem = name_problem(name)
    if problem is not None:
        raise UserError(f"invalid {what} name {name!r}: {problem}")
    return name  # type: ignore[return-value]


@dataclass(frozen=True)
class VersionInfo:
    model: str
    version: str
    artifact_path: str
    artifact_sha256: str
    training_data_sha256: str | None
    metrics: dict[str, Any]
    feature_schema: list[dict[str, Any]]
    transform: dict[str, Any]
    created_at: str
    description: str | None
    stage: str = "registered"

    @classmethod
    def from_row(cls, row: ModelVersion) -> "VersionInfo":
        return cls(row.model, row.version, row.artifact_path or "", row.artifact_sha256 or "",
                   row.training_data_sha256, dict(row.metrics or {}), list(row.feature_schema or []),
                   dict(row.transform or {}), row.created_at.isoformat() if row.created_at else "", row.description,
                   row.stage or "registered")


@dataclass(frozen=True)
class TrainedVersion:
    """What registering a trained version writes: the network, its feature transform and metrics, the training
    data's digest, its baseline (as stored) and row count, a description, and the held-out rows (if any)."""

    net: Any
    transform: FeatureTransform
    metrics: dict[str, Any]
    training_data_sha256: str
    baseline: dict[str, Any]
    baseline_rows: int
    description: str | None = None
    holdout: dict[str, Any] | None = None


class Registry:
    def __init__(self, db_url: str, artifacts_dir: Path):
        self.db_url = db_url
        self.artifacts_dir = Path(artifacts_dir)

    # --- registering ---------------------------------------------------------------
    def register(self, model: str, trained: TrainedVersion) -> str:
        """Write a new immutable version (artifact files, ModelVersion, BaselineRecord); returns its number."""
        from driftline.worker.model import save_model

        net, transform, metrics, holdout = trained.net, trained.transform, trained.metrics, trained.holdout

        model_dir = private_dir(self._inside(self.artifacts_dir / check_name(model)))
        for _attempt in range(20):
            version = str(self._next_version_number(model, model_dir))
            version_dir = self.version_dir(model, version)
            try:
                version_dir.mkdir(mode=DIR_MODE)
            except FileExistsError:
                continue  # another trainer took this number; take the next one
            try:
                sha256 = save_model(net, version_dir / MODEL_FILE)
                _write_json_once(version_dir / "transform.json", transform.to_dict())
                _write_json_once(version_dir / "metrics.json", metrics)
                if holdout is not None:
                    with open_private(version_dir / HOLDOUT_FILE) as raw, gzip.GzipFile(fileobj=raw, mode="wb") as fh:
                        fh.write(orjson.dumps(holdout, option=orjson.OPT_SERIALIZE_NUMPY))
                with session_scope(self.db_url) as session:
                    session.add(ModelVersion(
                        model=model, version=version, artifact_path=self.stored_path(version_dir / MODEL_FILE),
                        artifact_sha256=sha256, training_data_sha256=trained.training_data_sha256, metrics=metrics,
                        feature_schema=transform.input_schema(), transform=transform.to_dict(),
                        stage="registered", description=trained.description))
                    session.add(BaselineRecord(model=model, version=version, rows=trained.baseline_rows,
                                               summary=trained.baseline, source="train"))
                return version
            except IntegrityError:
                shutil.rmtree(version_dir, ignore_errors=True)  # the number was taken in the store: retry
            except BaseException:
                shutil.rmtree(version_dir, ignore_errors=True)
                raise
        raise UserError(f"could not allocate a new version number for model {model!r} after 20 attempts")

    def version_dir(self, model: str, version: str) -> Path:
        """The folder of a version: checked names, resolved, and inside the artifacts folder."""
        return self._inside(self.artifacts_dir / check_name(model) / check_name(version, "version"))

    def stored_path(self, path: Path) -> str:
        """How the store names an artifact: relative to the artifacts folder, so a home that is moved or
        copied whole (a backup, a test's private copy) still finds its models and passes the inside check."""
        return str(path.resolve().relative_to(self.artifacts_dir.resolve()))

    def artifact_file(self, info: VersionInfo) -> Path:
        """The version's stored model file, resolved: a relative path is taken inside the artifacts
        folder; one that resolves outside it (absolute, ../, a symlink out) is refused, naming it."""
        if not info.artifact_path:
            raise UserError(f"{info.model} version {info.version} has no artifact path in the store")
        try:
            return self._inside(self.artifacts_dir / info.artifact_path)  # an absolute path replaces the folder
        except UserError:
            raise UserError(f"{info.model} version {info.version}: refusing its stored artifact path "
                            f"{info.artifact_path!r}, which is outside the artifacts folder "
                            f"{self.artifacts_dir.resolve()}") from None

    def _inside(self, path: Path) -> Path:
        root = self.artifacts_dir.resolve()
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            raise UserError(f"refusing a path outside the artifacts folder {root}")
        return resolved

    def _next_version_number(self, model: str, model_dir: Path) -> int:
        with session_scope(self.db_url) as session:
            numbers = [int(v) for v in session.scalars(select(ModelVersion.version).where(ModelVersion.model == model))
                       if v.isdigit()]
        numbers += [int(p.name) for p in model_dir.iterdir() if p.name.isdigit()]
        return max(numbers, default=0) + 1

    # --- reading -------------------------------------------------------------------
    def versions(self, model: str | None = None) -> list[VersionInfo]:
        if model is not None:
            check_name(model)
        with session_scope(self.db_url) as session:
            query = select(ModelVersion).order_by(ModelVersion.model, ModelVersion.id)
            if model is not None:
                query = query.where(ModelVersion.model == model)
            return [VersionInfo.from_row(row) for row in session.scalars(query)]

    def get(self, model: str, version: str) -> VersionInfo:
        check_name(model)
        check_name(version, "version")
        with session_scope(self.db_url) as session:
            row = session.scalar(select(ModelVersion).where(ModelVersion.model == model, ModelVersion.version == version))
            if row is None:
                known = ", ".join(v.version for v in self.versions(model)) or "none"
                raise UserError(f"model {model!r} has no version {version!r} (registered: {known})")
            return VersionInfo.from_row(row)

    def holdout(self, model: str, version: str) -> dict[str, Any] | None:
        """The version's training holdout ({"features": [...], "labels": [...]}), or None if none was kept."""
        try:
            with gzip.open(self._inside(self.version_dir(model, version) / HOLDOUT_FILE), "rb") as fh:
                return orjson.loads(fh.read())
        except FileNotFoundError:
            return None

    def alias(self, model: str, alias: str = PRODUCTION) -> str | None:
        """The version the alias points at, or None (cheap: one primary-key read, polled by the worker)."""
        check_name(model)
        with session_scope(self.db_url) as session:
            return alias_version(session, model, alias)

    def history(self, model: str, alias: str = PRODUCTION) -> list[dict[str, Any]]:
        with session_scope(self.db_url) as session:
            events = session.scalars(select(AliasEvent).where(AliasEvent.model == model, AliasEvent.alias == alias)
                                     .order_by(AliasEvent.id))
            return [{"version": e.version, "previous_version": e.previous_version, "action": e.action,
                     "reason": e.reason, "at": e.at.isoformat() if e.at else None} for e in events]

    # --- moving the alias ----------------------------------------------------------
    def promote(self, model: str, version: str, action: str = "promote", reason: str | None = None) -> str | None:
        """Point the production alias at `version`; returns the version it pointed at before."""
        _refuse_pruned(self.get(model, version))  # a clear error for an unknown or pruned version
        with session_scope(self.db_url) as session:
            return move_alias(session, model, version, action, reason)

    def rollback(self, model: str, reason: str | None = None) -> tuple[str, str]:
        """Point production back at the version before the current one; returns (from, to)."""
        check_name(model)
        with session_scope(self.db_url) as session:
            events = session.scalars(select(AliasEvent).where(AliasEvent.model == model,
                                                              AliasEvent.alias == PRODUCTION)
                                     .order_by(AliasEvent.id)).all()
            stack: list[str] = []
            for event in events:
                if event.action == "rollback":
                    if stack:
                        stack.pop()
                elif not stack or stack[-1] != event.version:
                    stack.append(event.version)
            current = alias_version(session, model)
            if current is None:
                raise UserError(f"model {model!r} has no production version to roll back")
            if len(stack) < 2:
                raise UserError(f"model {model!r} has no earlier production version to roll back to "
                                f"(production is version {current})")
            target = stack[-2]
            _refuse_pruned(VersionInfo.from_row(session.scalar(
                select(ModelVersion).where(ModelVersion.model == model, ModelVersion.version == target))))
            previous = move_alias(session, model, target, "rollback", reason)
            return previous or current, target


    # --- pruning ---------------------------------------------------------------------
    def prune(self, model: str, keep_previous: int = defaults.WORKER_KEEP_PREVIOUS_PRODUCTION,
              candidate_max_age_s: float = defaults.WORKER_CANDIDATE_MAX_AGE_SECONDS,
              now: datetime | None = None) -> list[str]:
        """Delete artifact folders no one is likely to serve again; returns the pruned versions.

        Kept: the production version, the `keep_previous` versions that were production most
        recently before it (rollback targets), and versions never in production that are younger
        than `candidate_max_age_s` (candidates someone may still promote). The rows and
        baselines stay; a pruned version's stage becomes "pruned" and it can no longer be promoted.
        """
        check_name(model)
        now = now or datetime.now(timezone.utc)
        oldest_candidate = now - timedelta(seconds=candidate_max_age_s)
        pruned: list[str] = []
        with session_scope(self.db_url) as session:
            production = alias_version(session, model)
            ever_production: list[str] = []  # most recent first
            for version in session.scalars(select(AliasEvent.version).where(
                    AliasEvent.model == model, AliasEvent.alias == PRODUCTION).order_by(AliasEvent.id.desc())):
                if version not in ever_production:
                    ever_production.append(version)
            keep = {production, *[v for v in ever_production if v != production][:keep_previous]}
            for row in session.scalars(select(ModelVersion).where(ModelVersion.model == model)):
                if row.version in keep or row.stage == PRUNED:
                    continue
                created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=timezone.utc)
                if row.version not in ever_production and created > oldest_candidate:
                    continue
                try:
                    shutil.rmtree(self.version_dir(model, row.version), ignore_errors=False)
                except FileNotFoundError:
                    pass
                except (OSError, UserError) as exc:
                    log.warning("cannot prune %s version %s: %s", model, row.version, exc)
                    continue
                row.stage = PRUNED
                pruned.append(row.version)
        return pruned


def _refuse_pruned(info: VersionInfo) -> None:
    if info.stage == PRUNED:
        raise UserError(f"{info.model} version {info.version} was pruned: its artifact is gone; train a new version")


def _write_json_once(path: Path, document: Any) -> None:
    with open_private(path, "x", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, sort_keys=True)
