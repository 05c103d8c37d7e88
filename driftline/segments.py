"""Segments in the streaming service: the `[segments]` settings and how a value becomes a segment.

A segment is one value of one column: a feature, or a key of the events' `tags`. Window
states keep a sub-summary per segment (`driftline.window_state`), baselines a reference per
segment of their categorical features (`driftline.baseline.segments`), and every result of a
segment is stored under its name, "column=value" ("" is the whole population).
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from driftline import defaults
from driftline.toml_sections import Table, parse_section
from driftline.events import SEGMENT_CHARS

__all__ = ["NULL_KEY", "OTHER_KEY", "SegmentSpec", "segment_key", "segment_name"]

# Internal keys of a window state's segments: null/absent values, and the values folded together.
NULL_KEY = "__driftline_null__"
OTHER_KEY = "__driftline_other__"
# How the two read in a segment's name ("region=(other)"): no real value is written this way by accident.
_SHOWN = {NULL_KEY: "(null)", OTHER_KEY: "(other)"}
# A column name leaves room in SEGMENT_CHARS for "=" and a value of CATEGORY_MAX_CHARS.
COLUMN_MAX_CHARS = SEGMENT_CHARS - defaults.CATEGORY_MAX_CHARS - 1


class SegmentSpec(Table):
    """The `[segments]` table: which columns are segmented, and how many values each keeps at evaluation (the
    rest: "other")."""

    WHERE = "[segments]"

    columns: tuple[str, ...] = ()
    max_values: Annotated[int, Field(ge=1)] = defaults.SEGMENT_MAX_VALUES

    @field_validator("columns", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value  # TOML arrays are lists

    @field_validator("columns")
    @classmethod
    def _names(cls, columns: tuple[str, ...]) -> tuple[str, ...]:
        for name in columns:
            if not name or len(name) > COLUMN_MAX_CHARS or "=" in name or "\x00" in name:
                raise ValueError(f"a column must be a non-empty name of at most {COLUMN_MAX_CHARS} characters "
                                 f"without '=' or NUL, got {name[:60]!r}")
        if len(set(columns)) != len(columns):
            raise ValueError(f"columns must be distinct, got {list(columns)}")
        return columns

    @property
    def track(self) -> int:
        """Values a window state tracks per column before folding new ones into "other"."""
        return self.max_values * defaults.SEGMENT_TRACK_FACTOR

    def __bool__(self) -> bool:
        return bool(self.columns)

    @classmethod
    def from_mapping(cls, mapping: Any) -> "SegmentSpec":
        return parse_section(cls, mapping, cls.WHERE)

    @classmethod
    def from_settings(cls, settings: Any) -> "SegmentSpec":
        return cls.from_mapping(settings.section("segments"))


def segment_key(value: Any) -> str:
    """A value's segment key: its `category_key` (first CATEGORY_MAX_CHARS characters), nulls one key."""
    from driftline.baseline.values import category_key  # here: the baseline package imports this module

    if value is None or (isinstance(value, float) and value != value):
        return NULL_KEY
    return category_key(value)


def segment_name(column: str, key: str) -> str:
    """ "column=value" as results and alerts carry it (NUL-free, at most SEGMENT_CHARS characters)."""
    shown = _SHOWN.get(key, key).replace("\x00", "\ufffd")
    return f"{column}={shown}"[:SEGMENT_CHARS]
