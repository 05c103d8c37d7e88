"""The inference server (HTTP API: docs/contract.md): FastAPI on uvicorn, one model, hot-swapped on alias moves.

Request path of POST /predict, all on the event loop except the forward pass:
the ingress guard (driftline/ingress.py: 400 for a Host the worker does not serve, 403 cross-site,
415 for a body not declared as JSON) -> read the body (413 above the limit, 408 when it is not in within
`body_timeout_s`, both enforced by the guard; reading holds no admission slot, so idle or slow clients
cannot lock others out) -> admission (503 beyond `max_pending`) -> validate against the version's input schema
(422 naming the field) -> serving features (the shared transform, or the skew fault's
bug) -> cache look-up keyed by (model, version, features), in process then, on a miss,
in the shared Redis tier when there is one -> dynamic batcher (forward
pass on its worker thread) -> answer -> one event to the non-blocking logger.
POST /predict enters through `PredictFastPath`, which skips FastAPI's routing layers
(measured: they cost more than the rest of the request); every other endpoint is FastAPI.

The production alias is read every `alias_poll_s` seconds on a background task; a
different version is loaded on a thread and swapped in atomically (a reference
assignment), so a promotion or rollback takes effect within that interval plus the
load time, without dropping a request. In-flight batches finish on the old version
and answer with its number.

The model's rollout plan (driftline.rollouts, written by `driftline rollout`) is read on the
same poll; its candidate versions are loaded on a thread and the plan and its loaded versions
are swapped in together (`Routing`). A canary or A/B request is answered by the version
`driftline.rollouts.assign` picks (sticky by entity_id), through the same batcher and cache
(keyed by that version); a shadow plan copies sampled requests to `ShadowRunner`, off the
request path. A candidate that cannot be loaded is never routed to: production answers.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Sequence

import orjson
import torch
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect

from driftline import defaults
from driftline.client import InferenceLogger, new_id
from driftline.config import Settings, secret
from driftline.errors import UserError
from driftline.garbage_collection import freeze_long_lived
from driftline.hosts import is_loopback, parse_allowed_hosts
from driftline.ingress import JSON_BODY, OIP_BODY, BodyRefused, IngressGuard, IngressRules, Limits
from driftline.kafka_security import KafkaSecurity
from driftline.rollouts import ROLE_PRODUCTION, ROLE_SHADOW, RoutingPlan, assign, shadowed
from driftline.store.db import session_scope
from driftline.store.rollouts import current_plan
from driftline.worker.feature_transform import FeatureTransform
from driftline.worker.activations import activation_event
from driftline.worker.admin import admin_token_problem
from driftline.worker.batcher import BatcherFull, DynamicBatcher
from driftline.worker.cache import PredictionCache, RedisPredictionCache, cache_key
from driftline.worker.dataset import generate_inputs
from driftline.worker.fast_path import PredictFastPath
from driftline.worker.faults import Faults
from driftline.worker.metrics import PROTOCOL_V2_REST, ProtocolLatency, WorkerMetrics
from driftline.worker.oip_rest import add_v2_routes, is_infer_path
from driftline.worker.model import CreditMLP, load_model, resolve_device
from driftline.worker.registry import Registry, VersionInfo
from driftline.worker.retrain import LabelListener, RecentTraffic, RetrainLimits, RetrainManager
from driftline.worker.shadow import ShadowAnswer, ShadowRequest, ShadowRunner
from driftline.worker.validation import InputError, PredictRequest, parse_predict

log = logging.getLogger(__name__)

# The requests counter's status for a client that left mid-request (nginx's name for it).
CLIENT_CLOSED_REQUEST = "499"

DEFAULT_MODEL = "credit-default"
HOSTS_SETTING = "worker_allowed_hosts (env DRIFTLINE_WORKER_ALLOWED_HOSTS, driftline worker --allowed-hosts)"


@dataclass
class WorkerConfig:
    model: str = DEFAULT_MODEL
    device: str = "auto"
    max_batch_size: int = defaults.WORKER_MAX_BATCH_SIZE
    max_wait_ms: float = defaults.WORKER_MAX_WAIT_MS
    max_pending: int = defaults.WORKER_MAX_PENDING_REQUESTS
    cache_size: int = defaults.WORKER_CACHE_SIZE
    cache_ttl_s: float = defaults.WORKER_CACHE_TTL_SECONDS
    # redis://HOST:PORT/DB: a prediction cache shared by workers, asked on a local miss.
    cache_url: str | None = None
    log_events: bool = True
    event_buffer: int = defaults.WORKER_EVENT_BUFFER
    # "process": the Kafka producer runs in a child process, off the event loop's GIL
    # (logging cost at c=32 in bench/worker.py: see docs/worker.md); "thread": in this process.
    event_producer: str = "process"
    alias_poll_s: float = defaults.WORKER_ALIAS_POLL_SECONDS
    # Shadow copies waiting for the candidate at most; beyond it they are dropped and counted.
    shadow_queue: int = defaults.WORKER_SHADOW_QUEUE
    max_body_bytes: int = defaults.WORKER_MAX_BODY_BYTES
    # A request's body must be in within this many seconds: 408 and the connection closed otherwise.
    body_timeout_s: float = defaults.WORKER_BODY_TIMEOUT_SECONDS
    # A connection must send a request's head within this many seconds (of connecting or its last answer).
    head_timeout_s: float = defaults.WORKER_HEAD_TIMEOUT_SECONDS
    # Open connections at most (uvicorn's limit_concurrency): beyond it a new request gets 503.
    max_connections: int = defaults.WORKER_MAX_CONNECTIONS
    # /admin/faults exists only when this is set (`driftline worker --faults`, settings.worker_faults).
    faults: bool = False
    retrain_buffer_rows: int = defaults.WORKER_RETRAIN_BUFFER_ROWS
    retrain_min_rows: int = defaults.WORKER_RETRAIN_MIN_ROWS
    retrain_epochs: int = 4
    listen_for_labels: bool = True
    shutdown_flush_s: float = 5.0  # at shut-down, how long to wait for buffered events to reach Kafka
    # The Open Inference Protocol's gRPC service on settings.worker_host (worker/oip_grpc.py); 0: off.
    grpc_port: int = 0
    log_embeddings: bool = False  # settings.worker_log_embeddings (driftline.worker.activations)

    def __post_init__(self) -> None:
        self.limits  # noqa: B018 - builds the ingress limits, a ValueError naming any out of range

    @property
    def limits(self) -> Limits:
        """What a client may hold (the ingress guard's; `limits.uvicorn_options()` for the server)."""
        return Limits(self.max_body_bytes, self.body_timeout_s, self.head_timeout_s, self.max_connections)


@dataclass
class LoadedVersion:
    """One registered version, ready to serve."""

    info: VersionInfo
    net: CreditMLP
    transform: FeatureTransform
    device: str
    schema: list[dict[str, Any]] = field(default_factory=list)

    @property
    def model(self) -> str:
        return self.info.model

    @property
    def version(self) -> str:
        return self.info.version

    def predict(self, feature_records: Sequence[dict[str, Any]]) -> list[float]:
        matrix = self.transform.encode(feature_records)
        with torch.inference_mode():
            scores = torch.sigmoid(self.net(torch.from_numpy(matrix).to(self.device)))
            return scores.cpu().tolist()


@dataclass(frozen=True)
class Routing:
    """A rollout plan and its candidate versions, loaded: swapped in as one reference."""

    plan: RoutingPlan | None = None
    versions: dict[str, LoadedVersion] = field(default_factory=dict)

    def describe(self) -> dict[str, Any] | None:
        if self.plan is None:
            return None
        return {**self.plan.to_dict(), "loaded": sorted(self.versions)}


@dataclass(frozen=True, slots=True)
class _Routed:
    """A batch payload for a version other than production (a canary or an A/B arm)."""

    features: dict[str, Any]
    version: LoadedVersion


@dataclass(frozen=True, slots=True)
class _LookedUp:
    """A request routed and looked up in the caches, before the batcher (`Worker._look_up`)."""

    loaded: LoadedVersion
    production: LoadedVersion
    routing: Routing
    role: str
    features: dict[str, Any]
    key: Any
    cached: Any


# `_run_batch`'s tag when a batch mixed versions: each output is then (value, the version that answered).
_MIXED = object()


def load_version(registry: Registry, model: str, version: str, device: str) -> LoadedVersion:
    info = registry.get(model, version)
    net = load_model(registry.artifact_file(info), info.artifact_sha256, device)
    loaded = LoadedVersion(info, net, FeatureTransform.from_dict(info.transform), device,
                           info.feature_schema or FeatureTransform.input_schema())
    loaded.predict(FeatureTransform().apply(generate_inputs(4, seed=0).to_dict("records")))  # warm-up
    return loaded


class Worker:
    """The serving state shared by the endpoints; `create_app` wires it into FastAPI."""

    def __init__(self, settings: Settings, config: WorkerConfig):
        problem = admin_token_problem(settings.worker_host, secret(settings.retrain_token))
        if problem is not None:
            raise UserError(problem)
        try:
            self.allowed_hosts = parse_allowed_hosts(settings.worker_allowed_hosts)
        except ValueError as exc:
            raise UserError(f"settings.worker_allowed_hosts: {exc}") from None
        if not is_loopback(settings.worker_host) and self.allowed_hosts == parse_allowed_hosts(""):
            log.warning("listening on %s with only loopback names allowed in Host: list the names clients use in "
                        "worker_allowed_hosts (--allowed-hosts)", settings.worker_host)
        self.settings = settings
        self.config = config
        self.registry = Registry(settings.db_url, settings.artifacts_dir)
        self.device = resolve_device(config.device)
        self.current: LoadedVersion | None = None
        self.faults = Faults()
        self.cache = PredictionCache(config.cache_size, config.cache_ttl_s)
        self.batcher = DynamicBatcher(self._run_batch, config.max_batch_size, config.max_wait_ms, config.max_pending)
        self.logger: InferenceLogger | None = None
        self.metrics = WorkerMetrics(lambda: self.logger.stats() if self.logger else None,
                                     lambda: self.batcher.queue_depth, settings)
        self.batcher.on_batch = self.metrics.observe_batch
        self.remote_cache = (RedisPredictionCache(config.cache_url, config.cache_ttl_s,
                                                  on_error=self.metrics.cache_remote_errors.inc)
                             if config.cache_url and config.cache_ttl_s > 0 else None)
        self.traffic = RecentTraffic(config.retrain_buffer_rows)
        self.label_listener: LabelListener | None = None
        self.retrainer = RetrainManager(self.registry, config.model, self.traffic, config.retrain_min_rows,
                                        lambda: self.current, RetrainLimits(epochs=config.retrain_epochs))
        self._failed_versions: set[str] = set()
        self._poll_task: asyncio.Task | None = None
        self.grpc_server: Any = None
        self.routing = Routing()
        self._rng = random.Random()
        self.shadow = ShadowRunner(config.shadow_queue, config.max_batch_size, self._log_shadow,
                                   self.metrics.shadow_dropped.inc, self.metrics.shadow_errors.inc)
        self._production_answers = self.metrics.routed.labels(ROLE_PRODUCTION)
        self.example: dict[str, Any] = generate_inputs(1, seed=0).to_dict("records")[0]

    # --- start-up and shut-down --------------------------------------------------------
    def load(self) -> None:
        """Load the production version (before serving: errors here are the user's to fix)."""
        version = self.registry.alias(self.config.model)
        if version is None:
            known = self.registry.versions(self.config.model)
            if not known:
                raise UserError(f"model {self.config.model!r} has no registered versions; run `driftline train` first")
            raise UserError(f"model {self.config.model!r} has no production version; "
                            f"run `driftline promote {known[-1].version} --model {self.config.model}`")
        try:
            loaded = load_version(self.registry, self.config.model, version, self.device)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise UserError(f"cannot load {self.config.model} version {version}: {exc}") from None
        self._swap(loaded)
        try:
            self.routing = self._routing_for(self._read_plan())
        except Exception as exc:  # the store may be briefly unavailable: production only until the next poll
            log.warning("cannot read the rollout plan of %s, serving production only: %s", self.config.model, exc)

    def _swap(self, loaded: LoadedVersion) -> None:
        self.current = loaded
        self.metrics.set_model(loaded.model, loaded.version, loaded.device)

    async def start(self) -> None:
        if self.current is None:
            await asyncio.to_thread(self.load)
        await self.batcher.start()
        await self.shadow.start()
        if self.config.log_events:
            self.logger = InferenceLogger(self.settings.bootstrap_servers, self.config.model, self.current.version,
                                          max_buffered=self.config.event_buffer, device=self.device,
                                          producer_process=self.config.event_producer == "process",
                                          security=KafkaSecurity.from_settings(self.settings))
        if self.config.listen_for_labels:
            self.label_listener = LabelListener(self.settings.bootstrap_servers, self.config.model,
                                                self.traffic, KafkaSecurity.from_settings(self.settings)).start()
        if self.config.alias_poll_s > 0:
            self._poll_task = asyncio.create_task(self._poll_alias(), name="driftline-alias-poll")
        if self.config.grpc_port:
            from driftline.worker.oip_grpc import start_grpc  # grpcio loads only when the port is on

            self.grpc_server = await start_grpc(self, self.settings.worker_host, self.config.grpc_port)
        freeze_long_lived()  # the model, torch and the web stack stay: no full collection needs to walk them

    async def stop(self) -> None:
        if self.grpc_server is not None:
            from driftline.worker.oip_grpc import stop_grpc

            await stop_grpc(self.grpc_server)
        if self._poll_task is not None:
            self._poll_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll_task
        await self.batcher.stop()
        await self.shadow.stop()
        await asyncio.to_thread(self.retrainer.shutdown)
        if self.remote_cache is not None:
            await self.remote_cache.close()
        if self.label_listener is not None:
            await asyncio.to_thread(self.label_listener.stop)
        if self.logger is not None:
            await asyncio.to_thread(self.logger.close, self.config.shutdown_flush_s)

    async def _poll_alias(self) -> None:
        while True:
            await asyncio.sleep(self.config.alias_poll_s)
            try:
                await self.check_alias()
            except Exception as exc:  # the store may be briefly unavailable; keep serving
                log.warning("cannot check the production alias: %s", exc)
            try:
                await self.check_plan()
            except Exception as exc:
                log.warning("cannot check the rollout plan: %s", exc)

    async def check_alias(self) -> bool:
        """Swap to the version the production alias points at, if it moved; True when swapped."""
        version = await asyncio.to_thread(self.registry.alias, self.config.model)
        if version is None or self.current is None or version == self.current.version:
            return False
        if version in self._failed_versions:
            return False
        try:
            loaded = await asyncio.to_thread(load_version, self.registry, self.config.model, version, self.device)
        except Exception as exc:
            self._failed_versions.add(version)  # do not retry a broken artifact every second
            log.error("cannot load %s version %s, still serving %s: %s", self.config.model, version,
                      self.current.version, exc)
            return False
        previous = self.current.version
        self._swap(loaded)
        self.metrics.model_swaps.inc()
        log.info("now serving %s version %s (was %s)", loaded.model, loaded.version, previous)
        return True

    # --- rollout routing -------------------------------------------------------------
    def _read_plan(self) -> RoutingPlan | None:
        with session_scope(self.settings.db_url) as session:
            return current_plan(session, self.config.model)

    def _routing_for(self, plan: RoutingPlan | None) -> Routing:
        """`plan` with its candidates loaded (on the calling thread); those already loaded are reused."""
        if plan is None:
            return Routing()
        production = self.current.version if self.current is not None else None
        versions: dict[str, LoadedVersion] = {}
        for version in plan.versions:
            if version == production:
                continue  # production answers its own share
            loaded = self.routing.versions.get(version)
            if loaded is None and version not in self._failed_versions:
                try:
                    loaded = load_version(self.registry, self.config.model, version, self.device)
                except Exception as exc:
                    self._failed_versions.add(version)  # do not retry a broken artifact every second
                    log.error("cannot load %s version %s for its %s, production answers instead: %s",
                              self.config.model, version, plan.mode, exc)
            if loaded is not None:
                versions[version] = loaded
        return Routing(plan, versions)

    async def check_plan(self) -> bool:
        """Take up the model's current rollout plan, if it changed; True when it did."""
        plan = await asyncio.to_thread(self._read_plan)
        routing = self.routing
        production = self.current.version if self.current is not None else None
        wanted = {v for v in plan.versions if v != production} if plan is not None else set()
        if plan == routing.plan and wanted - self._failed_versions <= set(routing.versions):
            return False
        self.routing = await asyncio.to_thread(self._routing_for, plan)
        self.metrics.plan_changes.inc()
        log.info("%s rollout plan now %s", self.config.model, self.routing.describe() or "production only")
        return True

    def _log_shadow(self, answer: ShadowAnswer) -> None:
        self.metrics.shadow_answers.inc()
        if self.logger is None:
            return
        request = answer.request
        total_ms = answer.queue_ms + answer.compute_ms
        self.logger.log_soon(request.features, answer.prediction,
                             {"total": round(total_ms, 3), "queue": round(answer.queue_ms, 3),
                              "compute": round(answer.compute_ms, 3)},
                             request_id=request.request_id, inputs=request.inputs, entity_id=request.entity_id,
                             version=request.candidate.version, batch_size=answer.batch_size, cache_hit=False,
                             role=ROLE_SHADOW)

    # --- serving ---------------------------------------------------------------------
    def _run_batch(self, payloads: Sequence[Any]) -> tuple[list[Any], Any]:
        loaded = self.current  # one production version per batch, even if a swap lands meanwhile
        if all(type(p) is dict for p in payloads):  # the usual batch: production only
            return loaded.predict(payloads), loaded
        groups: dict[int, tuple[LoadedVersion, list[int]]] = {}
        for i, payload in enumerate(payloads):
            version = payload.version if type(payload) is _Routed else loaded
            groups.setdefault(id(version), (version, []))[1].append(i)
        outputs: list[Any] = [None] * len(payloads)
        for version, positions in groups.values():
            records = [payloads[i].features if type(payloads[i]) is _Routed else payloads[i] for i in positions]
            for i, value in zip(positions, version.predict(records)):
                outputs[i] = (value, version)
        return outputs, _MIXED

    async def predict(self, request: Request) -> dict[str, Any]:
        started = time.perf_counter()
        self.metrics.body_reads.inc()
        try:  # before admission: a client that never sends its body holds no slot
            body = await _read_body(request, self.config.max_body_bytes, self.config.body_timeout_s)
        finally:
            self.metrics.body_reads.dec()
        with self.batcher.arriving():  # lets the batcher wait for this request rather than leave without it
            parsed = parse_predict(body, self.current.schema)
            looked = await self._look_up(parsed)
        return await self._answer(parsed, looked, started, self.metrics.latency_predict)

    async def predict_rows(self, rows: Sequence[PredictRequest], started: float, latency: ProtocolLatency,
                           pin: tuple[LoadedVersion, str] | None = None) -> list[dict[str, Any]]:
        """Each row as its own request (one admission slot, batcher entry and event each): the OIP adapters' path.

        Admission takes all the rows or none (BatcherFull), so a batch is never half answered for lack of room.
        `pin` (version, role): the rows go to that version, not by the plan (a request naming its version).
        """
        with self.batcher.arriving(len(rows)):
            looked = [await self._look_up(parsed, pin) for parsed in rows]
        return list(await asyncio.gather(*(self._answer(parsed, found, started, latency)
                                           for parsed, found in zip(rows, looked))))

    async def _look_up(self, parsed: PredictRequest, pin: tuple[LoadedVersion, str] | None = None) -> _LookedUp:
        """Route the request (rollout plan, or `pin`), build its serving features and look them up in the caches."""
        loaded = production = self.current
        routing = self.routing if pin is None else Routing()  # a pinned request is not shadowed either
        role = ROLE_PRODUCTION
        if pin is not None:
            loaded, role = pin
        elif routing.plan is not None:
            route = assign(routing.plan, production.version, parsed.entity_id, self._rng)
            if route.version == production.version:  # production's share, or its arm of an A/B test
                role = route.role
            elif (candidate := routing.versions.get(route.version)) is not None:  # None: failed to load
                loaded, role = candidate, route.role
        features = self.faults.serving_features(parsed.inputs)
        key = cache_key(loaded.model, loaded.version, features)
        cached = self.cache.get(key)
        if cached is None and self.remote_cache is not None:
            cached = await self.remote_cache.get(key)
            if cached is not None:
                self.metrics.cache_remote_hits.inc()
                self.cache.put(key, cached)
        return _LookedUp(loaded, production, routing, role, features, key, cached)

    async def _answer(self, parsed: PredictRequest, looked: _LookedUp, started: float,
                      latency_metrics: ProtocolLatency) -> dict[str, Any]:
        loaded, routing, role, features, key, cached = (looked.loaded, looked.routing, looked.role, looked.features,
                                                        looked.key, looked.cached)
        request_id = parsed.request_id or new_id()
        if cached is not None:
            self.metrics.cache_hits.inc()
            prediction, version, queue_ms, compute_ms, batch_size = cached, loaded.version, 0.0, 0.0, None
        else:
            self.metrics.cache_misses.inc()
            try:
                result = await self.batcher.submit(features if loaded is looked.production
                                                   else _Routed(features, loaded))
            except Exception as exc:  # the monitor counts failed requests too
                if self.logger is not None:
                    total_ms = round((time.perf_counter() - started) * 1000.0, 3)
                    self.logger.log(features, None, {"total": total_ms}, request_id=request_id, inputs=parsed.inputs,
                                    entity_id=parsed.entity_id, version=loaded.version, cache_hit=False,
                                    status="error", error=f"{type(exc).__name__}: {exc}", role=role)
                raise
            if result.tag is _MIXED:
                prediction, answered = result.value
                version = answered.version
            else:
                prediction, version = result.value, result.tag.version
            queue_ms, compute_ms, batch_size = result.queue_ms, result.compute_ms, result.batch_size
            if version != loaded.version:  # a swap landed meanwhile: the answer is the new version's
                key = cache_key(loaded.model, version, features)
            self.cache.put(key, prediction)
            if self.remote_cache is not None:
                self.remote_cache.put(key, prediction)
        extra = self.faults.extra_latency_s(version)
        if extra:
            slept_from = time.perf_counter()
            await asyncio.sleep(extra)
            compute_ms += (time.perf_counter() - slept_from) * 1000.0
        total_ms = (time.perf_counter() - started) * 1000.0
        latency = {"total": round(total_ms, 3), "queue": round(queue_ms, 3), "compute": round(compute_ms, 3)}
        latency_metrics.observe(total_ms, queue_ms, compute_ms, version, batch_size)
        if self.logger is not None:
            # Built and encoded at the end of the loop's iteration with the others answered in it (cheaper:
            # InferenceLogger.log_soon). A request id the worker made up is unique: it is the event id too.
            self.logger.log_soon(features, prediction, latency, request_id=request_id, inputs=parsed.inputs,
                                 entity_id=parsed.entity_id, version=version, batch_size=batch_size,
                                 cache_hit=cached is not None,
                                 event_id=request_id if parsed.request_id is None else None, role=role,
                                 feature_ts=parsed.feature_ts,
                                 embeddings=activation_event(loaded, features, self.config.log_embeddings))
        if role == ROLE_PRODUCTION:
            self._production_answers.inc()
        else:
            self.metrics.routed.labels(role).inc()
        if routing.plan is not None and shadowed(routing.plan, self._rng):
            candidate = routing.versions.get(routing.plan.versions[0])
            if candidate is not None:  # after the answer is computed: the copy never delays it
                self.shadow.offer(ShadowRequest(candidate, features, parsed.inputs, request_id, parsed.entity_id,
                                                time.perf_counter()))
        if self.config.listen_for_labels:
            self.traffic.add_request(request_id, parsed.inputs)
        return {"request_id": request_id, "model": loaded.model, "version": version, "prediction": prediction,
                "cached": cached is not None, "latency_ms": latency}


def _json(document: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status, media_type="application/json")


async def _read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InputError("invalid Content-Length header", status=400)
        if int(declared) > limit:
            raise InputError(f"the body is {declared} bytes, above the limit of {limit}", status=413)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise InputError(f"the body is above the limit of {limit} bytes", status=413)
                chunks.append(chunk)
    except TimeoutError:
        raise InputError(f"the request body did not arrive within {timeout_s:g} s", status=408) from None
    except BodyRefused as exc:  # the ingress guard's budget or deadline: it answers, this counts
        raise InputError(exc.refusal.detail, status=exc.refusal.status) from None
    return b"".join(chunks)


def _refused(exc: InputError) -> Response:
    response = _json(exc.body(), exc.status)
    if exc.status == 408:  # the rest of a stalled body may still come: this connection cannot carry another request
        response.headers["Connection"] = "close"
    return response


def create_app(worker: Worker) -> IngressGuard:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await worker.start()
        try:
            yield
        finally:
            await worker.stop()

    options: dict[str, Any] = {"title": "driftline worker", "lifespan": lifespan, "docs_url": None, "redoc_url": None}
    try:
        # The worker exports its own Prometheus metrics; FastAPI's built-in OpenTelemetry
        # hooks (newer releases) would otherwise look up providers on every request.
        app = FastAPI(**options, telemetry={"tracing": False, "metrics": False, "logs": False})
    except TypeError:  # a FastAPI without built-in telemetry
        app = FastAPI(**options)
    app.state.worker = worker
    token = secret(worker.settings.retrain_token)
    body_timeout_s = worker.config.body_timeout_s

    def authorised(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), token.encode())

    def unauthorised() -> Response:
        return _json({"detail": "missing or wrong bearer token (settings.retrain_token, env DRIFTLINE_RETRAIN_TOKEN)"},
                     401)

    def faults_refused(request: Request) -> Response | None:
        if not worker.config.faults:
            return _json({"detail": "fault injection is off: start the worker with --faults "
                                    "(env DRIFTLINE_WORKER_FAULTS=true) to use /admin/faults"}, 404)
        return None if authorised(request) else unauthorised()

    @app.get("/healthz")
    async def healthz() -> Response:
        current = worker.current
        stats = worker.logger.stats() if worker.logger else None
        return _json({"status": "ok", "model": current.model, "version": current.version, "device": worker.device,
                      "kafka_connected": None if stats is None else stats.connected})

    @app.get("/model")
    async def model_info() -> Response:
        current = worker.current
        return _json({"name": current.model, "version": current.version, "features": current.schema,
                      "example": worker.example, "metrics": current.info.metrics, "rollout": worker.routing.describe(),
                      "batching": {"max_batch_size": worker.config.max_batch_size,
                                   "max_wait_ms": worker.config.max_wait_ms}})

    @app.post("/predict")
    async def predict(request: Request) -> Response:
        return await answer_predict(request)

    async def answer_predict(request: Request) -> Response:
        try:
            answer = await worker.predict(request)
        except InputError as exc:
            worker.metrics.requests.labels(str(exc.status)).inc()
            return _refused(exc)
        except BatcherFull as exc:  # overloaded: refuse before any parsing, look-up or compute
            worker.metrics.requests.labels("503").inc()
            response = _json({"detail": f"the worker is overloaded ({exc}); retry later"}, 503)
            response.headers["Retry-After"] = str(defaults.WORKER_RETRY_AFTER_SECONDS)
            return response
        except ClientDisconnect:  # the client left before its body arrived: nothing failed here
            log.info("a client disconnected before its request body was read")
            worker.metrics.requests.labels(CLIENT_CLOSED_REQUEST).inc()
            return _json({"detail": "the client disconnected"}, 400)
        except Exception as exc:  # the model failed: say so, keep serving
            log.exception("prediction failed")
            worker.metrics.requests.labels("500").inc()
            return _json({"detail": f"prediction failed: {exc}"}, 500)
        worker.metrics.requests.labels("200").inc()
        return _json(answer)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(worker.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/admin/faults")
    async def get_faults(request: Request) -> Response:
        if (refused := faults_refused(request)) is not None:
            return refused
        return _json(worker.faults.as_dict())

    @app.post("/admin/faults")
    async def set_faults(request: Request) -> Response:
        if (refused := faults_refused(request)) is not None:
            return refused
        try:
            changes = orjson.loads(await _read_body(request, 4096, body_timeout_s) or b"{}")
            if not isinstance(changes, dict):
                raise ValueError("expected a JSON object such as {\"skew\": true}")
            worker.faults.update(changes)
        except InputError as exc:
            return _refused(exc)
        except ValueError as exc:
            return _json({"detail": str(exc)}, 422)
        log.warning("faults now %s", worker.faults.as_dict())
        return _json(worker.faults.as_dict())

    @app.delete("/admin/faults")
    async def clear_faults(request: Request) -> Response:
        if (refused := faults_refused(request)) is not None:
            return refused
        worker.faults.update({"skew": False, "latency_ms": 0, "latency_fraction": 0, "latency_version": None})
        return _json(worker.faults.as_dict())

    @app.post("/admin/retrain")
    async def retrain(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        try:
            raw = await _read_body(request, 65_536, body_timeout_s)
            reason = orjson.loads(raw) if raw.strip() else {}
        except InputError as exc:
            return _refused(exc)
        except orjson.JSONDecodeError as exc:
            return _json({"detail": f"the body must be a JSON object (the reason): {exc}"}, 422)
        if not isinstance(reason, dict):
            return _json({"detail": "the body must be a JSON object (the reason)"}, 422)
        key = request.headers.get("idempotency-key") or new_id()
        if len(key) > 128:
            return _json({"detail": "Idempotency-Key: longer than 128 characters"}, 422)
        ticket = await asyncio.to_thread(worker.retrainer.submit, key, reason)
        return _json({"request_id": str(ticket.id), "idempotency_key": ticket.idempotency_key,
                      "status": ticket.status, "duplicate": not ticket.created}, 202)

    @app.get("/admin/retrain/{request_id}")
    async def retrain_status(request_id: str, request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        document = await asyncio.to_thread(worker.retrainer.get, int(request_id)) if request_id.isdigit() else None
        if document is None:
            return _json({"detail": f"no retrain request {request_id}"}, 404)
        return _json(document)

    infer = add_v2_routes(app, worker)

    def count_refused(path: str, status: int) -> None:
        if path == "/predict":
            worker.metrics.requests.labels(str(status)).inc()
        elif is_infer_path(path):
            worker.metrics.v2_requests.labels(PROTOCOL_V2_REST, str(status)).inc()

    rules = IngressRules("worker", worker.allowed_hosts, HOSTS_SETTING, worker.config.limits,
                         lambda path: OIP_BODY if path.startswith("/v2/") else JSON_BODY,  # tritonclient: no type
                         lambda path: "error" if path.startswith("/v2") else "detail")  # OIP's error shape
    return IngressGuard(PredictFastPath(app, answer_predict, infer), rules, count_refused)
