"""What the scheduler says about its configuration when it starts: the live alert channels, and the
per-feature thresholds that name a feature no registered baseline has.

The second check needs the store (the baselines are the only list of features), so it runs here and
not when the settings load; a feature can be registered later, hence a warning, not an error.
"""
from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from driftline.toml_sections import did_you_mean
from driftline.store.models import BaselineRecord


def describe_channels(routes: Mapping[str, str], retrain: bool) -> str:
    """One line: each live channel and the lowest severity it receives, or that nothing is notified."""
    live = ", ".join(f"{channel} from {severity}" for channel, severity in routes.items())
    text = f"alert channels: {live}" if live else \
        "alert channels: none (no channel has an endpoint set: alerts are kept in the store, nobody is notified)"
    return text + ("; retraining webhook on" if retrain else "")


def threshold_feature_warnings(session: Session, drift: Mapping[str, Any]) -> list[str]:
    """A warning per `[drift.features.NAME]` (and `[drift.models.M.features.NAME]`) whose NAME is a feature
    of no registered baseline (of model M's)."""
    wanted = [(None, name) for name in _tables(drift.get("features"))]
    for model, table in _tables(drift.get("models")).items():
        wanted += [(model, name) for name in _tables(table.get("features") if isinstance(table, Mapping) else None)]
    if not wanted:
        return []
    features: dict[str, set[str]] = {}  # model -> every feature of its baselines
    for model, summary in session.execute(select(BaselineRecord.model, BaselineRecord.summary)):
        names = {entry.get("name") for entry in (summary or {}).get("features", []) if isinstance(entry, Mapping)}
        features.setdefault(model, set()).update(n for n in names if isinstance(n, str))
    everywhere = set().union(*features.values())
    warnings = []
    for model, name in wanted:
        known = everywhere if model is None else features.get(model, set())
        if name in known:
            continue
        table = f"[drift.features.{name}]" if model is None else f'[drift.models."{model}".features.{name}]'
        owner = "no registered baseline" if model is None else f"no registered baseline of model {model!r}"
        warnings.append(f"{table}: {owner} has a feature {name!r}, so these thresholds apply to nothing"
                        f"{did_you_mean(name, sorted(known))}")
    return warnings


def _tables(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}
