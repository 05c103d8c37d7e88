"""`driftline baseline`: register a model version and its training baseline from a file.

For models served elsewhere (their server logs events with driftline.client.InferenceLogger):
the collector windows their events and the detectors compare them with this baseline.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import click

from driftline.tables import read_table, split_names
from driftline.config import common_options
from driftline.errors import UserError
from driftline.store import db as store_db


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _embedding_references(frame, specs):  # noqa: ANN001, ANN202
    """The `--embedding` references fitted on the file's vectors, and the columns they occupy."""
    from driftline.embeddings.columns import parse_specs, read_embedding
    from driftline.embeddings.reference import fit_reference

    references, used = {}, []
    for name, column in parse_specs(specs).items():
        matrix, columns = read_embedding(frame, name, column)
        click.echo(f"fitting embedding {name!r}: {matrix.shape[0]:,} vectors of {matrix.shape[1]} dimensions ...",
                   err=True)
        references[name] = fit_reference(matrix, name)
        used += [c for c in columns if c not in used]
    return references, used


@click.command()
@click.option("--model", required=True, help="Model name, as your events' `model` field.")
@click.option("--version", "version", required=True, help="Model version, as your events' `version` field.")
@click.option("--file", "path", required=True, type=click.Path(dir_okay=False),
              help="Training (reference) data: CSV or Parquet, one column per feature.")
@click.option("--categorical", default=None, help="Comma-separated categorical columns (default: non-numeric ones).")
@click.option("--prediction", default=None, help="Column holding the model's prediction on each row.")
@click.option("--label", default=None, help="Column holding the true label (training quality metrics).")
@click.option("--ignore", default=None, help="Comma-separated columns that are not features (ids, timestamps).")
@click.option("--transform", "transform", default=None, metavar="MODULE:NAME",
              help="Your feature transform (raw inputs -> features), for the parity-skew check; "
                   "registered by your package under the entry-point group driftline.transforms "
                   "and installed where the scheduler runs.")
@click.option("--promote/--no-promote", default=True, show_default=True,
              help="Point the model's production alias at this version.")
@click.option("--embedding", "embedding_specs", multiple=True, metavar="NAME=COLUMN",
              help="Learn the reference of the events' embedding NAME from COLUMN (a list column) or from the "
                   "columns starting with COLUMN; repeatable. Those columns are not features.")
@common_options
def baseline(model: str, version: str, path: str, categorical: str | None, prediction: str | None,
             label: str | None, ignore: str | None, transform: str | None, promote: bool,
             settings, embedding_specs: tuple[str, ...] = ()) -> None:  # noqa: ANN001
    """Register a baseline from a CSV/Parquet file, for a model served elsewhere."""
    from sqlalchemy import select

    from driftline.baseline import compute_baseline
    from driftline.detectors.thresholds.spreads import measure_spreads
    from driftline.segments import SegmentSpec
    from driftline.store.aliases import move_alias
    from driftline.store.models import BaselineRecord, ModelVersion
    from driftline.transform import transform_spec

    try:
        spec = transform_spec(transform) if transform else None
    except Exception as exc:  # noqa: BLE001 - any failure to load it is the user's to fix, in one line
        raise UserError(f"--transform {transform}: cannot load it ({type(exc).__name__}: {exc})") from None
    segments = SegmentSpec.from_settings(settings)  # its feature columns get segment references too
    frame = read_table(path, "training")
    special = {c for c in (prediction, label) if c}
    for column in [*special, *split_names(ignore), *split_names(categorical)]:
        if column not in frame.columns:
            raise UserError(f"column {column!r} is not in {path} (columns: {', '.join(frame.columns)})")
    references, embedding_columns = _embedding_references(frame, embedding_specs)
    features = frame.drop(columns=[*special, *split_names(ignore), *embedding_columns])
    if features.shape[1] == 0:
        raise UserError(f"{path} has no feature columns left after --prediction/--label/--ignore")
    click.echo(f"computing the baseline of {len(frame):,} rows x {features.shape[1]} features ...", err=True)
    summary = compute_baseline(features, categorical=split_names(categorical),
                               predictions=frame[prediction] if prediction else None,
                               labels=frame[label] if label else None, segment_columns=segments.columns,
                               segment_max_values=segments.max_values)
    summary.add_embeddings(references)
    # the chunk spreads `[drift] thresholds = "reference"` derives the service's thresholds from
    summary.threshold_spreads = measure_spreads(features.set_axis(summary.feature_names, axis=1),
                                                {name: summary.kind(name) for name in summary.feature_names},
                                                frame[prediction] if prediction else None)
    store_db.require_migrated(settings.db_url)
    with store_db.session_scope(settings.db_url) as session:
        if session.scalar(select(BaselineRecord).where(BaselineRecord.model == model,
                                                       BaselineRecord.version == version)) is not None:
            raise UserError(f"{model} version {version} already has a baseline (baselines are immutable); "
                            "register the new training data as a new version")
        row = session.scalar(select(ModelVersion).where(ModelVersion.model == model, ModelVersion.version == version))
        if row is None:
            session.add(ModelVersion(
                model=model, version=version, training_data_sha256=_sha256(path), metrics={},
                feature_schema=[{"name": name, "kind": summary.kind(name)} for name in summary.feature_names],
                transform=spec, description=f"baseline registered from {Path(path).name}"))
        elif spec is not None and row.transform is None:
            row.transform = spec
        session.add(BaselineRecord(model=model, version=version, rows=summary.rows, summary=summary.to_dict(),
                                   source=str(Path(path).resolve())))
        if promote:
            session.flush()  # the new version's row exists before its stage is set
            move_alias(session, model, version, "promote", "driftline baseline")
    kinds = [summary.kind(n) for n in summary.feature_names]
    click.echo(f"registered {model} version {version}: baseline of {summary.rows:,} rows, "
               f"{kinds.count('numeric')} numeric and {kinds.count('categorical')} categorical features"
               + (", prediction" if prediction else "") + (", labels" if label else "")
               + (f", transform {transform}" if transform else "")
               + (f", embeddings {', '.join(references)}" if references else "")
               + ("; production alias set" if promote else ""))
