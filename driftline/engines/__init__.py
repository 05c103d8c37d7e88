"""Batch engines: run a fold of table partitions where the table lives (pandas, Spark, Dask), hand back the results.

An engine knows how to read a table and how to run one function over each of its partitions in
parallel; it knows nothing of drift. `driftline.detectors.batch.frames` gives it a `Fold` (turn a
chunk of rows and its first row's position into a summary; merge two summaries) and merges what
comes back, in partition order: the summaries are the same mergeable ones the single-machine run
folds (`driftline.detectors.batch.summary`), so every engine gives the same JSON.

* `local`: pandas DataFrames (`LocalEngine`), in this process;
* `spark`: PySpark DataFrames (`driftline.engines.spark`), each partition folded by ``mapInPandas``;
* `dask`: Dask DataFrames on ``dask.distributed`` (`driftline.engines.dask`), one task per partition.

Rows are numbered in the DataFrame's partition order (a first pass counts each partition's rows):
that order is the table's for a file, and the engine's split order for a folder of files. The
DataFrame must give the same partitions each time it is computed (a table or files do; persist a
shuffled one first). pyspark and dask are imported here only, never by the detectors.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

ENGINES = ("local", "spark", "dask")
# Progress of a pass: (what is being read, partitions done, partitions in all).
Progress = Callable[[str, int, int], None]


class Fold(Protocol):
    """What an engine runs on each partition: summaries of chunks of rows, merged."""

    @property
    def columns(self) -> Sequence[str]:  # the columns the fold reads (the engine sends no others)
        ...

    def summarize(self, chunk: Any, row_offset: int) -> Any: ...

    def merge(self, a: Any, b: Any) -> Any: ...


class Engine(Protocol):
    name: str

    def head(self, frame: Any, rows: int) -> Any: ...

    def partition_rows(self, frame: Any) -> list[int]: ...

    def fold(self, frame: Any, fold: Fold, offsets: Sequence[int], what: str,
             on_progress: Progress | None = None) -> list[Any]: ...


def fold_chunk(fold: Fold, chunk: Any, row_offset: int, rows: int) -> Any:
    """`fold` over `chunk` (a pandas DataFrame) in pieces of at most `rows` rows; None for no rows."""
    total = None
    for begin in range(0, len(chunk), rows):
        part = fold.summarize(chunk.iloc[begin:begin + rows], row_offset + begin)
        total = part if total is None else fold.merge(total, part)
    return total


class LocalEngine:
    """pandas DataFrames in this process: one partition, folded in chunks (for tests and the Python API)."""

    name = "local"

    def __init__(self, chunk_rows: int = 200_000):
        self.chunk_rows = chunk_rows

    def head(self, frame: Any, rows: int) -> Any:
        return frame.head(rows)

    def partition_rows(self, frame: Any) -> list[int]:
        return [len(frame)]

    def fold(self, frame: Any, fold: Fold, offsets: Sequence[int], what: str,
             on_progress: Progress | None = None) -> list[Any]:
        result = fold_chunk(fold, frame[list(fold.columns)], offsets[0], self.chunk_rows)
        if on_progress is not None:
            on_progress(what, 1, 1)
        return [result]


def engine_for(frame: Any) -> Engine:
    """The engine of `frame`: a pandas, PySpark or Dask DataFrame (recognised without importing either)."""
    module = type(frame).__module__.split(".")[0]
    if module == "pyspark":
        from driftline.engines.spark import SparkEngine

        return SparkEngine(frame.sparkSession)
    if module in ("dask", "dask_expr"):
        from driftline.engines.dask import DaskEngine

        return DaskEngine()
    if module == "pandas":
        return LocalEngine()
    raise TypeError(f"a pandas, Spark or Dask DataFrame please, not {type(frame).__module__}.{type(frame).__name__}")
