"""An Evidently 0.7 data-drift report of a window's sample against the baseline's sample.

The window state keeps a uniform sample of its events and the baseline a uniform
sample of the training rows; Evidently's `DataDriftPreset` compares the two, so a
person can cross-check driftline's own verdicts with a familiar tool. Pure: frames in,
HTML out (no store access).
"""
from __future__ import annotations

import os

import pandas as pd

from driftline.markup import inert_report_inputs


def evidently_html(reference: pd.DataFrame, current: pd.DataFrame, numeric: list[str],
                   categorical: list[str]) -> str:
    """A standalone HTML page (Evidently's `Snapshot.get_html_str(as_iframe=False)`).

    Raises ValueError when either sample is empty.
    """
    if reference.empty or current.empty:
        raise ValueError(f"need rows on both sides (baseline sample {len(reference)}, window sample {len(current)})")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # no usage telemetry from a monitoring tool
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    # category values come from traffic: markup in them must not become markup next to the dashboard
    reference, current, numeric, categorical = inert_report_inputs(reference, current, numeric, categorical)
    definition = DataDefinition(numerical_columns=numeric, categorical_columns=categorical)
    snapshot = Report([DataDriftPreset()]).run(Dataset.from_pandas(current, data_definition=definition),
                                               Dataset.from_pandas(reference, data_definition=definition))
    return snapshot.get_html_str(as_iframe=False)

