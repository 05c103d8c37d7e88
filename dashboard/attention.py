"""Which model versions need attention first: the overview's ranking of a fleet.

Firing alerts first (the most first), then drift (features that drifted, plus each breached dataset, prediction,
multivariate or embedding drift verdict), then estimated quality (the lowest estimate less its threshold, the
lowest first; versions without an estimate after those with one), then any other breach (latency, data quality,
skew, ...) and pending alerts; ties by model, production first, then version. Frames in, a frame out: the
counting is done by the store (dashboard/queries.py, `version_health` and `alert_counts`).
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
    rows = health_rows.assign(
        drifted=health_rows["breached_features"].where(health_rows["detector"] == DATA_DRIFT, 0),
        verdict=((health_rows["breached"] > 0) & health_rows["detector"].isin(DRIFT_VERDICTS)).astype("int64"),
        other=((health_rows["breached"] > 0)
               & ~health_rows["detector"].isin((DATA_DRIFT, *DRIFT_VERDICTS, ESTIMATED_QUALITY))).astype("int64"))
    per_version = rows.groupby(KEYS, as_index=False).agg(
        drifted_features=("drifted", "sum"), verdicts=("verdict", "sum"), others=("other", "sum"),
        quality_margin=("quality_margin", "min"))
    breached = (rows[rows["breached"] > 0].groupby(KEYS)["detector"]
                .agg(lambda names: tuple(ordered_detectors(set(names)))).rename("breached_detectors").reset_index())
    frame = (frame.merge(per_version, on=KEYS, how="left").merge(breached, on=KEYS, how="left")
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


def matching(ranked: pd.DataFrame, search: str | None) -> pd.DataFrame:
    """The ranked versions whose model name holds `search` (any case; blank: all), in their order."""
    text = (search or "").strip()
    if not text:
        return ranked
    return ranked[ranked["model"].str.contains(text, case=False, regex=False)].reset_index(drop=True)
