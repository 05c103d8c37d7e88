"""The store's monitoring state in one read: what the scheduler's `/metrics` exports (driftline.scheduler.metrics).

Per *live* model version (the production alias' version and the versions of the model's active rollout
plan; a model without a production alias: its most recently evaluated version) the latest evaluated
window and its whole-population results; then the firing alerts, quarantined windows, dead letters and
the latest verdict of each active rollout and of each rollout that ended within
ROLLOUT_ENDED_VISIBLE_SECONDS (driftline.store.rollout_history). Everything comes from the store, so every scheduler (and a
restarted one) reads the same values. Versions that no longer serve are left out: their last window
would otherwise read as an ever-growing monitoring lag.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

from sqlalchemy import JSON, Text, and_, case, cast, func, null, or_, select, type_coerce
from sqlalchemy.orm import Session

from driftline.rollouts import RoutingPlan
from driftline.store.aliases import PRODUCTION
from driftline.store.models import (Alert, DeadLetter, DetectorResult, ModelAlias, RolloutPlan, WindowEvaluation,
                                    WindowQuarantine)
from driftline.store.rollout_history import ended_rollouts
from driftline.store.rollouts import latest_verdict
from driftline.vocabulary import ALERT_FIRING


@dataclass(frozen=True)
class LatestResult:
    """One stored result of a version's latest evaluated window (whole population only)."""

    detector: str
    feature: str
    metric: str
    value: float | None
    threshold: float | None
    breached: bool
    details: dict[str, Any]


@dataclass(frozen=True)
class FeatureTally:
    """A per-feature detector's results in one window, summed up in the store: how many features it judged,
    how many breached, and the highest value (the worst statistic)."""

    judged: int
    breached: int
    max_value: float | None


@dataclass
class VersionWindow:
    """A live model version's latest evaluated window and its results."""

    model: str
    version: str
    window_start_ms: int
    window_end_ms: int
    events: int
    status: str
    results: list[LatestResult] = field(default_factory=list)
    breaches: dict[tuple[str, str], int] = field(default_factory=dict)  # (detector, metric) -> results breaching
    # (segment, detector) -> results breaching, for each segment judged ("column=value"); only when asked for
    segment_breaches: dict[tuple[str, str], int] = field(default_factory=dict)
    # (detector, metric) -> its per-feature results summed up in the store, for the `per_feature` detectors
    features: dict[tuple[str, str], FeatureTally] = field(default_factory=dict)
    detailed: bool = True  # whether `results` holds the `per_feature` detectors' rows (the detail predicate)


@dataclass
class MonitoringSnapshot:
    windows: list[VersionWindow]
    alerts_firing: dict[tuple[str, str], int]  # (model, severity) -> firing alerts
    quarantined_windows: int
    dead_letters: int  # recorded since the store began (see `dead_letters_recorded`)
    # (model, candidate, latest verdict) of each active rollout, then of each one ended in the visibility period
    verdicts: list[tuple[str, str, str]]


def monitoring_snapshot(session: Session, detectors: Collection[str], detailed: Collection[str] = (),
                        counted: Collection[str] = (), segmented: Collection[str] = (),
                        per_feature: Collection[str] = (),
                        detail: Callable[[str], bool] = lambda _model: True) -> MonitoringSnapshot:
    """The snapshot, with the results of `detectors` (the details of those of `detailed`), breach counts per metric
    of those of `counted`, and per segment of those of `segmented`; the rows of `per_feature` detectors only for
    the models `detail` accepts, every model getting their `FeatureTally` instead."""
    windows = latest_windows(session, detectors, detailed, counted, per_feature, detail)
    if segmented:
        count_segment_breaches(session, windows, segmented)
    return MonitoringSnapshot(windows=windows, alerts_firing=firing_alerts(session),
                              quarantined_windows=int(session.scalar(
                                  select(func.count()).select_from(WindowQuarantine)) or 0),
                              dead_letters=dead_letters_recorded(session), verdicts=rollout_verdicts(session))


def live_versions(session: Session) -> dict[str, set[str]]:
    """model -> its serving versions: production and the active rollout plan's (models with an alias or a plan)."""
    live: dict[str, set[str]] = {}
    for model, version in session.execute(select(ModelAlias.model, ModelAlias.version)
                                          .where(ModelAlias.alias == PRODUCTION)):
        live.setdefault(model, set()).add(version)
    for row in session.scalars(select(RolloutPlan)):
        try:
            versions = RoutingPlan.from_dict(dict(row.plan, model=row.model, mode=row.mode)).versions
        except Exception:  # noqa: BLE001 - a plan this version cannot read must not hide the others' metrics
            versions = (str(row.plan.get("candidate", "")),)
        live.setdefault(row.model, set()).update(v for v in versions if v)
    return live


def latest_windows(session: Session, detectors: Collection[str], detailed: Collection[str] = (),
                   counted: Collection[str] = (), per_feature: Collection[str] = (),
                   detail: Callable[[str], bool] = lambda _model: True) -> list[VersionWindow]:
    """The latest evaluated window of each live model version, with its whole-population results of `detectors`
    (details only for those of `detailed`; rows of the `per_feature` detectors only for the models `detail`
    accepts), for `counted` detectors the results breaching each metric and for `per_feature` ones a
    `FeatureTally` per metric (both summed up in the store, one grouped query for every version), sorted by model
    and version. A fixed number of queries, whatever the number of models."""
    latest = _latest()
    rows = session.execute(
        select(WindowEvaluation.model, WindowEvaluation.version, WindowEvaluation.window_start_ms,
               WindowEvaluation.window_end_ms, WindowEvaluation.events, WindowEvaluation.status)
        .join(latest, (latest.c.model == WindowEvaluation.model) & (latest.c.version == WindowEvaluation.version)
              & (latest.c.start_ms == WindowEvaluation.window_start_ms))).all()
    live = live_versions(session)
    newest: dict[str, tuple[int, str]] = {}  # model without alias or plan -> (window end, version)
    for model, version, _start, end, _events, _status in rows:
        if model not in live and (model not in newest or (end, version) > newest[model]):
            newest[model] = (int(end), version)
    chosen = {(m, v): VersionWindow(m, v, int(s), int(e), int(n or 0), status, detailed=detail(m))
              for m, v, s, e, n, status in rows if v in live.get(m, ()) or (m in newest and newest[m][1] == v)}
    if not chosen:
        return []
    featured = [d for d in detectors if d in per_feature]
    _summed(session, chosen, latest, [d for d in detectors if d not in per_feature], detailed, counted, featured)
    shown = sorted({w.model for w in chosen.values() if w.detailed})
    if featured and shown:
        _feature_rows(session, chosen, latest, featured, detailed,
                      None if len(shown) == len({w.model for w in chosen.values()}) else shown)
    return [chosen[key] for key in sorted(chosen)]


def _latest() -> Any:
    """Each model version's latest evaluated window start, as a subquery (model, version, start_ms)."""
    return (select(WindowEvaluation.model, WindowEvaluation.version,
                   func.max(WindowEvaluation.window_start_ms).label("start_ms"))
            .group_by(WindowEvaluation.model, WindowEvaluation.version).subquery())


def _on(latest: Any) -> Any:
    """Results of the `latest` windows: joined to them, not matched against a list of their keys, so the results'
    index is probed where a list of a thousand (model, version, start) keys made SQLite scan every stored result."""
    return and_(DetectorResult.model == latest.c.model, DetectorResult.version == latest.c.version,
                DetectorResult.window_start_ms == latest.c.start_ms)


def _summed(session: Session, chosen: dict[tuple[str, str], VersionWindow], latest: Any, plain: Collection[str],
            detailed: Collection[str], counted: Collection[str], per_feature: Collection[str]) -> None:
    """One pass over the `latest` windows' results: the rows of the `plain` detectors (their details when
    `detailed`), the breaches of the `counted` ones per metric and a `FeatureTally` per metric of the `per_feature`
    ones. One grouped query, each plain row a group of its own: every pass costs a visit to every result of the
    windows (their index holds model, version and window only), a thousand models' ~200 000 rows."""
    r = DetectorResult
    row_wise = [d for d in plain if d not in counted]
    own = case((r.detector.in_(row_wise), r.feature), else_="")  # a plain row keeps its feature: its own group
    # the detail of a group of one row; a text cast, as PostgreSQL has no max() of json
    details = func.max(case((r.detector.in_([d for d in row_wise if d in detailed]), cast(r.details, Text))))
    query = (select(r.model, r.version, r.detector, r.metric, own, func.count(),
                    func.sum(case((r.breached, 1), else_=0)), func.max(r.value), func.max(r.threshold), details)
             .join(latest, _on(latest))
             .where(r.segment == "", or_(r.detector.in_([*row_wise, *counted]),
                                         and_(r.detector.in_(per_feature), r.feature != "")))
             .group_by(r.model, r.version, r.detector, r.metric, own))
    for model, version, detector, metric, feature, n, hits, top, threshold, found in session.execute(query):
        window = chosen.get((model, version))
        if window is None:  # a retired version's latest window
            continue
        if detector in counted:
            window.breaches[(detector, metric)] = int(hits or 0)
        elif detector in per_feature:
            window.features[(detector, metric)] = FeatureTally(int(n), int(hits or 0),
                                                               None if top is None else float(top))
        else:
            parsed = json.loads(found) if isinstance(found, str) else found
            window.results.append(LatestResult(detector, feature or "", metric, top, threshold, bool(hits),
                                               parsed if isinstance(parsed, dict) else {}))


def _feature_rows(session: Session, chosen: dict[tuple[str, str], VersionWindow], latest: Any,
                  per_feature: Collection[str], detailed: Collection[str], models: list[str] | None) -> None:
    """The rows of the `per_feature` detectors (their details when `detailed`) for `models` (None: every one)."""
    r = DetectorResult
    query = (select(r.model, r.version, r.detector, r.feature, r.metric, r.value, r.threshold, r.breached,
                    type_coerce(case((r.detector.in_(detailed), r.details), else_=null()), JSON))
             .join(latest, _on(latest)).where(r.segment == "", r.detector.in_(per_feature)))
    if models is not None:
        query = query.where(r.model.in_(models))
    for model, version, detector, feature, metric, value, threshold, breached, details in session.execute(query):
        window = chosen.get((model, version))
        if window is not None:  # not a retired version's latest window
            window.results.append(LatestResult(detector, feature or "", metric, value, threshold, bool(breached),
                                               details if isinstance(details, dict) else {}))


def count_segment_breaches(session: Session, windows: list[VersionWindow], detectors: Collection[str]) -> None:
    """Fill each window's `segment_breaches`: per segment and detector of `detectors`, the results breaching."""
    by_key = {(w.model, w.version, w.window_start_ms): w for w in windows}
    if not by_key:
        return
    breached, latest = func.sum(case((DetectorResult.breached, 1), else_=0)), _latest()
    for model, version, start, segment, detector, n in session.execute(
            select(DetectorResult.model, DetectorResult.version, DetectorResult.window_start_ms, DetectorResult.segment,
                   DetectorResult.detector, breached).join(latest, _on(latest))
            .where(DetectorResult.segment != "", DetectorResult.detector.in_(detectors))
            .group_by(DetectorResult.model, DetectorResult.version, DetectorResult.window_start_ms,
                      DetectorResult.segment, DetectorResult.detector)):
        if (model, version, int(start)) in by_key:  # not a retired version's
            by_key[(model, version, int(start))].segment_breaches[(segment, detector)] = int(n or 0)


def firing_alerts(session: Session) -> dict[tuple[str, str], int]:
    return {(model, severity): int(n) for model, severity, n in session.execute(
        select(Alert.model, Alert.severity, func.count()).where(Alert.state == ALERT_FIRING)
        .group_by(Alert.model, Alert.severity))}


def dead_letters_recorded(session: Session) -> int:
    """Dead letters recorded since the store began: the highest dead-letter id, which retention's pruning of the
    oldest rows does not lower (a row count would drop, and a Prometheus counter that drops reads as a reset)."""
    return int(session.scalar(select(func.max(DeadLetter.id))) or 0)


def rollout_verdicts(session: Session) -> list[tuple[str, str, str]]:
    """(model, candidate, final verdict) of the active rollouts, then of those that ended within
    ROLLOUT_ENDED_VISIBLE_SECONDS (a rollback overnight stays visible); one per (model, candidate): a running
    rollout's, else the most recently ended one's."""
    found, seen = [], set()
    for model, candidate in session.execute(select(RolloutPlan.model, RolloutPlan.plan).order_by(RolloutPlan.model)):
        name = str(candidate.get("candidate", ""))
        latest = latest_verdict(session, model, name)
        if latest is not None:
            found.append((model, name, latest["verdict"]))
            seen.add((model, name))
    for ended in ended_rollouts(session):  # most recent end first
        key = (ended["model"], str(ended["candidate"] or ""))
        if ended["verdict"] is not None and key[1] and key not in seen:
            found.append((*key, ended["verdict"]))
            seen.add(key)
    return found
