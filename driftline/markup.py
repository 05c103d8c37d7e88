"""Text from data made inert before an HTML report shows it: "<" becomes "‹" (U+2039).

Category values come from inference events (anyone who can call the model), column
names and segment values from the files a user is handed. Evidently writes them into
a <script> block without escaping "</script>", so one "<" is all markup needs; without
it no tag, comment or end of script can open, whatever the HTML context. The look-alike
keeps a value readable ("‹=50K"). Both the dashboard's report and `detect --html` use this.
"""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

INERT_LT = "\u2039"


def inert(value: Any) -> Any:
    """`value` with every "<" replaced by "‹" when it is a string; any other value as it is."""
    return value.replace("<", INERT_LT) if isinstance(value, str) else value


def inert_names(names: Iterable[str]) -> dict[str, str]:
    """Each column name -> its inert form; ValueError when two names become one."""
    renamed: dict[str, str] = {}
    taken: dict[str, str] = {}
    for name in names:
        new = inert(str(name))
        if new in taken and taken[new] != name:
            raise ValueError(f"columns {taken[new]!r} and {name!r} would look the same in the report; rename one")
        renamed[name], taken[new] = new, name
    return renamed


def inert_frame(frame: pd.DataFrame, categorical: Iterable[str]) -> pd.DataFrame:
    """A copy of `frame` with inert column names and inert values in the `categorical` columns."""
    frame = frame.copy()
    for name in categorical:
        if name in frame.columns:
            frame[name] = frame[name].map(inert)
    return frame.rename(columns=inert_names(frame.columns))


def inert_report_inputs(reference: pd.DataFrame, current: pd.DataFrame, numeric: list[str],
                        categorical: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """Both frames and both column lists as an HTML report may show them (names renamed alike)."""
    names = inert_names(dict.fromkeys([*reference.columns, *current.columns, *numeric, *categorical]))
    return (inert_frame(reference, categorical), inert_frame(current, categorical),
            [names[c] for c in numeric], [names[c] for c in categorical])
