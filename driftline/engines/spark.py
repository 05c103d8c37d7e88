"""The Spark engine: each partition of a PySpark DataFrame folded by ``mapInPandas``, summaries collected.

What a partition sends is bounded by the plan (`driftline.detectors.batch.frames`); a job that fails anyway
(the JVM out of memory, a worker's error) is one `UserError` line, not py4j's traceback.

`spark_session(master)` starts (or joins) a session for `driftline detect --engine spark`
(``--spark-master``, default ``local[*]``: this machine's cores; ``spark://host:7077``, ``yarn``,
``k8s://...`` for a cluster, whose executors need driftline installed); `read_table` reads a Parquet
file or folder (Hive-style ``column=value/`` folders become columns) or a CSV file. Timestamps are
read in UTC and Arrow carries the rows to pandas, as the single-machine reader does.
"""
from __future__ import annotations

import os
import pickle
import sys
import threading
import warnings
from contextlib import contextmanager, suppress
from typing import Any, Iterator, Sequence

from driftline.engines import Fold, Progress, fold_chunk
from driftline.errors import UserError

# Rows per pandas chunk handed to the fold inside a partition (Arrow's record batches).
BATCH_ROWS = 50_000
SPARK_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": str(BATCH_ROWS),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # the engine reports partitions itself
    "spark.sql.shuffle.partitions": "8",
}


def _failed(exc: Exception, what: str) -> UserError:
    """A job's failure in one line: a worker's `UserError` as it was raised, the JVM running out of memory with what
    to change, else the first line naming an exception (not py4j's traceback)."""
    try:
        text = str(exc)
    except Exception:  # py4j asks the JVM for the message: a JVM that died (most often out of memory) cannot say
        text = "java.lang.OutOfMemoryError (the JVM stopped answering)"
    lines = [line.strip().lstrip(": ") for line in text.splitlines() if line.strip().lstrip(": ")]
    for line in lines:
        if "driftline.errors.UserError: " in line:
            return UserError(line.split("driftline.errors.UserError: ", 1)[1])
    if any("OutOfMemoryError" in line for line in lines):
        return UserError(f"Spark ran out of memory reading the {what} (java.lang.OutOfMemoryError): give it more "
                         "(spark.driver.memory, spark.executor.memory in spark-defaults.conf or PYSPARK_SUBMIT_ARGS) "
                         "or read smaller partitions (spark.sql.files.maxPartitionBytes)")
    detail = next((line for line in lines if "Exception" in line or "Error" in line),
                  lines[0] if lines else type(exc).__name__)
    return UserError(f"Spark failed reading the {what}: {detail}")


def _missing(exc: ModuleNotFoundError) -> UserError:
    return UserError(f"--engine spark needs PySpark ({exc.name} is not installed): pip install \"driftline[spark]\"")


@contextmanager
def spark_session(master: str = "local[*]", app_name: str = "driftline") -> Iterator[Any]:
    """A Spark session on `master`, stopped at the end unless it was already running."""
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as exc:
        raise _missing(exc) from None
    # PySpark 4 warns on every conversion under pandas 3; the conversions used here (Arrow batches of numbers,
    # text and timestamps) are what tests/detectors/test_batch_engines.py compares with the single-machine run
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    running = SparkSession.getActiveSession()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in SPARK_SETTINGS.items():
        builder = builder.config(key, value)
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable  # local workers run this interpreter (and its driftline)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # no Java, a bad master URL: the JVM's own message, in one line
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot start Spark on {master}: {detail} (Spark needs a Java runtime: "
                        "Debian's default-jre-headless)") from None
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    except BaseException:
        if running is None:
            with suppress(Exception):  # a JVM that died mid-job cannot stop: the job's own error is the one to show
                session.stop()
        raise
    if running is None:
        session.stop()


def read_table(session: Any, path: str, role: str) -> Any:
    """A Parquet file or folder (Hive-style partitions become columns) or a CSV file as a Spark DataFrame."""
    from pathlib import Path

    from driftline.table_files import CSV_SUFFIXES

    local = "://" not in path
    if local and not Path(path).exists():
        raise UserError(f"{role} {path} does not exist")
    try:
        if path.lower().endswith(CSV_SUFFIXES):
            frame = session.read.csv(path, header=True, inferSchema=True, sep="\t" if path.endswith(".tsv") else ",")
        else:
            frame = session.read.parquet(path)
    except Exception as exc:  # AnalysisException and friends: the reader's message names the problem
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {role} {path} with Spark: {detail}") from None
    if not frame.columns:
        raise UserError(f"{role} {path} has no columns")
    return frame


class _Watch:
    """Reports a job's finished tasks (its partitions) from Spark's status tracker, every half second."""

    def __init__(self, context: Any, group: str, what: str, total: int, on_progress: Progress | None):
        self.context, self.group, self.what, self.total = context, group, what, total
        self.on_progress, self.done = on_progress, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="driftline-spark-progress")

    def _run(self) -> None:
        tracker, last = self.context.statusTracker(), -1
        while not self.done.wait(0.5):
            finished = 0
            for job in tracker.getJobIdsForGroup(self.group):
                info = tracker.getJobInfo(job)
                for stage in (info.stageIds if info else []):
                    stage_info = tracker.getStageInfo(stage)
                    finished += stage_info.numCompletedTasks if stage_info else 0
            if finished != last and self.on_progress is not None:
                last = finished
                self.on_progress(self.what, min(finished, self.total), self.total)

    def __enter__(self) -> "_Watch":
        self.context.setJobGroup(self.group, f"driftline: {self.what}")
        if self.on_progress is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
        if exc[0] is None and self.on_progress is not None:
            self.on_progress(self.what, self.total, self.total)


def _fold_partitions(fold: Fold, offsets: Sequence[int], names: Sequence[str]):
    """The ``mapInPandas`` function: one partition's record batches (columns `names`, in order) folded into one
    pickled result."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        offset, total = offsets[part], None
        for batch in batches:
            if len(batch):
                batch.columns = list(names)  # the table's names back in place of the positional aliases
                result = fold_chunk(fold, batch, offset, BATCH_ROWS)
                total = result if total is None else fold.merge(total, result)
                offset += len(batch)
        yield pd.DataFrame({"part": [part], "payload": [pickle.dumps(total, protocol=pickle.HIGHEST_PROTOCOL)]})
    return run


class SparkEngine:
    """PySpark DataFrames: `driftline.engines.Engine` on a session's cluster."""

    name = "spark"

    def __init__(self, session: Any):
        self.session = session
        self._jobs = 0

    def head(self, frame: Any, rows: int) -> Any:
        return frame.limit(rows).toPandas()

    def partition_rows(self, frame: Any) -> list[int]:
        from pyspark.sql.functions import spark_partition_id

        with _Watch(self.session.sparkContext, self._group(), "counting rows", 0, None):
            try:
                counts = dict(frame.select(spark_partition_id().alias("p")).groupBy("p").count().collect())
            except Exception as exc:  # Py4JJavaError and friends: one line, not py4j's traceback
                raise _failed(exc, "rows") from None
        return [int(counts.get(p, 0)) for p in range(frame.rdd.getNumPartitions())]

    def fold(self, frame: Any, fold: Fold, offsets: Sequence[int], what: str,
             on_progress: Progress | None = None) -> list[Any]:
        from pyspark.sql.functions import col

        names = list(fold.columns)
        # quoted, names with dots stay names; aliased, as mapInPandas re-reads each column by its bare name (a
        # backtick in one is a syntax error there)
        aliased = [col("`" + name.replace("`", "``") + "`").alias(f"c{i}") for i, name in enumerate(names)]
        job = frame.select(*aliased).mapInPandas(_fold_partitions(fold, list(offsets), names),
                                                 schema="part int, payload binary")
        with _Watch(self.session.sparkContext, self._group(), what, len(offsets), on_progress):
            try:
                rows = job.collect()
            except Exception as exc:  # Py4JJavaError and friends: one line, not py4j's traceback
                raise _failed(exc, what) from None
        results: list[Any] = [None] * len(offsets)
        for row in rows:
            results[row["part"]] = pickle.loads(row["payload"])
        return results

    def _group(self) -> str:
        self._jobs += 1
        return f"driftline-{id(self)}-{self._jobs}"
