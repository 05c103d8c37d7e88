"""The scheduler's jobs: evaluate due windows, drive alerts, judge rollouts, deliver notifications, apply retention.

Every job is idempotent per window, so a restarted scheduler simply picks up where the store says it was.
"""
from __future__ import annotations

import logging

from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from driftline.alerts import (Channels, apply_retrain_policy, deliver_due, delivery_lanes, load_rules,
                              process_rollout_verdict, process_window, repost_firing, resolve_ended_rollouts)
from driftline.alerts.channels.validation import check_channel_settings
from driftline.alerts.reposts import REPOST_INTERVAL
from driftline.config import Settings
from driftline.store import db as store_db
from driftline.store.models import utcnow
from driftline.store.watermarks import stream_watermark
from driftline.vocabulary import STEP_DROP_ARMS, STEP_ROLLBACK, WINDOW_NO_BASELINE
from driftline.windows import WindowKey
from driftline.scheduler.claims import claim_window
from driftline.scheduler.evaluation import BaselineCache, due_windows, evaluate
from driftline.scheduler.evaluation import now_ms as wall_now_ms
from driftline.scheduler.evaluation_config import EvaluationConfig
from driftline.scheduler.quarantine import RetryPolicy, record_failure, release
from driftline.scheduler.retention import RetentionPolicy, prune
from driftline.detectors.rollout.outcome import RolloutOutcome
from driftline.scheduler.rollouts import ROLLOUTS_SECTION, RolloutAnalysis, RolloutPolicies, active_models
from driftline.scheduler.startup import describe_channels, threshold_feature_warnings

log = logging.getLogger("driftline.scheduler")
# Listings of due windows per run at most (500 windows each): a backlog is judged in pages without
# holding the run for long
_PASSES_PER_RUN = 4


class SchedulerJobs:
    """The scheduler's jobs, also callable one by one (tests, `--once`)."""

    def __init__(self, settings: Settings):
        for warning in check_channel_settings(settings):
            log.warning("%s", warning)
        self.settings = settings
        self.config = EvaluationConfig.from_settings(settings)
        self.rules = load_rules(settings, settings.config_path)
        self.channels = Channels.from_settings(settings, timeout=self.rules.delivery.timeout)
        self.cache = BaselineCache()
        self.retry = RetryPolicy()
        self.retention = RetentionPolicy.from_settings(settings)
        self.rollouts = RolloutAnalysis(RolloutPolicies(settings.section(ROLLOUTS_SECTION)), self.cache)
        self.repost_interval = REPOST_INTERVAL  # how often a firing group is posted to Alertmanager again
        self._lateness_ms = settings.allowed_lateness_seconds * 1000
        self._idle_ms = settings.idle_partition_seconds * 1000  # a partition idle this long stops holding windows
        log.info("%s", describe_channels(self.rules.channels, self.rules.retrain.enabled))
        self._check_threshold_features()

    def _check_threshold_features(self) -> None:
        """Warn of per-feature thresholds that no registered baseline's feature would use (a typo, most often)."""
        try:
            with store_db.session_scope(self.settings.db_url) as session:
                warnings = threshold_feature_warnings(session, self.config.sections.get("drift", {}))
        except (OperationalError, InterfaceError, ProgrammingError) as exc:  # no store yet: the windows will say
            log.warning("could not check the per-feature thresholds against the baselines (%s)", type(exc).__name__)
            return
        for warning in warnings:
            log.warning("%s", warning)

    def evaluate_and_analyse(self, now_ms: int | None = None) -> int:
        """Evaluate due windows, then judge the rollouts on them (the candidate's drift results come first)."""
        now_ms = wall_now_ms() if now_ms is None else now_ms
        evaluated = self.evaluate_due_windows(now_ms)
        self.analyse_rollouts(now_ms)
        self.repost_to_alertmanager()
        return evaluated

    def repost_to_alertmanager(self) -> list[str]:
        """Queue Alertmanager re-posts of firing groups before their endsAt (a no-op without the channel)."""
        try:
            with store_db.session_scope(self.settings.db_url) as session:
                return repost_firing(session, rules=self.rules, now=utcnow(), interval=self.repost_interval)
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001 - a re-post bug must not stop window evaluation
            log.exception("re-posting firing alerts to Alertmanager failed; it is tried again next run")
            return []

    def evaluate_due_windows(self, now_ms: int | None = None) -> int:
        """Evaluate every due window, each in its own transaction with its alert updates; returns how many
        succeeded. A window that raises is quarantined and retried later; the others go on. The due windows
        are listed again after a pass that judged some (a window leaving quarantine frees its version's
        later windows; a backlog comes in pages), a bounded number of times per run."""
        now_ms = wall_now_ms() if now_ms is None else now_ms
        evaluated = 0
        # a version whose window failed or went to another scheduler waits for the next run: its later windows
        # must not reach the sequential evidence before that one
        stopped: set[tuple[str, str]] = set()
        for _ in range(_PASSES_PER_RUN):
            with store_db.session_scope(self.settings.db_url) as session:
                keys = due_windows(session, now_ms, self._lateness_ms, idle_ms=self._idle_ms)
            judged = self._evaluate_keys([k for k in keys if (k.model, k.version) not in stopped], now_ms, stopped)
            evaluated += judged
            if not judged:
                break
        return evaluated

    def _evaluate_keys(self, keys: list[WindowKey], now_ms: int, stopped: set[tuple[str, str]]) -> int:
        evaluated = 0
        for key in keys:
            if (key.model, key.version) in stopped:
                continue
            try:
                status = self._evaluate_one(key, now_ms)
            except (OperationalError, InterfaceError):
                raise  # the store itself failed: no window can be evaluated, the next run tries them all
            except Exception as exc:  # noqa: BLE001 - one window's failure must not stop the others
                self._quarantine(key, exc, now_ms)
                stopped.add((key.model, key.version))
                continue
            if status is None:
                log.debug("%s v%s window %s: evaluated by another scheduler", key.model, key.version,
                          key.window_start_ms)
                stopped.add((key.model, key.version))
                continue
            evaluated += 1
            log.info("evaluated %s v%s window %s: %s", key.model, key.version, key.window_start_ms, status)
        return evaluated

    def _evaluate_one(self, key: WindowKey, now_ms: int) -> str | None:
        """Evaluate one window; None when another scheduler has it (claimed, or done since it was listed)."""
        with store_db.session_scope(self.settings.db_url) as session:
            if not claim_window(session, key, now_ms, self._lateness_ms, self._idle_ms):
                return None
            evaluation = evaluate(session, key, self.cache, self.config)
            session.flush()
            if evaluation.status != WINDOW_NO_BASELINE:
                now = utcnow()
                changed = process_window(session, key, rules=self.rules, now=now)
                for alert in changed:
                    if now in (alert.fired_at, alert.resolved_at):  # a transition in this window
                        log.info("alert %s: %s v%s %s%s: %s", alert.state, alert.model, alert.version,
                                 alert.detector, f" {alert.feature}" if alert.feature else "", alert.summary)
                request = apply_retrain_policy(session, key, policy=self.rules.retrain, now=now)
                if request is not None:
                    log.info("retraining requested for %s v%s: %s", key.model, key.version,
                             (request.reason or {}).get("reason", ""))
            release(session, key)
            return evaluation.status

    def _quarantine(self, key: WindowKey, exc: Exception, now_ms: int) -> None:
        with store_db.session_scope(self.settings.db_url) as session:
            # claimed too: another scheduler may have evaluated (or quarantined) the window since this one failed
            if not claim_window(session, key, now_ms, self._lateness_ms, self._idle_ms):
                return
            row = record_failure(session, key, exc, now_ms, secrets=self.settings.secret_values(), policy=self.retry)
            log.warning("window quarantined: %s v%s window %s (attempt %d, next try %s): %s: %s", key.model,
                        key.version, key.window_start_ms, row.attempts, f"{row.next_retry_at:%Y-%m-%d %H:%M:%S}Z",
                        row.error_type, row.error)

    def analyse_rollouts(self, now_ms: int | None = None) -> list[RolloutOutcome]:
        """Judge each active rollout's closed windows and take the policy's steps, one transaction per model;
        returns the windows judged. A model whose analysis raises is logged and tried again next run."""
        now_ms = wall_now_ms() if now_ms is None else now_ms
        lateness_ms = self._lateness_ms
        try:
            with store_db.session_scope(self.settings.db_url) as session:
                # rollouts that ended since the last run (rolled back, promoted, cleared) resolve their alerts
                for alert in resolve_ended_rollouts(session, rules=self.rules, now=utcnow()):
                    log.info("alert resolved: %s v%s rollout: %s", alert.model, alert.version,
                             (alert.details or {}).get("resolved_reason", ""))
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001 - closing old incidents must not stop judging the running rollouts
            log.exception("resolving the alerts of ended rollouts failed; it is tried again next run")
        with store_db.session_scope(self.settings.db_url) as session:
            models = active_models(session)
            # the rollout windows close on the stream's watermark, as the evaluated windows do
            watermark = stream_watermark(session, now_ms, self._idle_ms)
        if watermark is None:
            return []
        judged: list[RolloutOutcome] = []
        for model in models:
            try:
                with store_db.session_scope(self.settings.db_url) as session:
                    outcomes = self.rollouts.analyse(session, model, watermark, lateness_ms)
                    for outcome in outcomes:
                        process_rollout_verdict(session, outcome, rules=self.rules, now=utcnow())
            except IntegrityError:  # another scheduler stored these verdicts first
                log.info("rollout of %s: already judged by another scheduler", model)
                continue
            except (OperationalError, InterfaceError):
                raise
            except Exception:  # noqa: BLE001 - one model's rollout must not stop the others'
                log.exception("rollout analysis of %s failed; it is tried again next run", model)
                continue
            for outcome in outcomes:
                level = logging.WARNING if outcome.transition.action in (STEP_ROLLBACK, STEP_DROP_ARMS) else logging.INFO
                log.log(level, "rollout %s candidate %s window %s: %s; %s: %s", outcome.model, outcome.candidate,
                        outcome.window_start_ms, outcome.verdict.verdict, outcome.transition.action,
                        outcome.transition.reason)
            judged += outcomes
        return judged

    def apply_retention(self, now_ms: int | None = None) -> dict[str, int]:
        """Prune rows past their retention, a bounded number per table per run; returns the counts."""
        counts = prune(self.settings.db_url, self.retention, now_ms=now_ms,
                       max_batches=self.retention.max_batches_per_run)
        if any(counts.values()):
            log.info("retention: pruned %s", ", ".join(f"{n} {table}" for table, n in counts.items() if n))
        return counts

    def delivery_lanes(self) -> list[str]:
        """The delivery lanes: one per channel, so a stalled receiver holds up only its own channel."""
        return delivery_lanes(self.channels)

    def deliver_notifications(self, lane: str | None = None) -> None:
        """Deliver due notifications of one lane (None: every lane at once)."""
        deliver_due(self.settings.db_url, channels=self.channels, policy=self.rules.delivery, lane=lane)
