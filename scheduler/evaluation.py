"""Window evaluation: the I/O around the pure detectors (driftline.detectors.families.window.evaluate_window).

Finds closed windows that have no evaluation yet, or whose partial states changed since (late events,
labels). A window is closed when the stream's low watermark (driftline.watermarks: the event time every
collector has stored on every partition, an idle partition counting as the wall clock) less the allowed
lateness has passed its end, so a backlog is judged as the live stream was: each window once, complete.
A version's windows are judged for the first time in event-time order: none while an earlier window of
the version waits in quarantine (for its first `QUARANTINE_HOLD_ATTEMPTS` tries), so the sequential
evidence sees every window once, in order. Events stored after a window was judged (truly late) re-judge
it; they are counted in its `late_events` and leave the evidence as its first judgment left it. It merges
the partial states every collector wrote, reads the version's training baseline and,
for a window short of labels, the earlier windows' labels (`earlier_labels`), and for a version whose
estimates are checked, the earlier windows' checks of their estimates (`earlier_checks`), hands them
to `evaluate_window`, and stores its `WindowOutcome` in place of that window's results,
in one transaction. Then the
alert lifecycle and the retraining policy see the new results (driftline.scheduler.jobs).
Evaluating a window twice gives the same rows: the job is idempotent. A window whose
evaluation raises is quarantined (driftline.scheduler.quarantine) and skipped until its next retry.
Each evaluation first claims its window (driftline.scheduler.claims): one scheduler per window.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Callable

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session, defer

from driftline.detectors.estimation.validity import WindowCheck
from driftline.detectors.families.pooled_labels import PooledLabels, pooling_wanted
from driftline.detectors.families.window import WindowOutcome, evaluate_window
from driftline import vocabulary
from driftline.baseline import BINARY, Baseline, LabelSummary
from driftline.result_details import compact_details
from driftline import defaults
from driftline.store.models import (BaselineRecord, DetectorResult, ModelVersion, WindowEvaluation,
                                    WindowQuarantine, WindowStateRecord, utcnow)
from driftline.store.watermarks import stream_watermark
from driftline.transform import TransformNotAllowed, load_transform
from driftline.window_state import WindowState
from driftline.windows import WindowKey

from driftline.scheduler.evaluation_config import EvaluationConfig
from driftline.scheduler.evidence import advance_evidence, previous_evidence

# Windows older than this are not re-examined for changes (labels may arrive days late,
# and the collector keeps predictions for the label join for 7 days by default).
REEVALUATION_HORIZON_MS = 7 * 24 * 3600 * 1000
# Decoded label summaries of stored partial states kept for pooling (a few KB each).
_LABEL_CACHE_ENTRIES = 4_096


def due_windows(session: Session, now_ms: int, lateness_ms: int, limit: int = 500,
                window: WindowKey | None = None,
                idle_ms: int = defaults.IDLE_PARTITION_SECONDS * 1000) -> list[WindowKey]:
    """Closed windows never evaluated, or changed since their evaluation, oldest first; a quarantined
    window only once its next retry is due, and no version's window judged for the first time while an
    earlier one of it is held in quarantine. `window`: that one only (is it still due?)."""
    watermark = stream_watermark(session, now_ms, idle_ms)
    if watermark is None:
        return []  # a partition no collector has stored yet holds every window back
    closed_ms = watermark - lateness_ms
    states = (
        select(WindowStateRecord.model, WindowStateRecord.version, WindowStateRecord.window_start_ms,
               func.max(WindowStateRecord.window_end_ms).label("end_ms"),
               func.max(WindowStateRecord.updated_at).label("updated_at"))
        .where(WindowStateRecord.window_end_ms <= closed_ms,
               WindowStateRecord.window_end_ms >= closed_ms - REEVALUATION_HORIZON_MS)
        .group_by(WindowStateRecord.model, WindowStateRecord.version, WindowStateRecord.window_start_ms))
    if window is not None:
        states = states.where(WindowStateRecord.model == window.model, WindowStateRecord.version == window.version,
                              WindowStateRecord.window_start_ms == window.window_start_ms)
    states = states.subquery()
    now = datetime.fromtimestamp(now_ms / 1000.0, tz=timezone.utc)
    rows = session.execute(
        select(states.c.model, states.c.version, states.c.window_start_ms, states.c.end_ms,
               WindowEvaluation.id.is_(None))
        .outerjoin(WindowEvaluation, (WindowEvaluation.model == states.c.model)
                   & (WindowEvaluation.version == states.c.version)
                   & (WindowEvaluation.window_start_ms == states.c.window_start_ms))
        .outerjoin(WindowQuarantine, (WindowQuarantine.model == states.c.model)
                   & (WindowQuarantine.version == states.c.version)
                   & (WindowQuarantine.window_start_ms == states.c.window_start_ms))
        .where((WindowEvaluation.id.is_(None)) | (WindowEvaluation.evaluated_at < states.c.updated_at))
        # a quarantined window waits for its next retry (driftline.scheduler.quarantine)
        .where((WindowQuarantine.id.is_(None)) | (WindowQuarantine.next_retry_at <= now))
        .order_by(states.c.window_start_ms)
        .limit(limit))
    held = held_versions(session)
    return [WindowKey(m, v, int(s), int(e)) for m, v, s, e, first in rows
            if not (first and (m, v) in held and int(s) > held[(m, v)])]


def held_versions(session: Session) -> dict[tuple[str, str], int]:
    """(model, version) -> the start of its earliest window in quarantine that still holds its later windows."""
    return {(m, v): int(start) for m, v, start in session.execute(
        select(WindowQuarantine.model, WindowQuarantine.version, func.min(WindowQuarantine.window_start_ms))
        .where(WindowQuarantine.attempts < defaults.QUARANTINE_HOLD_ATTEMPTS)
        .group_by(WindowQuarantine.model, WindowQuarantine.version))}


class BaselineCache:
    """Baselines and transforms per model version (immutable once registered, so cached for good)."""

    def __init__(self) -> None:
        self._baselines: dict[tuple[str, str], Baseline] = {}
        self._transforms: dict[tuple[str, str], Callable | None] = {}
        # (row id, updated_at) -> the row's LabelSummary: earlier windows are read again for
        # every later window that pools their labels
        self._labels: OrderedDict[tuple[Any, Any], LabelSummary] = OrderedDict()
        # versions whose fallback from reference-derived to fixed thresholds was logged already
        self.threshold_notes: set[tuple[str, str]] = set()

    def labels(self, record: WindowStateRecord) -> LabelSummary:
        """The label summary of one stored partial state (decoded once per version of the row)."""
        key = (record.id, record.updated_at)
        found = self._labels.get(key)
        if found is None:
            found = self._labels[key] = WindowState.from_bytes(record.state).labels
            if len(self._labels) > _LABEL_CACHE_ENTRIES:
                self._labels.popitem(last=False)
        else:
            self._labels.move_to_end(key)
        return found

    def baseline(self, session: Session, model: str, version: str) -> Baseline | None:
        key = (model, version)
        if key not in self._baselines:
            record = session.scalar(select(BaselineRecord).where(BaselineRecord.model == model,
                                                                 BaselineRecord.version == version))
            if record is None:
                return None  # not registered yet: look again next time
            self._baselines[key] = Baseline.from_dict(record.summary)
        return self._baselines[key]

    def transform(self, session: Session, model: str, version: str) -> Callable | None:
        key = (model, version)
        if key not in self._transforms:
            spec = session.scalar(select(ModelVersion.transform).where(ModelVersion.model == model,
                                                                       ModelVersion.version == version))
            try:
                self._transforms[key] = load_transform(spec)
            except TransformNotAllowed as exc:  # the store named a path off the allow-list: never imported
                logging.getLogger(__name__).error("%s version %s: its feature transform is refused, so parity skew "
                                                  "is not checked: %s", model, version, exc)
                self._transforms[key] = None
            except Exception as exc:  # noqa: BLE001 - one missing transform must not stop the other detectors
                logging.getLogger(__name__).error("%s version %s: its feature transform cannot be loaded, so parity "
                                                  "skew is not checked: %s", model, version, exc)
                self._transforms[key] = None
        return self._transforms[key]


def evaluate(session: Session, key: WindowKey, cache: BaselineCache, config: EvaluationConfig) -> WindowEvaluation:
    """Merge the window's partial states, run the detectors, replace the window's stored results."""
    baseline = cache.baseline(session, key.model, key.version)
    records = session.scalars(select(WindowStateRecord).where(
        WindowStateRecord.model == key.model, WindowStateRecord.version == key.version,
        WindowStateRecord.window_start_ms == key.window_start_ms)).all()
    state = WindowState.merge_all([WindowState.from_bytes(r.state, baseline) for r in records], baseline)
    thresholds = config.thresholds_for(key.model)
    # earlier windows are read only for a window short of labels: most windows never need them
    pooled = (earlier_labels(session, key, cache, thresholds.quality_pool_max_windows)
              if baseline is not None and pooling_wanted(state.labels, thresholds.quality_pool_min_labels)
              else PooledLabels())
    # only a binary classifier with training labels has estimates whose earlier checks matter
    estimated = baseline is not None and baseline.quality is not None and baseline.quality.task == BINARY
    history = earlier_checks(session, key) if estimated else {}
    # Without a baseline (a version not registered yet) only latency can be judged.
    outcome = evaluate_window(baseline, state, thresholds=thresholds,
                              slo=config.slo_for(key.model), window_seconds=config.window_seconds,
                              transform=cache.transform(session, key.model, key.version) if baseline else None,
                              freshness=config.freshness_for(key.model), segments=config.segments,
                              pooled_labels=pooled, estimate_history=history.get("", ()), segment_estimate_history=history)
    if outcome.threshold_note is not None and (key.model, key.version) not in cache.threshold_notes:
        cache.threshold_notes.add((key.model, key.version))  # once per version: every window would say it
        logging.getLogger(__name__).warning("%s version %s: %s", key.model, key.version, outcome.threshold_note)
    if baseline is not None:
        advance_evidence(session, key, outcome.results, config.paging_for(key.model), previous_evidence(session, key),
                         baseline.fingerprint)
    return store_outcome(session, key, outcome, events=sum(r.events for r in records), partitions=len(records))


def store_outcome(session: Session, key: WindowKey, outcome: WindowOutcome, *, events: int,
                  partitions: int) -> WindowEvaluation:
    """Replace the window's stored evaluation and results with `outcome` (no commit)."""
    session.execute(delete(DetectorResult).where(
        DetectorResult.model == key.model, DetectorResult.version == key.version,
        DetectorResult.window_start_ms == key.window_start_ms))
    evaluation = session.scalar(select(WindowEvaluation).where(
        WindowEvaluation.model == key.model, WindowEvaluation.version == key.version,
        WindowEvaluation.window_start_ms == key.window_start_ms))
    if evaluation is None:
        evaluation = WindowEvaluation(model=key.model, version=key.version, window_start_ms=key.window_start_ms,
                                      late_events=0)
        session.add(evaluation)
    else:  # judged before: what came since is late (it re-judges the window, not the evidence)
        evaluation.late_events = int(evaluation.late_events or 0) + max(events - int(evaluation.events or 0), 0)
    evaluation.window_end_ms = key.window_end_ms
    evaluation.events = events
    evaluation.partitions = partitions
    evaluation.status = outcome.status
    evaluation.summary = {"breached": list(outcome.breached)}
    if outcome.segments_breached:
        evaluation.summary["segments_breached"] = list(outcome.segments_breached)
    evaluation.evaluated_at = utcnow()
    if outcome.results:  # one multi-row INSERT: ORM objects for a window's ~100 results cost more than the statement
        evaluated_at = evaluation.evaluated_at
        session.execute(insert(DetectorResult), [dict(
            model=key.model, version=key.version, window_start_ms=key.window_start_ms,
            window_end_ms=key.window_end_ms, detector=r.detector, feature=r.feature or "", metric=r.metric,
            value=_finite(r.value), threshold=_finite(r.threshold), breached=bool(r.breached),
            details=compact_details(r.details or {}), segment=r.segment or "", evaluated_at=evaluated_at) for r in outcome.results])
    return evaluation


def earlier_labels(session: Session, key: WindowKey, cache: BaselineCache, max_windows: int) -> PooledLabels:
    """The label summaries of the (at most `max_windows`) windows just before `key`, same model version, newest
    first; each stored partial state is decoded once per version of its row (`cache`). A state that cannot be
    decoded is left out (it is quarantined on its own)."""
    window_ms = key.window_ms
    if max_windows <= 0 or window_ms <= 0:
        return PooledLabels()
    records = session.scalars(select(WindowStateRecord).where(
        WindowStateRecord.model == key.model, WindowStateRecord.version == key.version,
        WindowStateRecord.window_start_ms >= key.window_start_ms - max_windows * window_ms,
        WindowStateRecord.window_start_ms < key.window_start_ms)
        # the blob is read only when the cache has not decoded this version of the row yet
        .options(defer(WindowStateRecord.state))
        .order_by(WindowStateRecord.window_start_ms.desc())).all()
    parts = []
    for record in records:
        try:
            parts.append((int(record.window_start_ms), cache.labels(record)))
        except Exception:  # noqa: BLE001 - an undecodable neighbour is quarantined on its own; pool without it
            continue
    return PooledLabels(tuple(parts))


def earlier_checks(session: Session, key: WindowKey,
                   lookback: int = defaults.ESTIMATION_INVALID_LOOKBACK_WINDOWS) -> dict[str, list[WindowCheck]]:
    """Per segment (``""``: the whole population), the checks of their estimates against their own labels
    (``details["missed"]`` of each window's stored ``estimation_invalid`` result) of the windows before `key`, same
    model version, at most `lookback` windows back, oldest first; a window whose estimates were not checked (too
    few labels) is left out. A window re-judged when its labels came carries its new check, so the history is
    always the latest."""
    window_ms = key.window_ms
    if lookback <= 0 or window_ms <= 0:
        return {}
    rows = session.execute(select(DetectorResult.segment, DetectorResult.window_start_ms, DetectorResult.details)
        .where(DetectorResult.model == key.model, DetectorResult.version == key.version,
               DetectorResult.detector == vocabulary.ESTIMATED_QUALITY,
               DetectorResult.metric == vocabulary.ESTIMATION_INVALID,
               DetectorResult.window_start_ms < key.window_start_ms,
               DetectorResult.window_start_ms >= key.window_start_ms - lookback * window_ms)
        .order_by(DetectorResult.window_start_ms)).all()
    out: dict[str, list[WindowCheck]] = {}
    for segment, start, details in rows:
        if isinstance(details, dict) and isinstance(missed := details.get("missed"), list):
            out.setdefault(segment or "", []).append(WindowCheck(tuple(str(m) for m in missed), int(start)))
    return out


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def now_ms() -> int:
    return int(time.time() * 1000)
