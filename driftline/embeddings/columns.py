"""Embeddings in tables: `--embedding NAME=COLUMN` read from a list-valued column or from a column prefix.

A Parquet list column (or any column of arrays) holds one vector per row; otherwise COLUMN is a prefix
and the columns that start with it (``emb_0``, ``emb_1``, ...) are the dimensions, ordered by their
numeric suffix (``emb_10`` after ``emb_9``).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from driftline.embeddings.reference import embedding_matrix
from driftline.errors import UserError
from driftline.names import is_safe_name, name_problem


def parse_specs(options: Sequence[str]) -> dict[str, str]:
    """["prompt=prompt_vec", ...] -> {"prompt": "prompt_vec"}; UserError for a malformed or repeated one."""
    specs: dict[str, str] = {}
    for option in options:
        name, sep, column = option.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise UserError(f"--embedding {option!r}: expected NAME=COLUMN (a list column or a column prefix)")
        if not is_safe_name(name):
            raise UserError(f"--embedding {option!r}: bad name: {name_problem(name)}")
        if name in specs:
            raise UserError(f"--embedding {name!r} is given twice")
        specs[name] = column
    return specs


def _suffix_key(column: str, prefix: str) -> tuple[int, Any]:
    rest = column[len(prefix):]
    digits = re.search(r"\d+$", rest)
    return (0, int(digits.group())) if digits else (1, rest)


def embedding_columns(frame: Any, column: str) -> list[str]:
    """The frame's columns that hold the embedding: [column] for a list column, else those with the prefix."""
    if column in frame.columns:
        values = frame[column]
        if values.dtype == object or not np.issubdtype(values.dtype, np.number):
            return [column]
    matched = sorted((c for c in frame.columns if c.startswith(column)), key=lambda c: _suffix_key(c, column))
    if not matched:
        raise UserError(f"no column {column!r}, nor columns starting with it, in the data "
                        f"(columns: {', '.join(list(frame.columns)[:12])})")
    return matched


def read_embedding(frame: Any, name: str, column: str) -> tuple[np.ndarray, list[str]]:
    """(rows x dimension matrix, the columns it came from); UserError for missing, ragged or non-finite vectors."""
    columns = embedding_columns(frame, column)
    if len(columns) == 1 and (frame[columns[0]].dtype == object or not np.issubdtype(frame[columns[0]].dtype,
                                                                                      np.number)):
        values = frame[columns[0]].tolist()
        if any(v is None or (isinstance(v, float) and v != v) for v in values):
            raise UserError(f"embedding {name!r}: column {columns[0]!r} has rows without a vector")
        return embedding_matrix(values, name), columns
    numeric = [c for c in columns if np.issubdtype(frame[c].dtype, np.number)]
    if len(numeric) != len(columns):
        raise UserError(f"embedding {name!r}: columns {', '.join(sorted(set(columns) - set(numeric)))[:200]} "
                        f"starting with {column!r} are not numeric")
    return embedding_matrix(frame[columns].to_numpy(dtype=np.float64), name), columns
