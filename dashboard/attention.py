"""Which model versions need attention first: the overview's ranking of a fleet.

Firing alerts first (the most first), then drift (features that drifted, plus each breached dataset, prediction,
multivariate or embedding drift verdict), then estimated quality (the lowest estimate less its threshold, the
lowest first; versions without an estimate after those with one), then any other breach (latency, data quality,
skew, ...) and pending alerts; ties by model, production first, then version. Frames in, a frame out: what
breached comes from each newest window's own list (dashboard/queries.py, `version_health`), the alerts are counted
by the store (`alert_counts`).
"""
from __future__ import annotations

import math

import pandas as pd

from driftline.dashboard.presentation import Headline, health, ordered_detectors
from driftline.vocabulary import (DATA_DRIFT, DATASET_DRIFT, EMBEDDING_DRIFT, ESTIMATED_QUALITY, MULTIVARIATE_DRIFT,
                                  PREDICTION_DRIFT)

# a version-level drift verdict counts as one more drift signal beside the features that drifted
DRIFT_VERDICTS = (DATASET_DRIFT, PREDICTION_DRIFT, MULTIVARIATE_DRIFT, EMBEDDING_DRIFT)
KEYS = ["model", "version"]
COLUMNS = ["model", "version", "production", "status", "colour", "firing", "pending", "drift", "drifted_features",
           "quality_margin", "breached_detectors", "windows", "events", "last_update"]


def ranking(versions: pd.DataFrame, activity: pd.DataFrame, health_rows: pd.DataFrame,
            alerts: pd.DataFrame) -> pd.DataFrame:
    """The versions of `versions` (model, version, production), most in need of attention first.

    `activity`: queries.version_activity; `health_rows`: queries.version_health; `alerts`: queries.alert_counts.
    Columns: COLUMNS (`status` and `colour` as presentation.health gives them).
    """
    if versions.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = versions[[*KEYS, "production"]].drop_duplicates(KEYS)
    per_version = pd.DataFrame([_signals(m, v, breached, margin) for m, v, breached, margin in zip(
        health_rows["model"], health_rows["version"], health_rows["breached"], health_rows["quality_margin"])],
        columns=[*KEYS, "drifted_features", "verdicts", "others", "quality_margin", "breached_detectors"])
    frame = (frame.merge(per_version, on=KEYS, how="left")
             .merge(alerts[[*KEYS, "firing", "pending"]], on=KEYS, how="left")
             .merge(activity[[*KEYS, "windows", "events", "last_update"]], on=KEYS, how="left"))
    for column in ("drifted_features", "verdicts", "others", "firing", "pending", "windows", "events"):
        frame[column] = frame[column].fillna(0).astype("int64")
    frame["breached_detectors"] = [b if isinstance(b, tuple) else () for b in frame["breached_detectors"]]
    frame["drift"] = frame["drifted_features"] + frame["verdicts"]
    labels = [health(firing, pending, Headline(breached_detectors=detectors), windows > 0)
              for firing, pending, detectors, windows in zip(frame["firing"], frame["pending"],
                                                             frame["breached_detectors"], frame["windows"])]
    frame["status"] = [label for label, _ in labels]
    frame["colour"] = [colour for _, colour in labels]
    frame["_quality"] = frame["quality_margin"].fillna(math.inf)
    frame = frame.sort_values(["firing", "drift", "_quality", "others", "pending", "model", "production", "version"],
                              ascending=[False, False, True, False, False, True, False, True], kind="stable")
    return frame[COLUMNS].reset_index(drop=True)


def _signals(model: str, version: str, breached: tuple[str, ...], margin: float) -> tuple:
    """(model, version, drifted features, drift verdicts, other families breaching, margin, breached families) of one
    window's list of breached results ("detector:feature" or "detector")."""
    detectors = {entry.split(":", 1)[0] for entry in breached}
    drifted = sum(1 for entry in breached if entry.startswith(DATA_DRIFT + ":"))
    verdicts = len(detectors & set(DRIFT_VERDICTS))
    others = len(detectors - {DATA_DRIFT, ESTIMATED_QUALITY, *DRIFT_VERDICTS})
    return model, version, drifted, verdicts, others, margin, tuple(ordered_detectors(detectors))


def matching(ranked: pd.DataFrame, search: str | None) -> pd.DataFrame:
    """The ranked versions whose model name holds `search` (any case; blank: all), in their order."""
    text = (search or "").strip()
    if not text:
        return ranked
    return ranked[ranked["model"].str.contains(text, case=False, regex=False)].reset_index(drop=True)
