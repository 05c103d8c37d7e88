"""CLI commands of the worker stage: train, models, promote, rollback, worker, replay.

torch, FastAPI and pandas are imported inside the commands, so `driftline --help` stays fast.
"""
from __future__ import annotations

import json
from typing import Any

import click

from driftline import defaults
from driftline.config import Settings, common_options, secret

DEFAULT_MODEL = "credit-default"
SCENARIO_NAMES = ("none", "covariate_shift", "concept_drift", "skew", "latency", "data_quality", "segment_shift",
                  "stale_features", "embedding_shift", "shadow", "canary_regression", "ab", "aa")


def _model_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from driftline.names import name_problem

    problem = None if value is None else name_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


model_option = click.option("--model", default=DEFAULT_MODEL, show_default=True, callback=_model_name,
                            help="Model name in the registry (letters, digits, '.', '_', '-').")


def _registry(settings: Settings, migrate: bool = False) -> Any:
    from driftline.store import db
    from driftline.worker.registry import Registry

    if migrate:
        db.upgrade(settings.db_url)
    else:
        db.require_migrated(settings.db_url)
    return Registry(settings.db_url, settings.artifacts_dir)


@click.command()
@model_option
@click.option("--rows", default=20_000, show_default=True, type=click.IntRange(100), help="Rows of the bundled data set.")
@click.option("--seed", default=7, show_default=True, type=int, help="Seed of the data set and of training.")
@click.option("--epochs", default=2, show_default=True, type=click.IntRange(1), help="Passes over the training rows.")
@click.option("--size", type=click.Choice(["default", "small", "test"]), default="default", show_default=True,
              help="MLP size: default (~3.2 M weights, ~1 ms per single-row forward pass), small, test (tiny, for tests).")
@click.option("--promote/--no-promote", default=None,
              help="Point production at the new version (default: only when the model has no production version).")
@click.option("--description", default=None, help="Free text stored with the version.")
@common_options
def train(settings: Settings, model: str, rows: int, seed: int, epochs: int, size: str, promote: bool | None,
          description: str | None) -> None:
    """Train a model version on the bundled data set and register it with its baseline."""
    from driftline.worker.dataset import generate
    from driftline.worker.publish import train_and_publish
    from driftline.worker.training import TrainConfig

    registry = _registry(settings, migrate=True)
    inputs, labels = generate(rows, seed)
    published = train_and_publish(registry, model, inputs, labels, TrainConfig(size=size, epochs=epochs, seed=seed),
                                  promote=promote,
                                  description=description or f"bundled data set, {rows} rows, seed {seed}")
    m = published.metrics
    click.echo(f"registered {model} version {published.version}: holdout AUC {m['auc']:.3f}, "
               f"log loss {m['log_loss']:.4f}, accuracy {m['accuracy']:.3f} "
               f"({m['train_rows']} train / {m['holdout_rows']} holdout rows, {m['train_seconds']} s)")
    if published.promoted:
        click.echo(f"production -> version {published.version}"
                   + (f" (was {published.previous_production})" if published.previous_production else ""))
    else:
        click.echo(f"production stays at version {published.previous_production}; "
                   f"`driftline promote {published.version} --model {model}` to switch")


@click.command()
@click.option("--model", default=None, help="Only this model.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@common_options
def models(settings: Settings, model: str | None, as_json: bool) -> None:
    """List registered model versions (* marks production)."""
    registry = _registry(settings)
    versions = registry.versions(model)
    production = {name: registry.alias(name) for name in {v.model for v in versions}}
    if as_json:
        click.echo(json.dumps([{"model": v.model, "version": v.version, "production": production[v.model] == v.version,
                                "created_at": v.created_at, "artifact_sha256": v.artifact_sha256,
                                "training_data_sha256": v.training_data_sha256, "metrics": v.metrics,
                                "description": v.description} for v in versions], indent=2))
        return
    if not versions:
        click.echo("no model versions registered; run `driftline train`")
        return
    click.echo(f"{'':2}{'model':<18}{'version':>8}  {'AUC':>6}  {'log loss':>8}  {'rows':>7}  {'created':<20}  description")
    for v in versions:
        mark = "*" if production[v.model] == v.version else " "
        auc = v.metrics.get("auc")
        click.echo(f"{mark:2}{v.model:<18}{v.version:>8}  {auc if auc is None else format(auc, '.3f'):>6}  "
                   f"{v.metrics.get('log_loss', float('nan')):>8.4f}  {v.metrics.get('train_rows', 0):>7}  "
                   f"{v.created_at[:19]:<20}  {v.description or ''}")


@click.command()
@click.argument("version")
@model_option
@click.option("--reason", default=None, help="Why (kept in the alias history).")
@common_options
def promote(settings: Settings, version: str, model: str, reason: str | None) -> None:
    """Point the production alias of MODEL at VERSION (running workers switch within a second)."""
    previous = _registry(settings).promote(model, version, reason=reason)
    click.echo(f"{model}: production -> version {version}" + (f" (was {previous})" if previous else ""))


@click.command()
@model_option
@click.option("--reason", default=None, help="Why (kept in the alias history).")
@common_options
def rollback(settings: Settings, model: str, reason: str | None) -> None:
    """Point production back at the version that was production before the current one."""
    previous, target = _registry(settings).rollback(model, reason=reason)
    click.echo(f"{model}: production -> version {target} (rolled back from {previous})")


@click.command()
@model_option
@click.option("--host", default=None,
              help="Interface to listen on (default: settings.worker_host, 127.0.0.1). On any address but loopback "
                   "the worker refuses to start with the published default admin token (DRIFTLINE_RETRAIN_TOKEN).")
@click.option("--allowed-hosts", default=None,
              help="Host header names to answer besides localhost, 127.0.0.1 and [::1] (comma-separated, :PORT "
                   "optional; default: settings.worker_allowed_hosts). Other names get 400, which stops DNS "
                   "rebinding; list the names clients use when --host is not loopback.")
@click.option("--port", type=int, default=None, help="Port (default: settings.worker_port, 8000).")
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=None,
              help="Port of the Open Inference Protocol gRPC service, on the same interface "
                   "(default: settings.worker_grpc_port, 8001; 0: off).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: CUDA when torch sees a GPU, else CPU.")
@click.option("--max-batch-size", type=click.IntRange(1), default=defaults.WORKER_MAX_BATCH_SIZE, show_default=True)
@click.option("--max-wait-ms", type=click.FloatRange(0), default=defaults.WORKER_MAX_WAIT_MS, show_default=True,
              help="Longest a request waits for others to join its batch.")
@click.option("--max-pending", type=click.IntRange(1), default=defaults.WORKER_MAX_PENDING_REQUESTS, show_default=True,
              help="Requests admitted or queued at most; beyond it POST /predict answers 503 with Retry-After.")
@click.option("--body-timeout", type=click.FloatRange(0, min_open=True), default=defaults.WORKER_BODY_TIMEOUT_SECONDS,
              show_default=True, help="Seconds a request's body may take to arrive; then 408 and the connection closed.")
@click.option("--max-connections", type=click.IntRange(1), default=defaults.WORKER_MAX_CONNECTIONS, show_default=True,
              help="Open connections at most; beyond it a new request gets 503.")
@click.option("--cache-size", type=click.IntRange(0), default=defaults.WORKER_CACHE_SIZE, show_default=True,
              help="Prediction cache entries (0: no cache).")
@click.option("--cache-ttl", type=click.FloatRange(0), default=defaults.WORKER_CACHE_TTL_SECONDS, show_default=True,
              help="Seconds a cached prediction stays valid.")
@click.option("--cache-url", default=None,
              help="Redis URL (redis://HOST:PORT/DB) of a prediction cache shared by workers, asked after a local "
                   "miss (env DRIFTLINE_WORKER_CACHE_URL; default: in-process cache only).")
@click.option("--events/--no-events", default=True, show_default=True, help="Log one event per request to Kafka.")
@click.option("--event-producer", type=click.Choice(["process", "thread"]), default="process", show_default=True,
              help="Where the Kafka producer runs: a child process running confluent-kafka (off the serving "
                   "GIL), or a kafka-python producer on a thread in the worker.")
@click.option("--event-buffer", type=click.IntRange(1), default=defaults.WORKER_EVENT_BUFFER, show_default=True,
              help="Events held while Kafka is slow or down; beyond it they are dropped and counted.")
@click.option("--alias-poll", type=click.FloatRange(0), default=defaults.WORKER_ALIAS_POLL_SECONDS, show_default=True,
              help="Seconds between reads of the production alias and the rollout plan (0: never hot-swap).")
@click.option("--shadow-queue", type=click.IntRange(1), default=defaults.WORKER_SHADOW_QUEUE, show_default=True,
              help="Shadow copies waiting for a rollout's candidate at most; beyond it they are dropped and counted.")
@click.option("--labels/--no-labels", default=True, show_default=True,
              help="Consume driftline.labels to join recent requests with labels (for POST /admin/retrain).")
@click.option("--faults/--no-faults", default=None,
              help="Allow fault injection through /admin/faults (default: settings.worker_faults, off; "
                   "`driftline up` sets it for its skew and latency scenarios).")
@click.option("--log-embeddings/--no-log-embeddings", "log_embeddings", default=None,
              help="Log each request's penultimate-layer activations as the embedding `activations` "
                   "(default: settings.worker_log_embeddings, off).")
@click.option("--threads", type=click.IntRange(1), default=None,
              help="torch intra-op threads (default: CPUs - 1, so one core stays with the event loop).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True)
@common_options
def worker(settings: Settings, model: str, host: str | None, allowed_hosts: str | None, port: int | None,
           grpc_port: int | None, device: str,
           max_batch_size: int, max_wait_ms: float, max_pending: int, body_timeout: float, max_connections: int,
           cache_size: int, cache_ttl: float, cache_url: str | None, events: bool, event_producer: str,
           event_buffer: int, alias_poll: float, shadow_queue: int, labels: bool, faults: bool | None, threads: int | None,
           log_level: str, log_embeddings: bool | None = None) -> None:
    """Run the inference server (GET /healthz, GET /model, POST /predict, GET /metrics; Open Inference
    Protocol v2 under /v2 and over gRPC on --grpc-port)."""
    import logging
    import os

    import torch
    import uvicorn

    from driftline.errors import UserError
    from driftline.listen import port_in_use
    from driftline.worker.server import Worker, WorkerConfig, create_app

    host = host or settings.worker_host
    faults = settings.worker_faults if faults is None else faults
    allowed_hosts = settings.worker_allowed_hosts if allowed_hosts is None else allowed_hosts
    settings = settings.model_copy(update={"worker_host": host, "worker_faults": faults,
                                           "worker_allowed_hosts": allowed_hosts})
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python logs every failed reconnect; the worker reports Kafka trouble once itself
    # (and in /metrics: driftline_worker_kafka_connected, events buffered/dropped).
    logging.getLogger("kafka").setLevel(logging.DEBUG if log_level == "debug" else logging.CRITICAL)
    # The event loop (HTTP, validation, logging) needs a core of its own: on a 2-core machine
    # a batch of 64 took 6 ms on one torch thread and 26 ms on two contending with it.
    torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) - 1))
    _registry(settings)
    config = WorkerConfig(model=model, device=device, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms,
                          max_pending=max_pending, body_timeout_s=body_timeout, max_connections=max_connections,
                          cache_size=cache_size, cache_ttl_s=cache_ttl, cache_url=cache_url or settings.worker_cache_url,
                          log_events=events, event_producer=event_producer, event_buffer=event_buffer,
                          alias_poll_s=alias_poll, shadow_queue=shadow_queue, listen_for_labels=labels,
                          faults=faults, grpc_port=settings.worker_grpc_port if grpc_port is None else grpc_port,
                          log_embeddings=settings.worker_log_embeddings if log_embeddings is None else log_embeddings)
    if config.grpc_port:  # a missing grpcio or tritonclient is reported here, not in the middle of start-up
        import driftline.worker.oip_grpc  # noqa: F401
    port = port or settings.worker_port
    for taken, what, option in ((port, "HTTP", "--port PORT"),
                                (config.grpc_port, "OIP gRPC", "--grpc-port PORT (0: off)")):
        if port_in_use(host, taken):  # else a bind error from deep in uvicorn's or grpc's start-up
            raise UserError(f"port {taken} on {host} (the worker's {what} port) is in use; stop what holds it, "
                            f"or pass {option}")
    try:
        serving = Worker(settings, config)
    except (RuntimeError, ValueError) as exc:  # --device cuda without a GPU; a malformed --cache-url
        raise UserError(str(exc)) from None
    serving.load()
    click.echo(f"serving {model} version {serving.current.version} on http://{host}:{port} ({serving.device})"
               + (f", OIP gRPC on {host}:{config.grpc_port}" if config.grpc_port else ""), err=True)
    uvicorn.run(create_app(serving), host=host, port=port, log_level=log_level, access_log=False,
                **config.limits.uvicorn_options())


@click.command()
@click.option("--scenario", type=click.Choice(SCENARIO_NAMES), default="none", show_default=True)
@click.option("--rate", type=click.FloatRange(0.1, 20_000), default=50.0, show_default=True, help="Requests per second.")
@click.option("--duration", type=click.FloatRange(0.1, 86_400), default=60.0, show_default=True, help="Seconds of scenario traffic.")
@click.option("--requests", "request_count", type=click.IntRange(1), default=None,
              help="Send this many scenario requests however long they take, instead of --duration seconds.")
@click.option("--warmup", type=click.FloatRange(0, 86_400), default=0.0, show_default=True,
              help="Seconds of `none` traffic before the scenario starts.")
@click.option("--worker-url", default=None, help="Worker base URL (default: http://127.0.0.1:<settings.worker_port>).")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=defaults.REPLAY_MAX_CONCURRENCY, show_default=True,
              help="Requests in flight at most.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--label-delay", type=click.FloatRange(0), default=defaults.REPLAY_LABEL_DELAY_SECONDS, show_default=True,
              help="Seconds between a prediction and its label on driftline.labels.")
@click.option("--labels/--no-labels", default=True, show_default=True, help="Send ground-truth labels to Kafka.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@common_options
def replay(settings: Settings, scenario: str, rate: float, duration: float, request_count: int | None, warmup: float,
           worker_url: str | None, concurrency: int, seed: int, label_delay: float, labels: bool,
           as_json: bool) -> None:
    """Send scenario traffic to a worker (none, covariate_shift, concept_drift, skew, latency, data_quality,
    segment_shift, stale_features; rollouts, which train a candidate and set a plan in the store: shadow, canary_regression, ab, aa)."""
    import logging

    from driftline.errors import UserError
    from driftline.kafka_security import KafkaSecurity
    from driftline.worker.replay import ReplayConfig
    from driftline.worker.replay import replay as run

    duration_given = click.get_current_context().get_parameter_source("duration") in (
        click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    if request_count is not None and duration_given:
        raise UserError("pass --requests or --duration, not both: one bounds the scenario by count, the other by time")
    # the replay's own steps (a rollout scenario's candidate and plan), not every request httpx makes
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("driftline.worker.replay").setLevel(logging.INFO)

    config = ReplayConfig(worker_url=worker_url or f"http://127.0.0.1:{settings.worker_port}", scenario=scenario,
                          rate=rate, duration_s=duration, requests=request_count, warmup_s=warmup,
                          concurrency=concurrency, seed=seed,
                          label_delay_s=label_delay, bootstrap_servers=settings.bootstrap_servers if labels else None,
                          token=secret(settings.retrain_token),
                          security=KafkaSecurity.from_settings(settings).checked(), settings=settings)
    summary = run(config).summary()
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(" ".join(f"{k}={v}" for k, v in summary.items()))
