"""`driftline baseline`: register a model version and its training baseline from a file.

For models served elsewhere (their server logs events with driftline.client.InferenceLogger):
the collector windows their events and the detectors compare them with this baseline.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from driftline.table_files import iter_table, read_table, split_names
from driftline.config import common_options
from driftline.errors import UserError
from driftline.store import db as store_db

if TYPE_CHECKING:
    from driftline.baseline import LabelSummary, QualitySpreads


def _sha256(path: str) -> str:
    """The file's SHA-256; a folder's (a Parquet data set): of its files' names and contents in name order;
    a cluster path (s3a://, hdfs://) that only the engine reads: of the path itself."""
    digest = hashlib.sha256()
    if "://" in path:
        digest.update(path.encode())
        return digest.hexdigest()
    files = sorted(p for p in Path(path).rglob("*") if p.is_file()) if Path(path).is_dir() else [Path(path)]
    for file in files:
        if len(files) > 1 or file != Path(path):
            digest.update(str(file.relative_to(path)).encode() + b"\x00")
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


# Said when the quality reference comes from the rows the model was fitted on (no --quality-file).
IN_SAMPLE_WARNING = ("the quality reference is measured on the training rows (in-sample): a model scores "
                     "better on the rows it was fitted on (a confident tree's log loss most), so realized quality "
                     "is judged against the level of the first {windows} labelled live windows instead; pass "
                     "--quality-file with held-out rows to judge it against a holdout reference")


def _holdout_quality(path: str, prediction: str | None, label: str | None, prediction_class: str | None,
                     task: str | None) -> tuple[LabelSummary, QualitySpreads | None]:
    """The `LabelSummary` of a holdout file's prediction and label columns (and the model's decisions), and the
    metrics' spreads over its chunks (`QualitySpreads`)."""
    from driftline.baseline import LabelSummary

    if prediction is None or label is None:
        raise UserError("--quality-file needs --prediction and --label: the columns it is read from")
    frame = read_table(path, "holdout")
    missing = [c for c in (prediction, label, prediction_class) if c is not None and c not in frame.columns]
    if missing:
        raise UserError(f"--quality-file {path}: no column {', '.join(missing)}")
    quality = LabelSummary(task=task).add(frame[prediction], frame[label],
                                          frame[prediction_class] if prediction_class else None)
    if not quality.n:
        raise UserError(f"--quality-file {path}: no row has both a prediction and a label")
    from driftline.detectors.thresholds.spreads import measure_quality_spreads

    return quality, measure_quality_spreads(frame[prediction], frame[label],
                                            frame[prediction_class] if prediction_class else None)


def _from_traces(path: str, settings: Any, options: dict[str, Any], engine: str) -> Any:
    """The baseline of a file of traces: its requests' descriptors, prediction and embeddings, in memory."""
    from driftline.detectors.batch.baseline import baseline_in_memory
    from driftline.llm_settings import LlmSettings
    from driftline.otlp.table import PREDICTION_COLUMN, embedding_references, events_frame, read_trace_events

    if engine != "local":
        raise UserError("--traces is read in this process: it needs --engine local")
    events = read_trace_events(path, LlmSettings.from_mapping(settings.section("llm")))
    if not events:
        raise UserError(f"--traces {path}: no trace of an LLM, embedding, retrieval or cache span")
    frame = events_frame(events)
    click.echo(f"computing the baseline of {len(frame):,} traced requests ...", err=True)
    if options["embeddings"]:
        raise UserError("--traces registers the embeddings the traces carry: drop --embedding")
    options["prediction"] = options["prediction"] or PREDICTION_COLUMN
    summary = baseline_in_memory(frame, **options)
    summary.add_embeddings(embedding_references(events, options.get("on_fit")))
    return summary


def _on_engine(engine: str, path: str, spark_master: str, scheduler_address: str | None, options: dict) -> Any:
    """The baseline with the file read and summarized by Spark or Dask (driftline.engines)."""
    from driftline.detectors.batch.baseline import stream_baseline
    from driftline.detectors.batch.passes import EngineTable

    def progress(what: str, done: int, total: int) -> None:
        click.echo(f"driftline baseline: {what}: {done}/{total} partitions", err=True)

    if engine == "spark":
        from driftline.engines.spark import SparkEngine, read_table as spark_table, spark_session

        with spark_session(spark_master) as session:
            table = EngineTable(spark_table(session, path, "training data"), "training data", SparkEngine(session),
                                progress)
            return stream_baseline(table, **options)
    from driftline.engines.dask import DaskEngine, dask_client, read_table as dask_table

    with dask_client(scheduler_address) as client:
        table = EngineTable(dask_table(path, "training data"), "training data", DaskEngine(client), progress)
        return stream_baseline(table, **options)


@click.command()
@click.option("--model", required=True, help="Model name, as your events' `model` field.")
@click.option("--version", "version", required=True, help="Model version, as your events' `version` field.")
@click.option("--file", "path", default=None, type=click.Path(),
              help="Training (reference) data: CSV or Parquet, one column per feature (with --engine spark|dask also "
                   "a Parquet folder, Hive-style partitions included).")
@click.option("--traces", "traces", default=None, type=click.Path(),
              help="Instead of --file: past OpenTelemetry traces of an LLM or RAG service (OTLP/JSON, one export "
                   "request per line, as the Collector's file exporter writes), each request mapped as the "
                   "receiver maps live traces (docs/llm.md); its embeddings are registered too.")
@click.option("--categorical", default=None, help="Comma-separated categorical columns (default: non-numeric ones).")
@click.option("--prediction", default=None, help="Column holding the model's prediction on each row.")
@click.option("--label", default=None, help="Column holding the true label (training quality metrics).")
@click.option("--prediction-class", "prediction_class", default=None,
              help="With --label: the column of the model's own decisions (0/1 or true/false); a binary "
              "classifier's training accuracy, precision, recall and F1 follow them, as the estimates do for "
              "events that carry predicted_class.")
@click.option("--quality-file", "quality_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Held-out rows (CSV or Parquet) with the --prediction and --label columns: the version's quality "
                   "reference, instead of the training rows' in-sample metrics (baseline quality_reference "
                   "\"holdout\").")
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
@click.option("--batch-rows", "batch_rows", type=int, default=None,
              help="Read the file in chunks of N rows (setting batch_rows, env DRIFTLINE_BATCH_ROWS; default "
                   "200000): the peak memory is set by N, not by the file's size.")
@click.option("--in-memory", "in_memory", is_flag=True, default=False,
              help="Read the file whole instead of streaming it (the former path).")
@click.option("--engine", type=click.Choice(["local", "spark", "dask"]), default="local", show_default=True,
              help="Where the file is read and summarized: this process, a Spark cluster or a Dask cluster "
                   "(extras driftline[spark], driftline[dask]).")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="--engine spark: the cluster's master URL (spark://host:7077, yarn, k8s://...).")
@click.option("--scheduler-address", default=None,
              help="--engine dask: the dask.distributed scheduler (tcp://host:8786; default: a local cluster).")
@common_options
def baseline(model: str, version: str, path: str, categorical: str | None, prediction: str | None,
             label: str | None, ignore: str | None, transform: str | None, promote: bool,
             settings, embedding_specs: tuple[str, ...] = (), batch_rows: int | None = None,  # noqa: ANN001
             in_memory: bool = False, engine: str = "local", spark_master: str = "local[*]",
             scheduler_address: str | None = None, prediction_class: str | None = None,
             quality_file: str | None = None, traces: str | None = None) -> None:
    """Register a baseline from a CSV/Parquet file, or from a file of traces, for a model served elsewhere."""
    from sqlalchemy import select

    from driftline.segments import SegmentSpec
    from driftline.store.aliases import move_alias
    from driftline.store.models import BaselineRecord, ModelVersion
    from driftline.transform import transform_spec

    try:
        spec = transform_spec(transform) if transform else None
    except Exception as exc:  # noqa: BLE001 - any failure to load it is the user's to fix, in one line
        raise UserError(f"--transform {transform}: cannot load it ({type(exc).__name__}: {exc})") from None
    segments = SegmentSpec.from_settings(settings)  # its feature columns get segment references too
    from driftline.embeddings.columns import parse_specs

    def fitting(name: str, rows: int, dimension: int) -> None:
        click.echo(f"fitting embedding {name!r}: {rows:,} vectors of {dimension} dimensions ...", err=True)

    options: dict[str, Any] = dict(categorical=split_names(categorical), prediction=prediction, label=label,
                                   ignore=split_names(ignore), embeddings=parse_specs(embedding_specs),
                                   segment_columns=segments.columns, segment_max_values=segments.max_values,
                                   on_fit=fitting, prediction_class=prediction_class)
    if (path is None) == (traces is None):
        raise UserError("driftline baseline: give the reference as --file (a table) or --traces (OTLP/JSON), one")
    if traces is not None:
        summary, path = _from_traces(traces, settings, options, engine), traces
    elif engine != "local":
        if in_memory:
            raise UserError(f"--engine {engine} summarizes the file where it is: --in-memory needs --engine local")
        summary = _on_engine(engine, path, spark_master, scheduler_address, options)
    elif in_memory:
        from driftline.detectors.batch.baseline import baseline_in_memory

        frame = read_table(path, "training")
        click.echo(f"computing the baseline of {len(frame):,} rows ...", err=True)
        summary = baseline_in_memory(frame, **options)
    else:
        from driftline.detectors.batch.baseline import stream_baseline
        from driftline.detectors.batch.passes import ChunkedTable

        rows = batch_rows if batch_rows is not None else settings.batch_rows

        def passed(what: str, count: int) -> None:
            click.echo(f"driftline baseline: {what}: {count:,} rows", err=True)

        summary = stream_baseline(ChunkedTable(iter_table(path, "training", rows), "training data", passed),
                                  **options)
    from driftline import defaults
    from driftline.vocabulary import QUALITY_FROM_HOLDOUT, QUALITY_FROM_TRAINING_ROWS

    if quality_file is not None:
        summary.quality, summary.quality_spreads = _holdout_quality(
            quality_file, prediction, label, prediction_class, None if summary.quality is None else summary.quality.task)
        summary.quality_reference = QUALITY_FROM_HOLDOUT
    elif summary.quality is not None:
        summary.quality_reference = QUALITY_FROM_TRAINING_ROWS
        click.echo("warning: " + IN_SAMPLE_WARNING.format(windows=defaults.QUALITY_LIVE_REFERENCE_WINDOWS), err=True)
    references = summary.embeddings
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
               + (f" (quality reference: {summary.quality_reference})" if summary.quality_reference else "")
               + (f", transform {transform}" if transform else "")
               + (f", embeddings {', '.join(references)}" if references else "")
               + ("; production alias set" if promote else ""))
