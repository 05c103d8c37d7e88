"""`driftline receiver`: the HTTP receiver for serving platforms' payload loggers (docs/receiver.md)."""
from __future__ import annotations

import click

from driftline import defaults
from driftline.config import Settings, common_options, secret


@click.command()
@click.option("--host", default=None,
              help="Interface to listen on (default: settings.receiver_host, 127.0.0.1). On any address but loopback "
                   "the receiver refuses to start without a token (DRIFTLINE_RECEIVER_TOKEN).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port (default: settings.receiver_port, 8002).")
@click.option("--allowed-hosts", default=None,
              help="Host header names to answer besides localhost, 127.0.0.1 and [::1] (comma-separated, :PORT "
                   "optional; default: settings.receiver_allowed_hosts). Other names get 400, which stops DNS "
                   "rebinding; list the names loggers use when --host is not loopback.")
@click.option("--body-timeout", type=click.FloatRange(0, min_open=True),
              default=defaults.RECEIVER_BODY_TIMEOUT_SECONDS, show_default=True,
              help="Seconds a request's body may take to arrive; then 408 and the connection closed.")
@click.option("--max-connections", type=click.IntRange(1), default=defaults.RECEIVER_MAX_CONNECTIONS,
              show_default=True, help="Open connections at most; beyond it a new request gets 503.")
@click.option("--pair-wait", type=click.FloatRange(0.001), default=defaults.RECEIVER_PAIR_WAIT_SECONDS,
              show_default=True, help="Seconds a request or response half waits for its other half.")
@click.option("--max-pending", type=click.IntRange(1), default=defaults.RECEIVER_MAX_PENDING, show_default=True,
              help="Halves waiting at most; beyond it the oldest is dead-lettered.")
@click.option("--event-buffer", type=click.IntRange(1), default=defaults.RECEIVER_EVENT_BUFFER, show_default=True,
              help="Events held while Kafka is slow or down; beyond it calls are answered 503.")
@click.option("--otlp-grpc-port", type=click.IntRange(0, 65535), default=None,
              help="OTLP gRPC port for OpenTelemetry traces (default: settings.receiver_otlp_grpc_port, 4317; 0: off). "
                   "OTLP over HTTP is always at POST /v1/traces.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@common_options
def receiver(settings: Settings, host: str | None, port: int | None, pair_wait: float, max_pending: int,
             event_buffer: int, log_level: str, allowed_hosts: str | None = None,
             body_timeout: float = defaults.RECEIVER_BODY_TIMEOUT_SECONDS,
             max_connections: int = defaults.RECEIVER_MAX_CONNECTIONS, otlp_grpc_port: int | None = None) -> None:
    """Receive KServe inference-logger CloudEvents, contract events and OpenTelemetry traces; produce them to Kafka."""
    import logging

    import uvicorn

    from driftline.errors import UserError
    from driftline.hosts import is_loopback, parse_allowed_hosts
    from driftline.ingress import Limits
    from driftline.kafka_security import KafkaSecurity
    from driftline.listen import token_problem
    from driftline.llm_settings import LlmSettings
    from driftline.receiver.otlp import OtlpConfig, OtlpIntake
    from driftline.receiver.otlp_grpc import start_otlp_grpc, stop_otlp_grpc
    from driftline.receiver.app import LIMITS, create_app
    from driftline.receiver.service import Receiver, ReceiverConfig
    from driftline.store import db

    host = host or settings.receiver_host
    token = secret(settings.receiver_token)
    problem = token_problem(host, token, "DRIFTLINE_RECEIVER_TOKEN (settings.receiver_token)")
    if problem is not None:
        raise UserError(f"driftline receiver: {problem}")
    try:
        hosts = parse_allowed_hosts(settings.receiver_allowed_hosts if allowed_hosts is None else allowed_hosts)
    except ValueError as exc:
        raise UserError(f"driftline receiver: --allowed-hosts (settings.receiver_allowed_hosts): {exc}") from None
    if not is_loopback(host) and hosts == parse_allowed_hosts(""):
        click.echo(f"warning: listening on {host} with only loopback names allowed in Host: list the names "
                   "loggers use in receiver_allowed_hosts (--allowed-hosts)", err=True)
    limits = Limits(LIMITS.max_body_bytes, body_timeout, LIMITS.head_timeout_s, max_connections)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.DEBUG if log_level == "debug" else logging.CRITICAL)
    db.require_migrated(settings.db_url)
    service = Receiver(ReceiverConfig(bootstrap_servers=settings.bootstrap_servers, db_url=settings.db_url,
                                      security=KafkaSecurity.from_settings(settings).checked(),
                                      pair_wait_s=pair_wait, max_pending=max_pending, event_buffer=event_buffer,
                                      max_pending_bytes=settings.receiver_max_pending_bytes,
                                      max_models_per_call=settings.receiver_max_models_per_call,
                                      max_errors=settings.receiver_max_errors,
                                      dead_letter_raw_bytes=settings.receiver_dead_letter_raw_bytes,
                                      dead_letter_inflight=settings.receiver_dead_letter_inflight,
                                      dead_letter_inflight_bytes=settings.receiver_dead_letter_inflight_bytes))
    intake = OtlpIntake(service, OtlpConfig(llm=LlmSettings.from_mapping(settings.section("llm")),
                                            wait_s=settings.receiver_otlp_trace_wait_seconds,
                                            max_body_bytes=limits.max_body_bytes))
    port = settings.receiver_port if port is None else port
    grpc_port = settings.receiver_otlp_grpc_port if otlp_grpc_port is None else otlp_grpc_port
    grpc_server = None
    try:
        if grpc_port:
            try:
                grpc_server, grpc_port = start_otlp_grpc(intake, host, grpc_port, token, limits.max_body_bytes,
                                                         max_connections)
            except OSError as exc:
                if otlp_grpc_port is not None:  # asked for on the command line: no silent fallback
                    raise
                # the default port taken (another receiver, a collector): traces still come over HTTP
                click.echo(f"warning: {exc} (settings.receiver_otlp_grpc_port); OTLP gRPC is off, OTLP over HTTP "
                           "is at /v1/traces", err=True)
        grpc_text = f", OTLP gRPC on {host}:{grpc_port}" if grpc_server is not None else ""
        click.echo(f"receiving on http://{host}:{port} (CloudEvents at /, JSON lines at /events, OTLP traces at "
                   f"/v1/traces{grpc_text})", err=True)
        uvicorn.run(create_app(service, token=token, limits=limits, allowed_hosts=hosts, otlp=intake), host=host,
                    port=port, log_level=log_level, access_log=False, **limits.uvicorn_options())
    except OSError as exc:
        raise UserError(f"driftline receiver: {exc}") from None
    finally:
        if grpc_server is not None:
            stop_otlp_grpc(grpc_server)
        service.close()
