"""Pure shaping of the Rollouts page (no I/O, no Streamlit): plans and steps in words, each arm's figures.

Verdicts, steps and the comparisons behind each verdict (its details: per arm and metric the
window's difference and interval, a shadow's largest disagreements) are shown as the rollout
analysis stored them; only the per-arm figures are computed here, from the windows' stored
results (error rate with a Wilson interval; latency quantiles have none, as in the analysis' own
comparison).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from driftline.detectors.stats.intervals import wilson_interval
from driftline.rollouts import AB, CANARY, SHADOW
from driftline.vocabulary import ERROR_RATE, P50_MS, P95_MS, P99_MS, ROLLOUT_METRICS, RolloutVerdictDetails

COMPARISON_COLUMNS = ["window_start_ms", "window_end_ms", "arm", "metric", "value", "lower", "upper", "count",
                      "insufficient_data"]
EXAMPLE_COLUMNS = ["window_start_ms", "window_end_ms", "arm", "request_id", "production", "candidate", "difference"]
ARM_COLUMNS = ["version", "role", "windows", "events", "p50_ms", "p95_ms", "p99_ms", "error_rate", "error_low",
               "error_high"]


def _percent(value: Any) -> str:
    return f"{float(value):g} %"


def plan_text(plan: Mapping[str, Any] | None) -> str:
    """One line for a plan document (RoutingPlan.to_dict); no plan is production only."""
    if not plan:
        return "production only"
    mode = plan.get("mode")
    if mode == CANARY:
        return f"canary: v{plan['candidate']} on {_percent(plan['weight'])} of requests"
    if mode == SHADOW:
        return f"shadow: v{plan['candidate']} mirrors {_percent(float(plan.get('share', 1.0)) * 100)} of requests"
    if mode == AB:
        return "A/B: " + ", ".join(f"v{a['version']} {_percent(a['weight'])}" for a in plan.get("arms", []))
    return str(plan)


def step_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """What a step changed, e.g. ``canary: v3 on 5 % of requests → canary: v3 on 25 % of requests``."""
    return f"{plan_text(before)} → {plan_text(after)}"


def arm_roles(plan: Mapping[str, Any] | None, production: str | None) -> dict[str, str]:
    """version -> its role in the plan (production, candidate, or an A/B arm's weight)."""
    roles = {production: "production"} if production else {}
    if plan and plan.get("mode") == AB:
        for arm in plan.get("arms", []):
            weight = f"arm {_percent(arm['weight'])}"
            roles[arm["version"]] = f"production, {weight}" if arm["version"] == production else weight
    elif plan:
        roles[plan["candidate"]] = f"{plan['mode']} candidate"
    return roles


def arm_table(traffic: pd.DataFrame, serving: pd.DataFrame, roles: Mapping[str, str], alpha: float) -> pd.DataFrame:
    """One row per arm: windows and events (window states), mean per-window p50/p95/p99 (ms) and the pooled
    error rate with its Wilson interval at level 1 - alpha (events-weighted over the evaluated windows)."""
    rows = []
    for version, role in roles.items():
        own = traffic[traffic["version"] == version]
        results = serving[serving["version"] == version].groupby(["window_start_ms", "metric"])["value"].mean()
        values = results.unstack("metric") if not results.empty else pd.DataFrame()
        row: dict[str, Any] = {"version": version, "role": role, "windows": int(own["window_start_ms"].nunique()),
                               "events": int(own["events"].sum())}
        for column, metric in (("p50_ms", P50_MS), ("p95_ms", P95_MS), ("p99_ms", P99_MS)):
            row[column] = float(values[metric].mean()) if metric in values else None
        row["error_rate"] = row["error_low"] = row["error_high"] = None
        if ERROR_RATE in values:
            rates = values[ERROR_RATE].dropna().rename("rate").reset_index()
            joined = rates.merge(own, on="window_start_ms", how="inner")
            events = int(joined["events"].sum())
            if events > 0:
                errors = int(round(float((joined["rate"] * joined["events"]).sum())))
                row["error_rate"] = errors / events
                row["error_low"], row["error_high"] = wilson_interval(min(errors, events), events, alpha)
        rows.append(row)
    return pd.DataFrame(rows, columns=ARM_COLUMNS)


def arm_series(frame: pd.DataFrame, value: str, roles: Mapping[str, str]) -> pd.DataFrame:
    """`time`, `series`, `value` for charts.multi_series: one line per arm (``v3 (canary candidate)``)."""
    return pd.DataFrame({"time": pd.to_datetime(frame["window_start_ms"], unit="ms", utc=True),
                         "series": [f"v{v} ({roles.get(v, '')})" for v in frame["version"]],
                         "value": frame[value].astype("float64")})


def reasons_text(reasons: Sequence[Any] | None) -> str:
    return "; ".join(str(r) for r in (reasons or []))


def comparisons(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison stored behind the verdicts (`COMPARISON_COLUMNS`), oldest window first.

    Verdicts stored without details (before the analysis kept them) add no rows.
    """
    rows = []
    for start, end, details in zip(verdicts["window_start_ms"], verdicts["window_end_ms"], verdicts["details"]):
        for found in RolloutVerdictDetails.from_dict(details).comparisons or ():
            rows.append({"window_start_ms": start, "window_end_ms": end, **{
                column: found.get(column) for column in COMPARISON_COLUMNS[2:]}})
    frame = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    for column in ("value", "lower", "upper"):
        frame[column] = frame[column].astype("float64")
    return frame


def compared_metrics(frame: pd.DataFrame) -> list[str]:
    """The metrics with a value in some window, in the vocabulary's order (`ROLLOUT_METRICS`)."""
    present = set(frame.loc[frame["value"].notna(), "metric"])
    return [m for m in ROLLOUT_METRICS if m in present] + sorted(present - set(ROLLOUT_METRICS))


def delta_series(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`time`, `series` (``v3``), `value`, `lower`, `upper` of one metric over the windows, for charts.delta_intervals."""
    chosen = frame[(frame["metric"] == metric) & frame["value"].notna()]
    return pd.DataFrame({"time": pd.to_datetime(chosen["window_start_ms"], unit="ms", utc=True),
                         "series": [f"v{arm}" for arm in chosen["arm"]], "value": chosen["value"],
                         "lower": chosen["lower"], "upper": chosen["upper"]})


def examples(verdicts: pd.DataFrame, limit: int = 50) -> pd.DataFrame:
    """A shadow's largest disagreements stored behind the verdicts (`EXAMPLE_COLUMNS`), newest window first,
    largest difference first within a window; at most `limit` rows."""
    rows = []
    for start, end, details in zip(verdicts["window_start_ms"][::-1], verdicts["window_end_ms"][::-1],
                                   verdicts["details"][::-1]):
        for found in RolloutVerdictDetails.from_dict(details).examples or ():
            rows.append({"window_start_ms": start, "window_end_ms": end,
                         **{column: found.get(column) for column in EXAMPLE_COLUMNS[2:]}})
            if len(rows) >= limit:
                return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)
    return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)


def winner_text(details: Mapping[str, Any] | None) -> str:
    """``A/B winner: v3`` when the verdict named one, else empty."""
    winner = RolloutVerdictDetails.from_dict(details).winner
    return f"A/B winner: v{winner}" if winner else ""
