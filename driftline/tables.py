"""Reading the tabular files users hand to `driftline detect` and `driftline baseline` (CSV or Parquet)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

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

    file = Path(path)
    if not file.exists():
        raise UserError(f"{role} file {path} does not exist")
    if not file.is_file():
        raise UserError(f"{role} file {path} is not a file")
    name = file.name.lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            frame = pd.read_parquet(file)
        elif name.endswith(CSV_SUFFIXES):
            frame = pd.read_csv(file, sep="\t" if name.endswith(".tsv") else ",", low_memory=False)
        else:
            raise UserError(f"{role} file {path}: unsupported type; use .csv or .parquet")
    except UserError:
        raise
    except pd.errors.EmptyDataError:
        raise UserError(f"{role} file {path} is empty") from None
    except Exception as exc:  # parser, encoding, Arrow and OS errors all mean "cannot read this file"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {role} file {path}: {detail}") from None
    if frame.shape[1] == 0 or len(frame) == 0:
        raise UserError(f"{role} file {path} has no rows")
    duplicated = frame.columns[frame.columns.duplicated()].tolist()
    if duplicated:
        raise UserError(f"{role} file {path} has duplicate column(s) {', '.join(map(str, duplicated))}")
    frame.columns = [str(c) for c in frame.columns]
    return frame
