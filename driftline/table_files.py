"""Reading the tabular files users hand to `driftline detect` and `driftline baseline` (CSV or Parquet)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from driftline.errors import UserError

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz", ".tsv")
PARQUET_SUFFIXES = (".parquet", ".pq")


def split_names(value: str | None) -> list[str]:
    """"a, b" -> ["a", "b"] (a comma-separated option such as --categorical)."""
    if not value:
        return []
    return [name.strip() for name in value.split(",") if name.strip()]


def read_table(path: str, role: str) -> "Any":
    """A CSV or Parquet file as a DataFrame; `UserError` (naming `role` and the file) for anything unreadable."""
    import pandas as pd

    file = _existing_file(path, role)
    name = file.name.lower()
    with _read_errors(path, role):
        if name.endswith(PARQUET_SUFFIXES):
            frame = pd.read_parquet(file)
        elif name.endswith(CSV_SUFFIXES):
            frame = pd.read_csv(file, sep="\t" if name.endswith(".tsv") else ",", low_memory=False)
        else:
            raise UserError(f"{role} file {path}: unsupported type; use .csv or .parquet")
    if frame.shape[1] == 0 or len(frame) == 0:
        raise UserError(f"{role} file {path} has no rows")
    return _named_columns(frame, path, role)


def table_rows(path: str) -> int | None:
    """The row count of a Parquet file from its footer (None for CSV, or when unreadable: the read says why)."""
    metadata = _parquet_metadata(path)
    return int(metadata.num_rows) if metadata is not None else None


def table_bytes(path: str) -> int | None:
    """A Parquet file's data uncompressed, from its footer (None for CSV, or when unreadable)."""
    metadata = _parquet_metadata(path)
    if metadata is None:
        return None
    return sum(int(metadata.row_group(i).total_byte_size) for i in range(metadata.num_row_groups))


def _parquet_metadata(path: str) -> "Any":
    if not path.lower().endswith(PARQUET_SUFFIXES):
        return None
    try:
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata
    except Exception:  # noqa: BLE001 - the read reports the problem with the file's name
        return None


def iter_table(path: str, role: str, rows: int) -> "Any":
    """A CSV or Parquet file as DataFrame chunks of at most `rows` rows (Parquet record batches, CSV blocks).

    Peak memory is a chunk, whatever the file's size. Every problem is a `UserError` naming
    `role` and the file, raised when the chunk that shows it is read.
    """
    import pandas as pd

    if rows < 1:
        raise UserError(f"--batch-rows must be at least 1, got {rows}")
    file = _existing_file(path, role)
    name = file.name.lower()
    if not name.endswith(PARQUET_SUFFIXES + CSV_SUFFIXES):
        raise UserError(f"{role} file {path}: unsupported type; use .csv or .parquet")

    def chunks() -> "Any":
        if name.endswith(PARQUET_SUFFIXES):
            import pyarrow.parquet as pq

            source = pq.ParquetFile(file)
            metadata = source.schema_arrow.pandas_metadata or {}
            index = [c for c in metadata.get("index_columns", []) if isinstance(c, str)]
            columns = [c for c in source.schema_arrow.names if c not in index]
            # one reader per row group: a single reader over the whole file keeps ~90 MB of Arrow
            # buffers per million rows alive (measured, pyarrow 26), which would make memory grow with the file
            for group in range(source.num_row_groups):
                for batch in source.iter_batches(batch_size=rows, columns=columns, row_groups=[group]):
                    yield batch.to_pandas()
        else:
            yield from pd.read_csv(file, sep="\t" if name.endswith(".tsv") else ",", chunksize=rows)

    def checked() -> "Any":
        seen = False
        with _read_errors(path, role):
            for frame in chunks():
                seen = seen or len(frame) > 0
                yield _named_columns(frame, path, role)
        if not seen:
            raise UserError(f"{role} file {path} has no rows")

    return checked


def _existing_file(path: str, role: str) -> Path:
    file = Path(path)
    if not file.exists():
        raise UserError(f"{role} file {path} does not exist")
    if not file.is_file():
        raise UserError(f"{role} file {path} is not a file")
    return file


@contextlib.contextmanager
def _read_errors(path: str, role: str) -> Iterator[None]:
    """Any failure of reading the file as a `UserError` naming `role` and the file (its own words when it is one)."""
    import pandas as pd

    try:
        yield
    except UserError:
        raise
    except pd.errors.EmptyDataError:
        raise UserError(f"{role} file {path} is empty") from None
    except Exception as exc:  # parser, encoding, Arrow and OS errors all mean "cannot read this file"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {role} file {path}: {detail}") from None


def _named_columns(frame: Any, path: str, role: str) -> Any:
    """`frame` with its column names as strings; duplicated names are a `UserError`."""
    duplicated = frame.columns[frame.columns.duplicated()].tolist()
    if duplicated:
        raise UserError(f"{role} file {path} has duplicate column(s) {', '.join(map(str, duplicated))}")
    frame.columns = [str(c) for c in frame.columns]
    return frame
