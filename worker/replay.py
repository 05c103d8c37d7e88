"""`driftline replay`: scenario traffic against a running worker, bounded in time or count, rate and concurrency.

Requests are sent open-loop at `rate` per second for `duration` seconds (after an
optional warm-up of `none` traffic), with at most `concurrency` in flight; when the
worker cannot keep up, the replay falls behind schedule rather than piling up
requests. With `requests` set the scenario part is that many requests instead, all
of them sent however long a slow worker makes it take (tests need a known count). Each answered request's ground-truth label (drawn from the scenario's
risk model on the clean inputs) is sent to `driftline.labels` `label_delay` seconds
later. A scenario's worker fault (skew, latency) is switched on through
POST /admin/faults for the scenario's part of the run and always switched off after.

A rollout scenario (shadow, canary_regression, ab, aa) also needs the store: its candidate
version is trained (or found again) while the warm-up runs, and its routing plan is written,
with the candidate's faults switched on, when the scenario part starts
(`driftline.worker.scenario_setup`); the schedule waits for the candidate rather than
sending the requests it missed in a burst afterwards. The plan stays when the replay ends.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import math
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx
import numpy as np

from driftline import defaults
from driftline.client import InferenceLogger, new_id
from driftline.config import Settings
from driftline.errors import UserError
from driftline.kafka_security import KafkaSecurity
from driftline.worker.dataset import default_probability, generate_inputs, sample_labels
from driftline.worker.online_features import FeatureClock
from driftline.worker.scenarios import SCENARIOS, Scenario, corrupt, couple

log = logging.getLogger(__name__)


@dataclass
class ReplayConfig:
    worker_url: str
    scenario: str = "none"
    rate: float = 50.0
    duration_s: float = 60.0
    requests: int | None = None  # scenario requests to send, however long they take (None: bounded by duration_s)
    warmup_s: float = 0.0
    concurrency: int = defaults.REPLAY_MAX_CONCURRENCY
    seed: int = 1
    label_delay_s: float = defaults.REPLAY_LABEL_DELAY_SECONDS
    bootstrap_servers: str | None = None  # None: send no labels
    security: KafkaSecurity | None = None  # TLS / SASL of the label producer (None: plaintext)
    token: str = ""
    timeout_s: float = 10.0
    # The store, artifacts and `[rollouts]` policy a rollout scenario's set-up needs (None: no rollout scenarios).
    settings: Settings | None = None


@dataclass
class ReplayReport:
    scenario: str
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    labels_sent: int = 0
    labels_dropped: int = 0
    request_ids: list[str] = field(default_factory=list, repr=False)
    interrupted: bool = False  # stopped by SIGTERM before the schedule ended

    def summary(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.asarray([np.nan])
        return {"scenario": self.scenario, "requests": self.requests, "ok": self.ok, "errors": self.errors,
                "achieved_rps": round(self.requests / self.elapsed_s, 1) if self.elapsed_s else 0.0,
                "p50_ms": _round(np.percentile(lat, 50)), "p99_ms": _round(np.percentile(lat, 99)),
                "labels_sent": self.labels_sent, "labels_dropped": self.labels_dropped,
                "interrupted": self.interrupted}


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 2)


@dataclass(frozen=True)
class Traffic:
    """The rows to send, their labels, and where the scenario part starts."""

    records: list[dict[str, Any]]
    labels: np.ndarray
    scenario_start: int


def build_traffic(scenario: Scenario, warmup_rows: int, scenario_rows: int, seed: int) -> Traffic:
    """Warm-up rows from the `none` scenario, then the scenario's rows (inputs, corruptions, labels)."""
    parts_records, parts_labels = [], []
    for part, (spec, rows) in enumerate(((SCENARIOS["none"], warmup_rows), (scenario, scenario_rows))):
        if rows <= 0:
            continue
        inputs = generate_inputs(rows, seed + 1000 * part, spec.population)
        if spec.coupled:
            inputs = couple(inputs, spec.coupled)
        labels = sample_labels(default_probability(inputs, spec.risk), seed + 1000 * part + 1)
        records = inputs.to_dict("records")
        if spec.corrupt_inputs:
            corrupt(records, seed + 1000 * part + 2)
        parts_records.append(records)
        parts_labels.append(labels)
    return Traffic([r for part in parts_records for r in part],
                   np.concatenate(parts_labels) if parts_labels else np.empty(0, dtype=np.int64),
                   max(0, warmup_rows))


async def _set_faults(client: httpx.AsyncClient, token: str, faults: dict[str, Any] | None) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    if faults:
        response = await client.post("/admin/faults", json=faults, headers=headers)
    else:
        response = await client.delete("/admin/faults", headers=headers)
    if response.status_code == 401:
        raise UserError("the worker refused the fault switch (401): pass the worker's retrain token "
                        "(DRIFTLINE_RETRAIN_TOKEN) to replay")
    if response.status_code == 404:
        raise UserError("the worker has fault injection off (404 on /admin/faults): start it with "
                        "`driftline worker --faults` to replay this scenario")
    response.raise_for_status()


async def run_replay(config: ReplayConfig) -> ReplayReport:
    if config.scenario not in SCENARIOS:
        raise UserError(f"unknown scenario {config.scenario!r}; expected one of {', '.join(SCENARIOS)}")
    if config.rate <= 0 or config.duration_s <= 0 or config.concurrency < 1:
        raise UserError("--rate and --duration must be positive and --concurrency at least 1")
    if config.requests is not None and config.requests < 1:
        raise UserError(f"--requests must be at least 1, got {config.requests}")
    scenario = SCENARIOS[config.scenario]
    if scenario.rollout is not None and config.settings is None:
        raise UserError(f"the {scenario.name} scenario sets up a rollout: it needs the store (run it with "
                        "`driftline replay` or `driftline up`)")
    limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
    async with httpx.AsyncClient(base_url=config.worker_url, limits=limits, timeout=config.timeout_s) as client:
        try:
            model = (await client.get("/model")).raise_for_status().json()
        except httpx.HTTPError as exc:
            raise UserError(f"cannot reach the worker at {config.worker_url} ({exc}); start it with "
                            "`driftline worker` or pass --worker-url") from None
        warmup_rows = int(math.ceil(config.rate * config.warmup_s))
        scenario_rows = (config.requests if config.requests is not None
                         else int(math.ceil(config.rate * config.duration_s)))
        traffic = build_traffic(scenario, warmup_rows, scenario_rows, config.seed)
        labeller = (InferenceLogger(config.bootstrap_servers, model["name"], model["version"],
                                    security=config.security)
                    if config.bootstrap_servers else None)
        report = ReplayReport(scenario.name)
        stop_requested = _cancel_on_sigterm()
        rollout = _RolloutStart(config, scenario, model["name"]) if scenario.rollout is not None else None
        try:
            await _drive(client, config, scenario, traffic, labeller, report, rollout)
        except asyncio.CancelledError:
            if not stop_requested.is_set():
                raise
            asyncio.current_task().uncancel()  # a SIGTERM is a normal stop: report what was sent
            report.interrupted = True
        finally:
            if rollout is not None:
                rollout.cancel()
            if scenario.uses_faults:
                await _set_faults(client, config.token, None)
            if labeller is not None:
                stats = await asyncio.to_thread(labeller.close, 10.0)
                report.labels_sent, report.labels_dropped = stats.sent, stats.dropped + stats.failed
    return report


class _RolloutStart:
    """A rollout scenario's candidate, prepared on a thread from the start, and its plan, set when the scenario starts."""

    def __init__(self, config: ReplayConfig, scenario: Scenario, model: str):
        from driftline.policies import RolloutPolicy
        from driftline.worker.registry import Registry

        settings = config.settings
        assert settings is not None and scenario.rollout is not None
        self.config, self.scenario, self.model = config, scenario, model
        self.policy = RolloutPolicy.from_mapping(settings.section("rollouts"), model)
        self.registry = Registry(settings.db_url, settings.artifacts_dir)
        log.info("preparing the %s scenario's candidate (%s) ...", scenario.name, scenario.rollout.candidate.name)
        self.prepared = _on_daemon_thread(self._prepare)

    def _prepare(self) -> str:
        from driftline.worker.scenario_setup import prepare_candidate

        assert self.scenario.rollout is not None
        return prepare_candidate(self.registry, self.model, self.scenario.rollout.candidate)

    async def start(self) -> dict[str, Any]:
        """Wait for the candidate, write the plan; returns the faults to switch on."""
        from driftline.worker.scenario_setup import candidate_faults, start_rollout

        settings, rollout = self.config.settings, self.scenario.rollout
        assert settings is not None and rollout is not None
        candidate = await self.prepared
        plan = await asyncio.to_thread(start_rollout, settings.db_url, self.registry, self.scenario, self.model,
                                       candidate, self.policy, self.config.rate, settings.window_seconds)
        log.info("%s rollout of %s: %s", self.scenario.name, self.model, plan.to_dict())
        return candidate_faults(rollout, candidate)

    def cancel(self) -> None:
        """Stop waiting for a preparation still running; its thread dies with the process (the registry skips a
        version folder left half-written)."""
        self.prepared.cancel()


def _on_daemon_thread(work: Callable[[], Any]) -> asyncio.Future:
    """`work()` on a daemon thread, as a future of this loop: unlike `asyncio.to_thread`, a stop does not wait for it."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if not future.done():
            future.set_exception(outcome) if failed else future.set_result(outcome)

    def run() -> None:
        try:
            outcome, failed = work(), False
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome, failed = exc, True
        try:
            loop.call_soon_threadsafe(settle, outcome, failed)
        except RuntimeError:  # the loop has closed: nobody waits any more
            pass

    threading.Thread(target=run, name="scenario-candidate", daemon=True).start()
    return future


def _cancel_on_sigterm() -> asyncio.Event:
    """Let a SIGTERM (a supervisor's stop) cancel the run as a task, so `finally` blocks switch the fault off.

    Raising from a plain signal handler instead lands anywhere inside the event loop's own code,
    skips those blocks and prints a traceback at shutdown.
    """
    stop_requested = asyncio.Event()
    task = asyncio.current_task()

    def stop() -> None:
        stop_requested.set()
        task.cancel()

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        pass
    return stop_requested


async def _drive(client: httpx.AsyncClient, config: ReplayConfig, scenario: Scenario, traffic: Traffic,
                 labeller: InferenceLogger | None, report: ReplayReport, rollout: _RolloutStart | None) -> None:
    slots = asyncio.Semaphore(config.concurrency)
    # the online feature store's clock: each request says when its online features were computed
    clock = FeatureClock(seed=config.seed) if scenario.stale_feature is not None else None
    pending_labels: collections.deque[tuple[float, str, int]] = collections.deque()
    tasks: set[asyncio.Task] = set()

    async def send(index: int) -> None:
        request_id = new_id()
        sent_at = time.perf_counter()
        body = {"features": traffic.records[index], "request_id": request_id}
        if clock is not None:
            body["feature_ts"] = clock.computed_at(int(time.time() * 1000))
        try:
            response = await client.post("/predict", json=body)
            status = str(response.status_code)
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        finally:
            slots.release()
        report.requests += 1
        if status == "200":
            report.ok += 1
            report.latencies_ms.append((time.perf_counter() - sent_at) * 1000.0)
            report.request_ids.append(request_id)
            if labeller is not None:
                pending_labels.append((time.monotonic() + config.label_delay_s, request_id,
                                       int(traffic.labels[index])))
        else:
            report.errors[status] = report.errors.get(status, 0) + 1

    def emit_due_labels(now: float) -> None:
        while pending_labels and pending_labels[0][0] <= now:
            _, request_id, label = pending_labels.popleft()
            labeller.log_label(request_id, label)

    started = time.monotonic()
    interval = 1.0 / config.rate
    # a count-bounded replay sends every row, late or not; a timed one stops at its end
    end = math.inf if config.requests is not None else started + config.warmup_s + config.duration_s
    scenario_started = False
    for index in range(len(traffic.records)):
        now = time.monotonic()
        if now >= end:
            break
        if index == traffic.scenario_start and not scenario_started:
            scenario_started = True
            if clock is not None:
                clock.stop_updating(scenario.stale_feature, int(time.time() * 1000))
            faults = scenario.faults
            if rollout is not None:
                faults = await rollout.start()
                paused = time.monotonic() - now  # the schedule resumes where it stopped, without a burst
                started, end = started + paused, end + paused
            if faults:
                await _set_faults(client, config.token, faults)
            now = time.monotonic()  # after the awaits: the `now` from before them would sleep the pause a second time
        due = started + index * interval
        if due > now:
            await asyncio.sleep(due - now)
        emit_due_labels(time.monotonic())
        await slots.acquire()
        task = asyncio.create_task(send(index))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks, timeout=config.timeout_s + 1)
    report.elapsed_s = time.monotonic() - started
    if pending_labels:  # the last labels are due at most label_delay after the last answer
        await asyncio.sleep(max(0.0, pending_labels[-1][0] - time.monotonic()))
        emit_due_labels(math.inf)


def replay(config: ReplayConfig) -> ReplayReport:
    return asyncio.run(run_replay(config))
