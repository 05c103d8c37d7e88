"""A pass over a whole table: run a fold (`driftline.engines.Fold`) on every chunk, merge in table order.

Two kinds of table, one method, ``run(fold, what)``:

* `ChunkedTable`: a callable that opens a fresh iterator of pandas chunks (a file's Parquet row
  groups or CSV blocks, `driftline.table_files.iter_table`), folded in this process one chunk at a time;
* `EngineTable`: a pandas, Spark or Dask DataFrame folded where it lives by its engine
  (`driftline.engines`); the partitions' row counts are measured once, on the first pass.

`partition_offsets` and `merge_in_order` are what an engine's results need: each partition's first
row (a row's position in the table keys samples and windows) and the merge of the results in
partition order, skipping empty partitions.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Protocol, Sequence

import pandas as pd

from driftline.engines import Engine, Fold, Progress, engine_for
from driftline.errors import UserError

__all__ = ["ChunkedTable", "EngineTable", "Table", "merge_in_order", "partition_offsets"]


def partition_offsets(rows: Sequence[int], where: str) -> list[int]:
    """Each partition's first row in the table, from the partitions' row counts; `UserError` for no rows."""
    if not sum(rows):
        raise UserError(f"the {where} has no rows")
    return [0, *itertools.accumulate(rows)][:-1]


def merge_in_order(parts: Iterable[Any], fold: Any) -> Any:
    """The partitions' results merged in partition order (table order), skipping empty partitions (None)."""
    total = None
    for part in parts:
        if part is not None:
            total = part if total is None else fold.merge(total, part)
    return total


class Table(Protocol):
    where: str

    def head(self, rows: int) -> pd.DataFrame: ...

    def run(self, fold: Fold, what: str) -> Any: ...


class ChunkedTable:
    """A table read as chunks in this process; `open_chunks()` starts a fresh read (one per pass)."""

    def __init__(self, open_chunks: Callable[[], Iterable[pd.DataFrame]], where: str,
                 on_pass: Callable[[str, int], None] | None = None):
        self.open_chunks, self.where, self.on_pass = open_chunks, where, on_pass

    def head(self, rows: int) -> pd.DataFrame:
        for chunk in self.open_chunks():
            if len(chunk):
                return chunk.head(rows)
        raise UserError(f"the {self.where} has no rows")

    def run(self, fold: Fold, what: str) -> Any:
        total, offset = None, 0
        for chunk in self.open_chunks():
            if not len(chunk):
                continue
            part = fold.summarize(chunk, offset)
            offset += len(chunk)
            total = part if total is None else fold.merge(total, part)
        if total is None:
            raise UserError(f"the {self.where} has no rows")
        if self.on_pass is not None:
            self.on_pass(what, offset)
        return total


class EngineTable:
    """A pandas, Spark or Dask DataFrame, each pass run by its engine (default: `engine_for(frame)`)."""

    def __init__(self, frame: Any, where: str, engine: Engine | None = None, on_progress: Progress | None = None):
        self.frame, self.where = frame, where
        self.engine = engine or engine_for(frame)
        self.on_progress = on_progress
        self._offsets: list[int] | None = None

    def head(self, rows: int) -> pd.DataFrame:
        head = self.engine.head(self.frame, rows)
        if not len(head):
            raise UserError(f"the {self.where} has no rows")
        head.columns = [str(c) for c in head.columns]
        return head

    @property
    def offsets(self) -> list[int]:
        if self._offsets is None:
            self._offsets = partition_offsets(self.engine.partition_rows(self.frame), self.where)
        return self._offsets

    def run(self, fold: Fold, what: str) -> Any:
        return merge_in_order(self.engine.fold(self.frame, fold, self.offsets, what, self.on_progress), fold)
