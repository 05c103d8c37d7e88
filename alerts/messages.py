"""The channel-neutral message of one group notification (pure: no I/O).

Every channel renders from this document; the generic webhook sends it as is
(schema "driftline.alert/v1", docs/alerts.md has an example).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlencode

from driftline.detectors.stats import registry as statistics
from driftline.vocabulary import ESTIMATION_INVALID, family
from driftline.windows import WindowKey

from driftline.alerts.severities import severity_rank
from driftline.alerts.times import iso, iso_from_ms

SCHEMA = "driftline.alert/v1"

# Features named in a one-line title before "and N more".
TITLE_FEATURES = 5


def detector_label(detector: str) -> str:
    return family(detector).problem


def format_number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def metric_label(metric: str) -> str:
    """How an alert names its metric: a drift statistic by its registered ``label``, any other metric by its name."""
    found = statistics.statistic(metric)
    return found.label if found is not None else metric


def alert_summary(detector: str, feature: str, metric: str, value: float | None, threshold: float | None,
                  reason: str | None = None, segment: str = "") -> str:
    """One line for one alert, e.g. "data drift on income in segment region=north: psi 0.31 vs threshold 0.2"."""
    if metric == ESTIMATION_INVALID:  # not a metric beyond a level: the estimates themselves stopped holding
        return ("the estimates for this model no longer hold; the relation between inputs and outcome has likely "
                f"changed (realized outside the estimates' bands too often: p {format_number(value)} < "
                f"{format_number(threshold)})" + (f" in segment {segment}" if segment else ""))
    where = (f" on {feature}" if feature else "") + (f" in segment {segment}" if segment else "")
    text = (f"{detector_label(detector)}{where}: {metric_label(metric)} {format_number(value)} "
            f"vs threshold {format_number(threshold)}")
    return f"{text} ({reason})" if reason else text


def evidence_summary(evidence: dict[str, Any]) -> str:
    """How strong the evidence behind a sequential page was, and since which window, e.g.
    "; evidence e=3.2e+06 over its line 6.05e+05 since 2026-12-01T10:00:00Z (4 windows)"."""
    if "paging_features" in evidence:
        return f"; evidence pages on {len(evidence['paging_features'])} features ({evidence.get('share', 0):.0%})"
    since = evidence.get("since_window_start_ms")
    text = f"; evidence e={evidence.get('e_value', 0):.3g} over its line {evidence.get('line', 0):.3g}"
    return text + (f" since window {iso_from_ms(since)}" if isinstance(since, int) else "")


def dashboard_link(dashboard_url: str, model: str, version: str) -> str:
    return f"{dashboard_url.rstrip('/')}/?{urlencode({'model': model, 'version': version})}"


def alert_line(alert: Any) -> dict[str, Any]:
    details = alert.details or {}
    return {
        "fingerprint": alert.fingerprint,
        "detector": alert.detector,
        "feature": alert.feature,
        "segment": getattr(alert, "segment", "") or "",
        "metric": details.get("metric"),
        "value": alert.value,
        "threshold": alert.threshold,
        "severity": alert.severity,
        "state": alert.state,
        "summary": alert.summary,
        "started_at": iso(alert.started_at),
        "fired_at": iso(alert.fired_at),
        "resolved_at": iso(alert.resolved_at),
        "last_window_start": iso_from_ms(alert.last_window_start_ms),
        # event time (driftline.alerts.lifecycle): where the evidence began and where it fired, not wall clock
        **event_windows(getattr(alert, "first_window_start_ms", None), getattr(alert, "fired_window_start_ms", None)),
        **({"evidence": details["evidence"]} if isinstance(details.get("evidence"), dict) else {}),
    }


def event_windows(first_ms: int | None, fired_ms: int | None) -> dict[str, Any]:
    """An alert's event-time windows as epoch ms and as ISO-8601 UTC (None when unknown)."""
    return {"first_window_start_ms": first_ms, "first_window_start": iso_from_ms(first_ms),
            "fired_window_start_ms": fired_ms, "fired_window_start": iso_from_ms(fired_ms)}


def window_clock(epoch_ms: int, reference_ms: int | None = None) -> str:
    """A window start for people, "14:03 UTC"; with its date when not on `reference_ms`'s day (UTC)."""
    at = datetime.fromtimestamp(epoch_ms / 1000, timezone.utc)
    text = at.strftime("%H:%M:%S" if at.second else "%H:%M")
    if reference_ms is None or datetime.fromtimestamp(reference_ms / 1000, timezone.utc).date() != at.date():
        text = f"{at:%Y-%m-%d} {text}"
    return f"{text} UTC"


def event_windows_text(line: Mapping[str, Any], reference_ms: int | None = None) -> str:
    """"evidence from window 14:03 UTC, fired in window 14:05 UTC" for an alert line ("" when neither is known)."""
    first, fired = line.get("first_window_start_ms"), line.get("fired_window_start_ms")
    parts = ([f"evidence from window {window_clock(first, reference_ms)}"] if isinstance(first, int) else []) + (
        [f"fired in window {window_clock(fired, reference_ms)}"] if isinstance(fired, int) else [])
    return ", ".join(parts)


def _name_list(names: Sequence[str], limit: int = TITLE_FEATURES) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def title(kind: str, model: str, version: str, lines: Sequence[dict[str, Any]], related: Sequence[str]) -> str:
    detectors = sorted({line["detector"] for line in lines})
    features = [line["feature"] for line in lines if line["feature"]]
    segments = sorted({line.get("segment") or "" for line in lines})
    subject = f"{model} v{version}"
    if len(lines) > 1 and len(segments) == 1 and segments[0]:  # one alert's summary names its segment already
        subject += f" (segment {segments[0]})"
    if len(detectors) == 1 and related:
        text = f"{detector_label(detectors[0])} on {subject}: {len(related)} features drifted ({_name_list(related)})"
    elif len(detectors) == 1 and len(lines) == 1:
        text = f"{subject}: {lines[0]['summary']}"
    elif len(detectors) == 1 and len(features) == len(lines):
        noun = "feature" if len(features) == 1 else "features"
        text = f"{detector_label(detectors[0])} on {len(features)} {noun} of {subject}: {_name_list(features)}"
    else:
        text = f"{len(lines)} alerts on {subject}: " + ", ".join(detector_label(d) for d in detectors)
    prefix = {"trigger": "FIRING", "repeat": "STILL FIRING", "resolve": "RESOLVED"}[kind]
    return f"[{prefix}] {text}"


def group_message(kind: str, *, window: WindowKey, group: str, group_key: str, alerts: Iterable[Any],
                  related_features: Sequence[str], dashboard_url: str, now: datetime) -> dict[str, Any]:
    """The document of one group notification (`kind`: trigger | repeat | resolve) of the window's model version."""
    model, version, window_start_ms, window_end_ms = (window.model, window.version, window.window_start_ms,
                                                      window.window_end_ms)
    lines = [alert_line(a) for a in alerts]
    severity = max((line["severity"] for line in lines), key=severity_rank, default="warning")
    related = sorted(related_features)
    return {
        "schema": SCHEMA,
        "kind": kind,
        "status": "resolved" if kind == "resolve" else "firing",
        "title": title(kind, model, version, lines, related),
        "model": model,
        "version": version,
        "group": group,
        "group_key": group_key,
        "segments": sorted({line["segment"] for line in lines if line["segment"]}),
        "severity": severity,
        "window": {"start": iso_from_ms(window_start_ms), "end": iso_from_ms(window_end_ms),
                   "start_ms": window_start_ms, "end_ms": window_end_ms},
        "alerts": lines,
        "related_features": related,
        "dashboard_url": dashboard_link(dashboard_url, model, version),
        "created_at": iso(now),
    }
