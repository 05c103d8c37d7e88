"""A realistic store for the dashboard's tests, screenshots and demos: `seed_store(db_url)`.

It writes what the other stages would have written after a few hours of traffic,
with the real core types (a `Baseline` per version, `WindowState` blobs split over
two collector partitions, detector results computed from those states), so every
page has something true to show:

* ``credit-default``: version 1 drifts (applicants' income and credit scores fall),
  a retraining request produces version 2, which is promoted; version 3 comes from a
  second request, is promoted, loses on quality and is rolled back. Version 2 then
  breaches its latency SLO, starts receiving nulls in ``credit_score`` and finally
  sees credit utilisation drift: two alerts are firing and one pending at the end,
  one notification failed to deliver. From then on its windows keep segments of ``region``
  (``[segments]``): the applicants of ``region=north`` report lower incomes, so that segment's
  ``annual_income`` drifts while the other regions stay quiet, and a segment alert fires.
* ``fraud-score``: one healthy version, with a latency alert that fired and resolved. In the last
  windows its version 2 is in a canary: started at 25 % from the command line, judged window by
  window by the scheduler's rollout analysis (error rate and p99 against production, quality and
  the candidate's prediction drift as well), stepped up to 50 % by the policy after it passed.

Every window is evaluated by the real detectors, through the scheduler's evaluation
job, so the pages show the names and details of `driftline.vocabulary`. Run
``python -m tests.support.demo_store --db URL`` from the repository root to fill a
store for a demo (the store must be migrated: ``driftline db upgrade``).
"""
from __future__ import annotations

import argparse
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select

from driftline import defaults, vocabulary
from driftline.baseline import Baseline, compute_baseline
from driftline.store.db import session_scope
from driftline.rollouts import canary_plan
from driftline.segments import SegmentSpec, segment_key
from driftline.store.models import (Alert, AliasEvent, BaselineRecord, DeadLetter, DetectorResult, ModelAlias,
                                    ModelVersion, Notification, RetrainRequest, RolloutPlan, RolloutStep,
                                    RolloutVerdictRecord, Silence, WindowStateRecord)
from driftline.store.rollouts import set_plan
from driftline.vocabulary import DATA_DRIFT, DATA_QUALITY, LATENCY, PREDICTION_DRIFT, SKEW
from driftline.window_state import EventBatch, WindowState

CREDIT = "credit-default"
FRAUD = "fraud-score"
CREDIT_CATEGORICAL = ("region", "employment_type", "home_ownership")
FRAUD_CATEGORICAL = ("merchant_category", "channel")
# Events kept per partition state: enough for the report page, small enough to seed fast.
SAMPLE_PER_PARTITION = 100
# credit-default v2's windows keep segments of this column from SEGMENTS_FROM of the run on; one segment drifts.
SEGMENTS = SegmentSpec(columns=("region",))
SEGMENTS_FROM = 0.8
DRIFTING_SEGMENT = "region=north"
SEGMENT_MIN_ROWS = 40
# fraud-score's canary: its candidate, the weight the command line set, and its length in windows. The
# policy judges `windows` windows per stage, so a canary shorter than two stages steps up at most once.
CANARY_CANDIDATE = "2"
CANARY_START_WEIGHT = 25
CANARY_WINDOWS = 11
CANARY_POLICY = {"windows": 6, "min_events": 30, "min_labels": 30, "max_error_rate_increase": 0.03,
                 "critical": ["error_rate_delta", "p99_delta_ms"], "auto_promote": True}


@dataclass
class SeedSummary:
    """What was written, so tests can assert on the pages without hard-coding numbers."""

    window_seconds: int
    first_window_ms: int
    last_window_ms: int
    windows: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (model, version) -> starts
    production: dict[str, str] = field(default_factory=dict)
    firing: list[dict[str, str]] = field(default_factory=list)
    drifted_windows: dict[tuple[str, str], dict[int, list[str]]] = field(default_factory=dict)
    # segment ("column=value") -> features breached in any of its windows (credit-default v2)
    drifted_segments: dict[str, list[str]] = field(default_factory=dict)
    # the canary: model, candidate, weight now, and the verdicts and steps the rollout analysis wrote
    rollout: dict[str, Any] = field(default_factory=dict)


# --- synthetic traffic ------------------------------------------------------------

def credit_rows(rng: np.random.Generator, n: int, income_shift: float = 0.0, score_shift: float = 0.0,
                score_nulls: float = 0.0, utilization_shift: float = 0.0, north_income_shift: float = 0.0
                ) -> pd.DataFrame:
    """Loan applications as model features (the names of driftline.worker.feature_transform.FEATURES)."""
    age = np.clip(rng.normal(41, 12, n), 18, 90).round()
    income = np.exp(rng.normal(np.log(52_000) + income_shift, 0.45, n)).round(-2)
    loan = np.clip(np.exp(rng.normal(np.log(14_000), 0.65, n)), 500, 500_000).round(-2)
    score = np.clip(rng.normal(690 + score_shift, 55, n), 300, 850).round()
    late = rng.poisson(0.5, n).astype(float)
    frame = pd.DataFrame({
        "age": age, "annual_income": income, "loan_amount": loan,
        "loan_term_months": rng.choice([12.0, 24.0, 36.0, 48.0, 60.0], n, p=[0.1, 0.2, 0.35, 0.15, 0.2]),
        "credit_score": score, "debt_to_income": rng.beta(2, 6, n).round(4),
        "loan_to_income": (loan / income).round(4),
        "credit_utilization": rng.beta(2 + 2 * utilization_shift, 3 - 1.5 * utilization_shift, n).round(4),
        "num_credit_lines": (1 + rng.poisson(3 + age / 20)).astype(float), "num_late_payments": late,
        "employment_years": np.minimum(age - 18, rng.gamma(2.0, 3.5, n)).round(1),
        "region": rng.choice(["north", "south", "east", "west", "central"], n, p=[0.22, 0.24, 0.2, 0.2, 0.14]),
        "employment_type": rng.choice(["salaried", "self_employed", "contract", "unemployed", "retired"], n,
                                      p=[0.62, 0.14, 0.14, 0.06, 0.04]),
        "home_ownership": rng.choice(["own", "mortgage", "rent"], n, p=[0.3, 0.35, 0.35]),
    })
    if north_income_shift:  # applicants of one region only: a drift the whole population hides
        north = (frame["region"] == "north").to_numpy()
        frame.loc[north, "annual_income"] = (frame.loc[north, "annual_income"] * math.exp(north_income_shift)).round(-2)
        frame["loan_to_income"] = (frame["loan_amount"] / frame["annual_income"]).round(4)
    if score_nulls:
        frame["credit_score"] = frame["credit_score"].astype(object)
        frame.loc[rng.random(n) < score_nulls, "credit_score"] = None
    return frame


def credit_probability(frame: pd.DataFrame) -> np.ndarray:
    score = pd.to_numeric(frame["credit_score"], errors="coerce").fillna(690).to_numpy(dtype=float)
    z = (-1.4 + 3.0 * (frame["debt_to_income"].to_numpy() - 0.25) - 0.011 * (score - 690)
         + 0.35 * frame["num_late_payments"].to_numpy() + 1.6 * (frame["credit_utilization"].to_numpy() - 0.4))
    return 1.0 / (1.0 + np.exp(-z))


def fraud_rows(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "amount": np.exp(rng.normal(3.5, 1.1, n)).round(2),
        "hour": rng.integers(0, 24, n).astype(float),
        "distance_km": rng.exponential(12.0, n).round(1),
        "merchant_category": rng.choice(["grocery", "travel", "online", "fuel", "restaurant"], n,
                                        p=[0.3, 0.1, 0.35, 0.1, 0.15]),
        "channel": rng.choice(["card_present", "ecommerce", "wallet"], n, p=[0.5, 0.35, 0.15]),
    })


def fraud_probability(frame: pd.DataFrame) -> np.ndarray:
    z = -3.0 + 0.4 * (np.log(frame["amount"].to_numpy()) - 3.5) + 0.03 * frame["distance_km"].to_numpy()
    return 1.0 / (1.0 + np.exp(-z))


def _json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    names = list(frame.columns)
    columns = [[None if isinstance(v, float) and v != v else v for v in frame[name].tolist()] for name in names]
    return [dict(zip(names, values)) for values in zip(*columns)]


def _events(rng: np.random.Generator, model: str, version: str, frame: pd.DataFrame, probability: np.ndarray,
            start_ms: int, window_ms: int, p99_target: float, error_rate: float) -> list[dict[str, Any]]:
    n = len(frame)
    ts = np.sort(rng.integers(start_ms, start_ms + window_ms, n))
    # Log-normal latency whose 99th percentile is about p99_target.
    total = np.exp(rng.normal(math.log(p99_target) - 2.326 * 0.5, 0.5, n))
    queue = total * rng.uniform(0.1, 0.4, n)
    errors = rng.random(n) < error_rate
    cached = rng.random(n) < 0.18
    sizes = rng.choice([1, 2, 4, 8, 16, 32], n, p=[0.15, 0.2, 0.25, 0.2, 0.12, 0.08])
    ages = rng.exponential(30_000.0, n)  # credit_score comes from an online store: how old each value was
    out = []
    for i, features in enumerate(_json_records(frame)):
        event = {"schema": "driftline.inference/v1", "event_id": uuid.UUID(int=int(rng.integers(0, 2**63))).hex,
                 "request_id": f"r-{model}-{version}-{int(ts[i])}-{i}", "ts": int(ts[i]), "model": model,
                 "version": version, "features": features,
                 "prediction": None if errors[i] else round(float(probability[i]), 5),
                 "latency_ms": {"total": round(float(total[i]), 3), "queue": round(float(queue[i]), 3),
                                "compute": round(float(total[i] - queue[i]), 3)},
                 "status": "error" if errors[i] else "ok", "cache_hit": bool(cached[i]), "batch_size": int(sizes[i])}
        if errors[i]:
            event["error"] = "model raised ValueError"
        if model == CREDIT:
            event["feature_age_ms"] = {"credit_score": round(float(ages[i]), 1)}
        out.append(event)
    return out


# --- the scenario ---------------------------------------------------------------------

def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def _baseline(rng: np.random.Generator, model: str, rows: int = 4000) -> Baseline:
    if model == CREDIT:
        frame = credit_rows(rng, rows)
        probability, categorical = credit_probability(frame), CREDIT_CATEGORICAL
    else:
        frame = fraud_rows(rng, rows)
        probability, categorical = fraud_probability(frame), FRAUD_CATEGORICAL
    labels = (rng.random(rows) < probability).astype(np.int64)
    return compute_baseline(frame, categorical=categorical, predictions=probability, labels=labels,
                            sample_size=500, seed=int(rng.integers(0, 2**31)))


def seed_store(db_url: str, *, now_ms: int | None = None, windows: int = 240, window_seconds: int = 60,
               events_per_window: int = 240, seed: int = 7) -> SeedSummary:
    """Fill a migrated, empty store with the scenario of the module docstring; returns what was written.

    `windows` windows of `window_seconds` end at the last whole window before `now_ms`.
    Every window is evaluated with the scheduler's own job (`driftline.scheduler.evaluation.evaluate`, the real detectors).
    """
    if windows < 60:
        raise ValueError("the scenario needs at least 60 windows")
    rng = np.random.default_rng(seed)
    window_ms = window_seconds * 1000
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    end = now_ms // window_ms * window_ms
    first = end - windows * window_ms
    starts = [first + i * window_ms for i in range(windows)]
    at = lambda share: starts[min(int(share * windows), windows - 1)]  # noqa: E731 - a point on the timeline
    # Timeline (shares of the run): v1 serves until 1/3, drifting from 0.2; v2 from 1/3;
    # v3 between 0.62 and 0.68, then rolled back; v2's latency from 0.8, nulls in credit_score
    # from 0.86, and its applicants' credit utilisation shifts from 0.93.
    v2_from, v3_from, v3_to, trouble_from = at(1 / 3), at(0.62), at(0.68), at(0.8)
    summary = SeedSummary(window_seconds=window_seconds, first_window_ms=first, last_window_ms=starts[-1])

    baselines = {(CREDIT, v): _baseline(rng, CREDIT) for v in ("1", "2", "3")}
    baselines[(FRAUD, "1")] = _baseline(rng, FRAUD)

    def serving(model: str, start: int) -> str:
        if model == FRAUD:
            return "1"
        if start < v2_from:
            return "1"
        return "3" if v3_from <= start < v3_to else "2"

    with session_scope(db_url) as session:
        created = {"1": at(0) - 86_400_000, "2": v2_from - 300_000, "3": v3_from - 300_000}
        for (model, version), baseline in baselines.items():
            made = created[version] if model == CREDIT else at(0) - 2 * 86_400_000
            quality = {"1": (0.79, 0.44), "2": (0.81, 0.42), "3": (0.78, 0.47)}[version]
            session.add(ModelVersion(
                model=model, version=version, artifact_path=f"/models/{model}/{version}/model.pt",
                metrics={"auc": quality[0], "log_loss": quality[1], "accuracy": quality[0] + 0.02,
                         "rows": baseline.rows},
                feature_schema=[{"name": n, "kind": p.kind} for n, p in baseline.profiles.items()],
                stage="production" if (model, version) in ((CREDIT, "2"), (FRAUD, "1")) else "registered",
                description="bundled credit-default MLP" if model == CREDIT else "fraud scorer served elsewhere",
                created_at=_dt(made)))
            session.add(BaselineRecord(model=model, version=version, rows=baseline.rows,
                                       summary=baseline.to_dict(), source="train", created_at=_dt(made)))
        session.add(ModelAlias(model=CREDIT, alias="production", version="2", updated_at=_dt(v3_to)))
        session.add(ModelAlias(model=FRAUD, alias="production", version="1", updated_at=_dt(at(0) - 86_400_000)))
        for model, version, previous, action, reason, when in (
                (FRAUD, "1", None, "promote", "first version", at(0) - 86_400_000),
                (CREDIT, "1", None, "promote", "first version", created["1"] + 60_000),
                (CREDIT, "2", "1", "retrain", "retrain request 1: drift in annual_income, credit_score", v2_from),
                (CREDIT, "3", "2", "retrain", "retrain request 2: scheduled retrain", v3_from),
                (CREDIT, "2", "3", "rollback", "log loss 0.47 worse than 0.42 on live labels", v3_to)):
            session.add(AliasEvent(model=model, alias="production", version=version, previous_version=previous,
                                   action=action, reason=reason, at=_dt(when)))
        summary.production = {CREDIT: "2", FRAUD: "1"}

        fraud_events: dict[int, int] = {}
        for index, start in enumerate(starts):
            for model in (CREDIT, FRAUD):
                version = serving(model, start)
                baseline = baselines[(model, version)]
                drifting = model == CREDIT and version == "1" and start >= at(0.2)
                trouble = model == CREDIT and version == "2" and start >= trouble_from
                n = int(events_per_window * (1.0 if model == CREDIT else 0.5) * rng.uniform(0.85, 1.15))
                if model == CREDIT:
                    ramp = min((start - at(0.2)) / max(v2_from - at(0.2), 1), 1.0) if drifting else 0.0
                    frame = credit_rows(rng, n, income_shift=-0.45 * ramp, score_shift=-40 * ramp,
                                        score_nulls=0.15 if trouble and start >= at(0.86) else 0.0,
                                        utilization_shift=0.6 if trouble and start >= at(0.93) else 0.0,
                                        north_income_shift=-0.35 if trouble and start >= at(0.88) else 0.0)
                    probability = credit_probability(frame)
                else:
                    frame = fraud_rows(rng, n)
                    probability = fraud_probability(frame)
                p99 = 400.0 if trouble else (35.0 if model == CREDIT else 20.0)
                if model == FRAUD and at(0.4) <= start < at(0.45):
                    p99 = 320.0
                events = _events(rng, model, version, frame, probability, start, window_ms, p99,
                                 0.035 if trouble else 0.004)
                labels = (rng.random(n) < probability * (1.25 if version == "3" else 1.0)).astype(np.int64)
                labelled = index < windows - 10  # the newest windows wait for their labels
                ok = np.array([e["status"] == "ok" for e in events])
                partitions = ((0, events[::2]), (1, events[1::2])) if model == CREDIT else ((0, events),)
                segmented = model == CREDIT and version == "2" and start >= at(SEGMENTS_FROM)
                for partition, part in partitions:
                    state = WindowState.empty(baseline, sample_size=SAMPLE_PER_PARTITION,
                                              segments=SEGMENTS if segmented else None).add_batch(
                        EventBatch.from_events(part))
                    if labelled and partition == 0:  # the label join: one collector folds the labels in
                        kept = [{"region": segment_key(r)} for r in frame["region"].to_numpy()[ok]] if segmented else None
                        state.add_labels(probability[ok], labels[ok], kept)
                    session.add(WindowStateRecord(model=model, version=version, window_start_ms=start,
                                                  window_end_ms=start + window_ms, partition=partition,
                                                  events=len(part), state=state.to_bytes(),
                                                  updated_at=_dt(start + window_ms + 2_000)))
                summary.windows.setdefault((model, version), []).append(start)
                if model == FRAUD:
                    fraud_events[start] = n
        session.flush()
        _evaluate_with_detectors(session, summary, window_seconds, at(SEGMENTS_FROM))
        session.flush()
        _canary(session, summary, np.random.default_rng(seed + 1), starts[-CANARY_WINDOWS:], fraud_events,
                windows - 10, window_seconds)
        session.flush()
        for model, version, start, feature in session.execute(
                select(DetectorResult.model, DetectorResult.version, DetectorResult.window_start_ms,
                       DetectorResult.feature)
                .where(DetectorResult.detector == DATA_DRIFT, DetectorResult.breached, DetectorResult.feature != "",
                       DetectorResult.segment == "")
                .order_by(DetectorResult.feature)):
            summary.drifted_windows.setdefault((model, version), {}).setdefault(int(start), []).append(feature)
        for segment, feature in session.execute(
                select(DetectorResult.segment, DetectorResult.feature).distinct()
                .where(DetectorResult.detector == DATA_DRIFT, DetectorResult.breached, DetectorResult.segment != "",
                       DetectorResult.feature != "")
                .order_by(DetectorResult.segment, DetectorResult.feature)):
            summary.drifted_segments.setdefault(segment, []).append(feature)
        _alerts(session, summary, at, v2_from, v3_from, v3_to, trouble_from, window_ms)
    return summary


def _evaluate_with_detectors(session, summary: SeedSummary, window_seconds: int, segments_from: int) -> None:
    """Every window through the scheduler's evaluation job, as `driftline scheduler` would (with `[segments]`
    for credit-default v2's windows from `segments_from` on, those whose states keep segments)."""
    from driftline.scheduler.evaluation import BaselineCache, evaluate
    from driftline.scheduler.evaluation_config import EvaluationConfig
    from driftline.windows import WindowKey

    # A small, quick domain classifier: hundreds of windows are evaluated here, and the pages
    # only need the family's results to exist, not the defaults' power.
    quick = {vocabulary.MULTIVARIATE_DRIFT: {"folds": 2, "trees": 10, "max_rows": 200}}
    cache, config = BaselineCache(), EvaluationConfig(window_seconds, quick)
    # A segment of a one-minute window holds tens of rows: the demo's [drift] judges from SEGMENT_MIN_ROWS.
    segmented = EvaluationConfig(window_seconds, {**quick, "drift": {"min_rows": SEGMENT_MIN_ROWS}}, SEGMENTS)
    for (model, version), starts in summary.windows.items():
        for start in starts:
            chosen = segmented if (model, version) == (CREDIT, "2") and start >= segments_from else config
            evaluate(session, WindowKey(model, version, start, start + window_seconds * 1000), cache, chosen)


def _canary(session, summary: SeedSummary, rng: np.random.Generator, starts: list[int],  # noqa: ANN001
            production_events: dict[int, int], labelled_windows: int, window_seconds: int) -> None:
    """fraud-score v2 in a canary over `starts`: its windows written, evaluated and judged one by one by the
    scheduler's rollout analysis, as a running service would; every stored time is the window's own.

    `rng` is the canary's own, so the rest of the scenario draws the same numbers with or without it.
    """
    from sqlalchemy import update

    from driftline.scheduler.evaluation import BaselineCache, evaluate
    from driftline.scheduler.evaluation_config import EvaluationConfig
    from driftline.windows import WindowKey
    from driftline.scheduler.rollouts import RolloutAnalysis, RolloutPolicies

    window_ms, lateness_ms = window_seconds * 1000, defaults.ALLOWED_LATENESS_SECONDS * 1000
    made = starts[0] - 3_600_000
    baseline = _baseline(rng, FRAUD)
    session.add(ModelVersion(
        model=FRAUD, version=CANARY_CANDIDATE, artifact_path=f"/models/{FRAUD}/{CANARY_CANDIDATE}/model.pt",
        metrics={"auc": 0.83, "log_loss": 0.39, "accuracy": 0.85, "rows": baseline.rows},
        feature_schema=[{"name": n, "kind": p.kind} for n, p in baseline.profiles.items()], stage="registered",
        description="fraud scorer with a faster feature lookup", created_at=_dt(made)))
    session.add(BaselineRecord(model=FRAUD, version=CANARY_CANDIDATE, rows=baseline.rows, summary=baseline.to_dict(),
                               source="train", created_at=_dt(made)))
    session.flush()
    set_plan(session, canary_plan(FRAUD, CANARY_CANDIDATE, CANARY_START_WEIGHT),
             reason="first look at v2 on live traffic")
    session.flush()
    _date_plan(session, starts[0] - 60_000, started=True)
    cache, config = BaselineCache(), EvaluationConfig(window_seconds, {})
    analysis = RolloutAnalysis(RolloutPolicies(CANARY_POLICY), cache)
    weight = float(CANARY_START_WEIGHT)
    for index, start in enumerate(starts, start=len(summary.windows[(FRAUD, "1")]) - len(starts)):
        # the candidate's share of the model's traffic; production's windows are already written
        n = max(int(production_events[start] * weight / (100.0 - weight)), 1)
        frame = fraud_rows(rng, n)
        probability = fraud_probability(frame)
        events = _events(rng, FRAUD, CANARY_CANDIDATE, frame, probability, start, window_ms, 18.0, 0.004)
        ok = np.array([e["status"] == "ok" for e in events])
        state = WindowState.empty(baseline, sample_size=SAMPLE_PER_PARTITION).add_batch(EventBatch.from_events(events))
        if index < labelled_windows:
            labels = (rng.random(n) < probability).astype(np.int64)
            state.add_labels(probability[ok], labels[ok])
        session.add(WindowStateRecord(model=FRAUD, version=CANARY_CANDIDATE, window_start_ms=start,
                                      window_end_ms=start + window_ms, partition=0, events=n, state=state.to_bytes(),
                                      updated_at=_dt(start + window_ms + 2_000)))
        session.flush()
        evaluate(session, WindowKey(FRAUD, CANARY_CANDIDATE, start, start + window_ms), cache, config)
        summary.windows.setdefault((FRAUD, CANARY_CANDIDATE), []).append(start)
        judged_at = start + window_ms + lateness_ms
        outcomes = analysis.analyse(session, FRAUD, judged_at, lateness_ms)
        session.execute(update(RolloutVerdictRecord).where(RolloutVerdictRecord.model == FRAUD,
                                                     RolloutVerdictRecord.window_start_ms == start)
                        .values(evaluated_at=_dt(judged_at)))
        for outcome in outcomes:
            if outcome.transition.action == vocabulary.STEP_UP:
                weight = float(outcome.transition.weight)
                _date_plan(session, judged_at)
            elif outcome.transition.action != vocabulary.STEP_HOLD:
                raise AssertionError(f"the demo canary should only step up, the policy did {outcome.transition}")
        session.flush()
    verdicts = session.scalars(select(RolloutVerdictRecord).where(RolloutVerdictRecord.model == FRAUD)
                               .order_by(RolloutVerdictRecord.window_start_ms)).all()
    summary.rollout = {"model": FRAUD, "candidate": CANARY_CANDIDATE, "weight": weight,
                       "verdicts": [(v.window_start_ms, v.verdict, list(v.reasons)) for v in verdicts],
                       "steps": [(s.by, s.action, s.reason) for s in session.scalars(
                           select(RolloutStep).where(RolloutStep.model == FRAUD).order_by(RolloutStep.id))]}


def _date_plan(session, at_ms: int, started: bool = False) -> None:  # noqa: ANN001
    """The plan's newest step and its change time at `at_ms` (the writer stamps the wall clock)."""
    from sqlalchemy import func, update

    newest = session.scalar(select(func.max(RolloutStep.id)).where(RolloutStep.model == FRAUD))
    session.execute(update(RolloutStep).where(RolloutStep.id == newest).values(at=_dt(at_ms)))
    values = {"updated_at": _dt(at_ms), **({"started_at": _dt(at_ms)} if started else {})}
    session.execute(update(RolloutPlan).where(RolloutPlan.model == FRAUD).values(**values))


def _alerts(session, summary: SeedSummary, at, v2_from: int, v3_from: int, v3_to: int,  # noqa: ANN001
            trouble_from: int, window_ms: int) -> None:
    def alert(model, version, detector, feature, severity, state, value, threshold, text, start, fired, resolved,
              segment=""):
        fingerprint = uuid.uuid5(uuid.NAMESPACE_URL, f"{model}/{version}/{detector}/{feature}"
                                 + (f"/{segment}" if segment else "")).hex
        session.add(Alert(fingerprint=fingerprint, model=model, version=version, detector=detector, feature=feature,
                          segment=segment, severity=severity, state=state, value=value, threshold=threshold, summary=text,
                          started_at=_dt(start), fired_at=None if fired is None else _dt(fired),
                          resolved_at=None if resolved is None else _dt(resolved),
                          last_window_start_ms=summary.last_window_ms, updated_at=_dt(resolved or fired or start),
                          # `start` and `fired` are window starts: the event-time windows it began and fired in
                          first_window_start_ms=start, fired_window_start_ms=fired))
        if state == "firing":
            summary.firing.append({"model": model, "version": version, "detector": detector, "feature": feature,
                                   **({"segment": segment} if segment else {})})
        return fingerprint

    drift_fp = alert(CREDIT, "1", DATA_DRIFT, "annual_income", "warning", "resolved", 0.41, 0.2,
                     "annual_income drifted: psi 0.41 over 0.2", at(0.24), at(0.26), v2_from + 3 * window_ms)
    latency_fp = alert(CREDIT, "2", LATENCY, "total", "critical", "firing", 402.0, 250.0,
                       "p99 latency 402 ms over the 250 ms SLO", trouble_from, trouble_from + 3 * window_ms, None)
    quality_fp = alert(CREDIT, "2", DATA_QUALITY, "credit_score", "warning", "firing", 0.15, 0.05,
                       "credit_score missing rate 15% (baseline 0%)", at(0.86), at(0.86) + 3 * window_ms, None)
    alert(CREDIT, "2", DATA_DRIFT, "credit_utilization", "warning", "pending", None, 0.2,
          "credit_utilization drifting (psi over 0.2), waiting for a third window", at(0.97), None, None)
    north = summary.drifted_segments.get(DRIFTING_SEGMENT, [])
    if north:  # the segment's own drift, as the alert evaluator raises it for three breached windows
        alert(CREDIT, "2", DATA_DRIFT, north[0], "warning", "firing", None, 0.2,
              f"{north[0]} drifted in {DRIFTING_SEGMENT} (psi over 0.2); the other regions are quiet",
              at(0.88), at(0.88) + 3 * window_ms, None, segment=DRIFTING_SEGMENT)
    fraud_fp = alert(FRAUD, "1", LATENCY, "total", "critical", "resolved", 321.0, 250.0,
                     "p99 latency 321 ms over the 250 ms SLO", at(0.4), at(0.4) + 3 * window_ms, at(0.45) + 5 * window_ms)
    rows = [
        (drift_fp, "slack", "trigger", "sent", 1, None, 200, at(0.26)),
        (drift_fp, "webhook", "trigger", "sent", 2, "HTTP 500 from webhook", 200, at(0.26) + 60_000),
        (drift_fp, "slack", "resolve", "sent", 1, None, 200, v2_from + 3 * window_ms),
        (latency_fp, "slack", "trigger", "sent", 1, None, 200, trouble_from + 3 * window_ms),
        (latency_fp, "pagerduty", "trigger", "failed", 8, "HTTP 503 from events.pagerduty.com after 8 attempts",
         503, None),
        (quality_fp, "slack", "trigger", "sent", 1, None, 200, at(0.86) + 3 * window_ms),
        (quality_fp, "webhook", "trigger", "pending", 1, "timed out after 10 s", None, None),
        (fraud_fp, "pagerduty", "trigger", "sent", 3, "429 Too Many Requests (Retry-After 2)", 202,
         at(0.4) + 3 * window_ms),
        (fraud_fp, "pagerduty", "resolve", "sent", 1, None, 202, at(0.45) + 5 * window_ms),
        (None, "retrain", "retrain", "sent", 1, None, 200, at(0.3)),
    ]
    for i, (fp, channel, kind, status, attempts, error, code, sent) in enumerate(rows):
        created = sent or summary.last_window_ms
        session.add(Notification(idempotency_key=f"seed-{i}", alert_fingerprint=fp, channel=channel, kind=kind,
                                 payload={"seed": True}, status=status, attempts=attempts, last_error=error,
                                 response_status=code, created_at=_dt(created - 30_000),
                                 next_attempt_at=_dt(created), sent_at=None if status != "sent" else _dt(sent)))
    session.add(Silence(model=FRAUD, detector=PREDICTION_DRIFT, feature=None, comment="known seasonal shift",
                        created_by="ana", starts_at=_dt(at(0.5)), expires_at=_dt(at(0.5) + 7 * 86_400_000)))
    session.add(Silence(model=CREDIT, detector=SKEW, feature="debt_to_income", comment="parity fix deploying",
                        created_by="sam", starts_at=_dt(v3_from), expires_at=_dt(v3_to)))
    for key, version, reason, status, new, promoted, requested, completed, response in (
            ("seed-r1", "1", {"trigger": "drift", "features": ["annual_income", "credit_score"], "windows": 5},
             "succeeded", "2", True, at(0.3), v2_from, {"log_loss": 0.42, "previous_log_loss": 0.44}),
            ("seed-r2", "2", {"trigger": "schedule"}, "succeeded", "3", True, v3_from - 600_000, v3_from,
             {"log_loss": 0.43}),
            ("seed-r3", "2", {"trigger": "quality", "metric": "accuracy", "drop": 0.06}, "failed", None, False,
             at(0.9), at(0.9) + 120_000, {"error": "only 640 labelled rows; at least 1000 needed"}),
            ("seed-r4", "2", {"trigger": "drift", "features": ["credit_score"], "windows": 5}, "requested", None,
             False, summary.last_window_ms, None, None)):
        session.add(RetrainRequest(idempotency_key=key, model=CREDIT, version=version, reason=reason, status=status,
                                   new_version=new, promoted=promoted, response=response, requested_at=_dt(requested),
                                   completed_at=None if completed is None else _dt(completed)))
    for i, reason in enumerate(("missing required field 'event_id'", "features.age: expected a number, got 'forty'",
                                "invalid JSON: Expecting value at line 1 column 1")):
        session.add(DeadLetter(topic="driftline.inference", partition=i % 2, offset=100 + i, reason=reason,
                               field="event_id" if i == 0 else None, model=CREDIT, raw=b"{...}", raw_size=5,
                               received_at=_dt(at(0.5 + 0.1 * i))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fill a migrated driftline store with demo data.")
    parser.add_argument("--db", required=True, help="store URL, e.g. sqlite:///demo.db (run `driftline db upgrade` first)")
    parser.add_argument("--windows", type=int, default=240)
    parser.add_argument("--window-seconds", type=int, default=60)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    summary = seed_store(args.db, windows=args.windows, window_seconds=args.window_seconds)
    count = sum(len(v) for v in summary.windows.values())
    print(f"seeded {count} windows in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
