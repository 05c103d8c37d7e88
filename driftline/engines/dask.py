"""The Dask engine: each partition of a Dask DataFrame folded by a task on ``dask.distributed``.

`dask_client(address)` connects to a scheduler (``--scheduler-address tcp://host:8786``, whose workers need
driftline installed) or starts a `LocalCluster` sized for this machine (`LOCAL_WORKERS` processes of
one thread each, `LOCAL_MEMORY` each); `read_table` reads a Parquet file or folder (Hive-style
``column=value/`` folders become columns) or a CSV file.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from driftline.engines import Fold, Progress, fold_chunk
from driftline.errors import UserError

# The local cluster: a worker process per core, up to this many, one thread each (the fold is numpy work
# that holds the GIL between calls); each worker's memory limit. Partitions above BATCH_ROWS rows are
# folded in pieces.
LOCAL_WORKERS = 2
LOCAL_MEMORY = "2GiB"
BATCH_ROWS = 200_000
# The local cluster's scheduler serves its HTTP routes (dashboard, worker list, metrics) here: loopback only, any port.
LOCAL_DASHBOARD = "127.0.0.1:0"
# Dask's Parquet reader takes a column of this name for an unnamed index and drops it (dask's NONE_LABEL).
DASK_INDEX_NAME = "__null_dask_index__"


def _missing(exc: ModuleNotFoundError) -> UserError:
    return UserError(f"--engine dask needs Dask ({exc.name} is not installed): pip install \"driftline[dask]\"")


@contextmanager
def dask_client(address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A `distributed.Client` on `address`, or on a `LocalCluster` started (and stopped) here."""
    try:
        from distributed import Client, LocalCluster
    except ModuleNotFoundError as exc:
        raise _missing(exc) from None
    if address:
        try:
            client = Client(address, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise UserError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    import os

    count = workers or max(1, min(LOCAL_WORKERS, os.cpu_count() or 1))
    with LocalCluster(n_workers=count, threads_per_worker=1, memory_limit=LOCAL_MEMORY, processes=True,
                      dashboard_address=LOCAL_DASHBOARD, host="127.0.0.1") as cluster, Client(cluster) as client:
        yield client


def read_table(path: str, role: str) -> Any:
    """A Parquet file or folder (Hive-style partitions become columns) or a CSV file as a Dask DataFrame."""
    from pathlib import Path

    try:
        import dask.dataframe as dd
    except ModuleNotFoundError as exc:
        raise _missing(exc) from None
    from driftline.table_files import CSV_SUFFIXES

    if "://" not in path and not Path(path).exists():
        raise UserError(f"{role} {path} does not exist")
    try:
        if path.lower().endswith(CSV_SUFFIXES):
            frame = dd.read_csv(path, sep="\t" if path.endswith(".tsv") else ",")
        else:
            frame = dd.read_parquet(path)
    except Exception as exc:  # Arrow, fsspec and OS errors: the reader's message names the problem
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {role} {path} with Dask: {detail}") from None
    if not len(frame.columns):
        raise UserError(f"{role} {path} has no columns")
    if not path.lower().endswith(CSV_SUFFIXES) and DASK_INDEX_NAME in _parquet_names(path, role):
        raise UserError(f"{role} {path}: Dask drops the column {DASK_INDEX_NAME} when it reads Parquet (the name it "
                        "reserves for an unnamed index); rename the column, or use --engine local or spark")
    return frame


def _parquet_names(path: str, role: str) -> list[str]:
    """The column names of a Parquet file or folder as Arrow reads them (Hive-style partition columns included)."""
    import pyarrow.dataset as ds
    from fsspec.core import url_to_fs

    try:
        filesystem, root = url_to_fs(path)
        return list(ds.dataset(root, filesystem=filesystem, format="parquet", partitioning="hive").schema.names)
    except Exception as exc:  # the same failures as the reader's: its message names the problem
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {role} {path} with Dask: {detail}") from None


def _fold_partition(partition: Any, fold: Fold, offset: int) -> Any:
    return fold_chunk(fold, partition, offset, BATCH_ROWS)


class DaskEngine:
    """Dask DataFrames: `driftline.engines.Engine` on the current `distributed` client."""

    name = "dask"

    def __init__(self, client: Any = None):
        self.client = client

    def _client(self) -> Any:
        if self.client is None:
            from distributed import get_client

            try:
                self.client = get_client()
            except ValueError:
                raise UserError("a Dask DataFrame needs a running dask.distributed Client "
                                "(driftline.engines.dask.dask_client())") from None
        return self.client

    def head(self, frame: Any, rows: int) -> Any:
        return frame.head(rows, npartitions=-1, compute=True)

    def partition_rows(self, frame: Any) -> list[int]:
        client = self._client()
        return [int(n) for n in client.compute(frame.map_partitions(len, meta=(None, "int64"))).result()]

    def fold(self, frame: Any, fold: Fold, offsets: Sequence[int], what: str,
             on_progress: Progress | None = None) -> list[Any]:
        from dask import delayed
        from distributed import as_completed

        client = self._client()
        parts = frame[list(fold.columns)].to_delayed()
        futures = client.compute([delayed(_fold_partition)(part, fold, offset) for part, offset in zip(parts, offsets)])
        for done, _ in enumerate(as_completed(futures), start=1):
            if on_progress is not None:
                on_progress(what, done, len(futures))
        return [future.result() for future in futures]
