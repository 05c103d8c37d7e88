"""`driftline up`: the whole local stack on embedded defaults, supervised.

broker (in this process) -> store migrations -> a trained model (first run only) ->
worker, collector, scheduler, receiver, dashboard and replay traffic as child processes with
prefixed logs. Ctrl-C or the end of --duration stops everything, leaving nothing behind.
"""
from __future__ import annotations

import json
import secrets
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

import click

from driftline import defaults
from driftline.broker import EmbeddedBroker, port_is_free, wait_for_port
from driftline.config import DEFAULT_RETRAIN_TOKEN, EMBEDDED_BROKER_PORT, Settings, common_options, secret
from driftline.errors import UserError
from driftline.commands.up_rag import RAG_SCENARIO, rag_config, rag_traffic, register_rag_baseline
from driftline.private_files import open_private, private_dir
from driftline.store import db as store_db
from driftline.supervisor import Component, Supervisor

SCENARIOS = ("none", "covariate_shift", "concept_drift", "skew", "latency", "data_quality", "segment_shift",
             "stale_features", "embedding_shift", "shadow", "canary_regression", "ab", "aa")
DEFAULT_MODEL = "credit-default"
# Short windows so that a demo shows closed, evaluated windows within a minute or two.
UP_WINDOW_SECONDS = 15
READY_TIMEOUT_S = 180.0
REPLAY_ROUND_SECONDS = 600


def _driftline(*args: str) -> list[str]:
    return [sys.executable, "-m", "driftline.cli", *args]


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return response.status == 200
    except OSError:
        return False


def _has_production_model(settings: Settings, model: str) -> bool:
    from driftline.store.aliases import alias_version

    with store_db.session_scope(settings.db_url) as session:
        return alias_version(session, model) is not None


def _train_first_model(settings: Settings, env: dict[str, str], model: str, out: Supervisor) -> None:
    out.log("up", f"no production version of {model} yet: training one on the bundled data set ...")
    trainer = out.add(Component("train", _driftline("train", "--model", model), env=env, restart=False))
    out.start(trainer)
    code = trainer.process.wait()
    out.components.remove(trainer)
    if code != 0:
        raise UserError(f"`driftline train` failed with exit code {code}; see the train| lines above")


@click.command()
@click.option("--scenario", type=click.Choice((*SCENARIOS, RAG_SCENARIO)), default="covariate_shift",
              show_default=True, help="Demo traffic: what the replayed requests do to the model; rag_topic_shift: a "
                                      "RAG stand-in's OpenTelemetry traces instead of the worker (docs/llm.md).")
@click.option("--duration", type=click.FloatRange(min=1), default=None,
              help="Stop cleanly after this many seconds (default: run until Ctrl-C).")
@click.option("--window-seconds", type=click.IntRange(min=1), default=UP_WINDOW_SECONDS, show_default=True,
              help="Event-time window length.")
@click.option("--no-dashboard", is_flag=True, help="Do not start the Streamlit dashboard.")
@click.option("--rate", type=click.FloatRange(min=0.1), default=40.0, show_default=True,
              help="Replay requests per second.")
@click.option("--warmup", type=click.FloatRange(min=0), default=None,
              help="Seconds of normal traffic before the scenario starts (default: two windows).")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model name.")
@click.option("--broker-port", type=click.IntRange(1, 65535), default=EMBEDDED_BROKER_PORT, show_default=True,
              help="Port of the embedded broker (ignored with --bootstrap-servers).")
@click.option("--receiver-port", type=click.IntRange(1, 65535), default=None,
              help="Port of the payload-logger receiver on loopback (default: settings.receiver_port, 8002).")
@click.option("--no-receiver", is_flag=True, help="Do not start the payload-logger receiver (`driftline receiver`).")
@common_options
def up(scenario: str, duration: float | None, window_seconds: int, no_dashboard: bool, rate: float,
       warmup: float | None, model: str, broker_port: int, receiver_port: int | None, no_receiver: bool,
       settings: Settings) -> None:
    """Run the whole local stack: broker, store, model, worker, collector, scheduler, receiver, dashboard, traffic."""
    supervisor = Supervisor()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    metrics_port = _scheduler_metrics_port(settings)
    if not port_is_free("127.0.0.1", metrics_port):
        raise UserError(f"port {metrics_port} (the scheduler's /metrics) is in use (is another `driftline up` "
                        "running?); stop it, or set DRIFTLINE_SCHEDULER_METRICS_PORT to a free port")
    receiver_port = None if no_receiver else (receiver_port or settings.receiver_port or None)
    rag = scenario == RAG_SCENARIO
    if rag and receiver_port is None:
        raise UserError(f"--scenario {RAG_SCENARIO} sends its traces to the receiver: drop --no-receiver")
    if receiver_port is not None and not port_is_free("127.0.0.1", receiver_port):
        raise UserError(f"port {receiver_port} (the receiver) is in use (is another `driftline up` running?); "
                        "stop it, or pass --receiver-port PORT or --no-receiver")
    private_dir(settings.home)  # 0700: the store, models and the config copy below live here
    embedded = None
    default_bootstrap = Settings.model_fields["bootstrap_servers"].default
    if settings.bootstrap_servers == default_bootstrap:
        if not port_is_free("127.0.0.1", broker_port):
            raise UserError(f"port {broker_port} is in use (is another `driftline up` running?); stop it, "
                            "or pass --bootstrap-servers to use a running Kafka")
        log_file = open_private(settings.home / "broker.log", "ab")
        embedded = EmbeddedBroker(broker_port, partitions=settings.topic_partitions, log=log_file).start()
        settings = settings.model_copy(update={"bootstrap_servers": embedded.bootstrap_servers})
        supervisor.log("broker", f"embedded broker on {embedded.bootstrap_servers} (memory storage; log: "
                                 f"{settings.home / 'broker.log'})")
    try:
        store_db.upgrade(settings.db_url)
        supervisor.log("store", f"store ready at {store_db.redacted_url(settings.db_url)}")
        worker_url = f"http://127.0.0.1:{settings.worker_port}"
        env = component_env(settings, window_seconds, worker_url)
        if rag:
            config_path = rag_config(settings)
            if config_path is not None:
                env["DRIFTLINE_CONFIG"] = str(config_path.resolve())
            register_rag_baseline(settings, env, supervisor, _driftline())
            _run_rag(supervisor, settings, env, receiver_port, rate, window_seconds, warmup, duration, no_dashboard,
                     stop, embedded)  # type: ignore[arg-type]
            return
        from driftline.worker.scenarios import SCENARIOS as TRAFFIC

        config_path = _scenario_config(settings, scenario, TRAFFIC[scenario].segments,
                                       TRAFFIC[scenario].stale_feature is not None)
        if config_path is not None:
            env["DRIFTLINE_CONFIG"] = str(config_path.resolve())
        if not _has_production_model(settings, model):
            _train_first_model(settings, env, model, supervisor)
            if stop.is_set():
                return
        _add_stages(supervisor, settings, env)
        # Loopback whatever DRIFTLINE_WORKER_HOST says (up reaches it there); fault injection only for the
        # scenarios that switch a fault on (skew, latency, canary_regression).
        faults = ["--faults"] if TRAFFIC[scenario].uses_faults else []
        faults += ["--log-embeddings"] if TRAFFIC[scenario].coupled else []  # what embedding_shift is judged on
        supervisor.add(Component("worker", _driftline("worker", "--host", "127.0.0.1", "--port",
                                                      str(settings.worker_port), "--model", model, *faults), env=env))
        if receiver_port is not None:  # loopback whatever DRIFTLINE_RECEIVER_HOST says, as for the worker
            supervisor.add(Component("receiver", _driftline("receiver", "--host", "127.0.0.1", "--port",
                                                            str(receiver_port)), env=env))
        if not no_dashboard:
            supervisor.add(Component("dashboard", _driftline("dashboard", "--port", str(settings.dashboard_port)),
                                     env=env))
        supervisor.start_all()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _http_ok(f"{worker_url}/healthz"):
            if stop.wait(0.5) or time.monotonic() > deadline:
                if not stop.is_set():
                    raise UserError(f"the worker did not become ready at {worker_url} within {READY_TIMEOUT_S:.0f}s")
                return
            supervisor.poll()
        warmup = 2 * window_seconds if warmup is None else warmup
        # Without --duration the traffic runs in rounds (normal warm-up, then the scenario), so that replay
        # never holds more than one round of requests in memory and the story repeats until Ctrl-C.
        replay_args = ["replay", "--scenario", scenario, "--rate", str(rate), "--worker-url", worker_url,
                       "--warmup", str(warmup), "--duration", str(duration or REPLAY_ROUND_SECONDS)]
        supervisor.add(Component("replay", _driftline(*replay_args), env=env, restart=duration is None,
                                 repeat=duration is None))
        supervisor.start_all()
        if not no_dashboard:
            wait_for_port("127.0.0.1", settings.dashboard_port, 60)
        _print_ready(supervisor, settings, worker_url, no_dashboard, scenario, duration, embedded, receiver_port)
        supervisor.run(stop, deadline=None if duration is None else time.monotonic() + duration,
                       on_tick=lambda: _restart_broker_if_dead(embedded, supervisor))
    finally:
        supervisor.stop_all()
        if embedded is not None:
            embedded.stop()
            supervisor.log("broker", "stopped")


def _run_rag(supervisor: Supervisor, settings: Settings, env: dict[str, str], receiver_port: int, rate: float,
             window_seconds: int, warmup: float | None, duration: float | None, no_dashboard: bool,
             stop: threading.Event, embedded: EmbeddedBroker | None) -> None:
    """The RAG scenario's stack: collector, scheduler, receiver (OTLP over HTTP), dashboard and the stand-in."""
    _add_stages(supervisor, settings, env)
    supervisor.add(Component("receiver", _driftline("receiver", "--host", "127.0.0.1", "--port", str(receiver_port),
                                                    "--otlp-grpc-port", "0"), env=env))
    if not no_dashboard:
        supervisor.add(Component("dashboard", _driftline("dashboard", "--port", str(settings.dashboard_port)), env=env))
    supervisor.start_all()
    wait_for_port("127.0.0.1", receiver_port, READY_TIMEOUT_S)
    warmup = 2 * window_seconds if warmup is None else warmup
    supervisor.add(Component("traffic", rag_traffic(receiver_port, rate, warmup, duration or REPLAY_ROUND_SECONDS),
                             env=env, restart=duration is None, repeat=duration is None))
    supervisor.start_all()
    supervisor.log("up", f"driftline is up: the RAG stand-in traces to http://127.0.0.1:{receiver_port}/v1/traces; "
                         f"its questions leave the help desk after {warmup:.0f}s"
                         + ("" if no_dashboard else f"; dashboard http://127.0.0.1:{settings.dashboard_port}"))
    supervisor.run(stop, deadline=None if duration is None else time.monotonic() + duration,
                   on_tick=lambda: _restart_broker_if_dead(embedded, supervisor))


def _add_stages(supervisor: Supervisor, settings: Settings, env: dict[str, str]) -> None:
    """The collector and the scheduler, which every scenario runs."""
    supervisor.add(Component("collector", _driftline("collector"), env=env))
    supervisor.add(Component("scheduler", _driftline("scheduler", "--metrics-port",
                                                     str(_scheduler_metrics_port(settings))), env=env))


def component_env(settings: Settings, window_seconds: int, worker_url: str) -> dict[str, str]:
    """The environment of the components `up` starts: the stack's addresses, and this run's admin token."""
    env = {
        "DRIFTLINE_DB": settings.db_url,
        "DRIFTLINE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "DRIFTLINE_HOME": str(settings.home.resolve()),
        "DRIFTLINE_WINDOW_SECONDS": str(window_seconds),
        "DRIFTLINE_ALLOWED_LATENESS_SECONDS": str(min(settings.allowed_lateness_seconds, max(2, window_seconds // 3))),
        # the demo's partitions without traffic stop holding its short windows back as soon as its lateness allows
        "DRIFTLINE_IDLE_PARTITION_SECONDS": str(min(settings.idle_partition_seconds, max(2, window_seconds // 3))),
        "DRIFTLINE_DASHBOARD_URL": f"http://127.0.0.1:{settings.dashboard_port}",
        "DRIFTLINE_RETRAIN_TOKEN": admin_token(settings),
        # the demo's few models: every feature's drift series on the scheduler's /metrics, unless set otherwise
        "DRIFTLINE_SCHEDULER_METRICS_DETAIL_MODELS": settings.scheduler_metrics_detail_models or "*",
    }
    own_webhook = secret(settings.retrain_webhook_url)
    env["DRIFTLINE_RETRAIN_WEBHOOK_URL"] = own_webhook or f"{worker_url}/admin/retrain"
    if own_webhook is None:  # closes the loop: persistent drift asks the bundled worker to retrain, with its token
        env["DRIFTLINE_RETRAIN_WEBHOOK_TOKEN"] = env["DRIFTLINE_RETRAIN_TOKEN"]
    return env


def admin_token(settings: Settings) -> str:
    """The worker's admin token for this run: the user's own, else a fresh random one (never the published default,
    which any page in the user's browser could send)."""
    own = secret(settings.retrain_token)
    return own if own and own != DEFAULT_RETRAIN_TOKEN else secrets.token_urlsafe(32)

def _scheduler_metrics_port(settings: Settings) -> int:
    """The scheduler's /metrics port: the setting when given, else the one `up` always serves on."""
    return settings.scheduler_metrics_port or defaults.UP_SCHEDULER_METRICS_PORT


def _scenario_config(settings: Settings, scenario: str, segments: tuple[str, ...], online: bool = False) -> Path | None:
    """The TOML file the components read: the user's, plus the scenario's [segments] columns when it has
    some and the user's file has no [segments] table, and the online features' [freshness] max ages when
    it serves some and the user's file has no [freshness] table (written next to the store, for this run)."""
    from driftline.worker.online_features import freshness_table

    extra = ""
    if segments and not settings.section("segments"):
        columns = ", ".join(json.dumps(column) for column in segments)
        extra += f"\n\n# added by `driftline up --scenario {scenario}`\n[segments]\ncolumns = [{columns}]\n"
    if online and not settings.section("freshness"):
        extra += freshness_table(scenario)
    if not extra:
        return settings.config_path
    text = settings.config_path.read_text() if settings.config_path is not None else ""
    path = settings.home / f"up-{scenario}.toml"
    with open_private(path, "w") as fh:  # 0600: a copy of the user's settings, which may hold secrets
        fh.write(text + extra)
    return path


def _restart_broker_if_dead(embedded: EmbeddedBroker | None, supervisor: Supervisor) -> None:
    """The embedded broker is supervised too; its memory storage is lost when it dies (README)."""
    if embedded is None or embedded.is_running():
        return
    code = embedded.process.poll() if embedded.process is not None else None
    supervisor.log("broker", f"broker exited (code {code}); its memory storage is lost. Restarting it ...")
    embedded.process = None
    try:
        embedded.start()
        supervisor.log("broker", f"broker restarted on {embedded.bootstrap_servers}")
    except UserError as exc:
        supervisor.log("broker", f"restart failed: {exc}; retrying")


def _print_ready(supervisor: Supervisor, settings: Settings, worker_url: str, no_dashboard: bool, scenario: str,
                 duration: float | None, embedded: EmbeddedBroker | None, receiver_port: int | None) -> None:
    lines = [
        "driftline is up:",
        f"  worker      {worker_url}  (POST /predict, GET /model, GET /metrics; /admin/* takes this run's random "
        "token unless DRIFTLINE_RETRAIN_TOKEN sets one)",
        f"  collector   metrics at http://127.0.0.1:{settings.collector_metrics_port}/metrics",
        f"  scheduler   metrics at http://127.0.0.1:{_scheduler_metrics_port(settings)}/metrics  (monitoring results)",
        *([f"  receiver    http://127.0.0.1:{receiver_port}/  (KServe payload-logger CloudEvents; POST /events for "
           "contract events as JSON lines; GET /metrics)"] if receiver_port is not None else []),
        f"  kafka       {settings.bootstrap_servers}" + (" (embedded, memory storage)" if embedded else ""),
        f"  store       {store_db.redacted_url(settings.db_url)}",
    ]
    if not no_dashboard:
        lines.append(f"  dashboard   http://127.0.0.1:{settings.dashboard_port}")
    lines.append(f"  traffic     scenario {scenario!r}" + (f" for {duration:.0f}s" if duration else " until Ctrl-C"))
    lines.append("  status      driftline status   (in another terminal)")
    for line in lines:
        supervisor.log("up", line)
