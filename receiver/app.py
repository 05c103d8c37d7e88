"""The receiver's HTTP surface (FastAPI), docs/receiver.md.

`POST /` (and any path under it but the ones below): CloudEvents of KServe's inference logger, or of
any proxy, in binary, structured or batched mode. The logger URL may carry `model`, `version` and
`output` query parameters; `X-Driftline-Version` names the version too.
`POST /events`: contract events as JSON lines. `POST /v1/traces`: OpenTelemetry traces (OTLP, protobuf or JSON) of
LLM and RAG services, one event per request (receiver/otlp.py, docs/llm.md). `GET /healthz`: counts.
`GET /metrics`: Prometheus.
Answers: 200 with what was done (events, waiting halves, duplicates, dead letters with reasons);
400 when the call carried nothing usable (it is dead-lettered all the same); 413 for a body over
the bound, or a call that could never be taken whole (more rows than the event buffer, more models than
one call may name); 503 with Retry-After when the event buffer is full (nothing of the call was taken).
With a token set, POST calls need `Authorization: Bearer TOKEN` or `?token=TOKEN`.
In front of it all, the ingress guard (driftline/ingress.py): Host allow-list (`receiver_allowed_hosts`),
cross-origin requests refused, CloudEvents or JSON-lines content types only, a body budget and deadline.
"""
from __future__ import annotations

import hmac
import time
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from driftline import defaults
from driftline.hosts import parse_allowed_hosts
from driftline.ingress import (CLOUDEVENTS_BODY, JSON_LINES_BODY, OTLP_BODY, PROTOBUF, BodyRefused, IngressGuard,
                               IngressRules, Limits, media_type)
from driftline.otlp.spans import OtlpError
from driftline.receiver.metrics import ENDPOINT_CLOUDEVENTS, ENDPOINT_EVENTS, ENDPOINT_OTLP, ReceiverMetrics
from driftline.receiver.otlp import OtlpIntake, OtlpOutcome, export_response
from driftline.receiver.service import Busy, Outcome, Receiver, TooLarge

HINTS = ("model", "version", "output")
_RESERVED = {"events", "healthz", "metrics", "v1/traces"}
OTLP_PATH = "/v1/traces"
HOSTS_SETTING = "receiver_allowed_hosts (env DRIFTLINE_RECEIVER_ALLOWED_HOSTS, driftline receiver --allowed-hosts)"
LIMITS = Limits(defaults.RECEIVER_MAX_BODY_BYTES, defaults.RECEIVER_BODY_TIMEOUT_SECONDS,
                defaults.RECEIVER_HEAD_TIMEOUT_SECONDS, defaults.RECEIVER_MAX_CONNECTIONS)


def create_app(receiver: Receiver, token: str | None = None, limits: Limits = LIMITS,
               allowed_hosts: frozenset[str] = parse_allowed_hosts(""), otlp: OtlpIntake | None = None) -> IngressGuard:
    """The receiver's app behind the ingress guard; serve it with `limits.uvicorn_options()`. `otlp`: the trace
    intake answering `POST /v1/traces` (None: 404 there)."""
    app = FastAPI(title="driftline receiver", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = ReceiverMetrics(receiver.stats)
    max_body_bytes = limits.max_body_bytes

    def refused(request: Request) -> JSONResponse | None:
        if token is not None:
            header = request.headers.get("authorization", "")
            given = header[7:] if header.startswith("Bearer ") else request.query_params.get("token", "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                return JSONResponse({"detail": "missing or wrong token (settings.receiver_token, env "
                                               "DRIFTLINE_RECEIVER_TOKEN): send Authorization: Bearer TOKEN "
                                               "or ?token=TOKEN"}, status_code=401)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            return _too_large(max_body_bytes)
        return None

    async def body_of(request: Request) -> bytes | None:
        chunks, size = [], 0
        async for chunk in request.stream():  # bounded even when no Content-Length is sent
            size += len(chunk)
            if size > max_body_bytes:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def body_or_refusal(request: Request) -> bytes | JSONResponse:
        try:
            body = await body_of(request)
        except BodyRefused as exc:  # the guard's budget or deadline: the guard answers, this counts it
            return JSONResponse({"detail": exc.refusal.detail}, status_code=exc.refusal.status)
        return _too_large(max_body_bytes) if body is None else body

    async def handle(request: Request, endpoint: str, work: Callable[[bytes], Outcome],
                     usable: Callable[[Outcome], bool]) -> JSONResponse:
        """Token and size checks, the bounded body, the work off the event loop, the answer; timed and counted."""
        started = time.perf_counter()
        answer = refused(request)
        if answer is None:
            body = await body_or_refusal(request)
            if isinstance(body, JSONResponse):
                answer = body
            else:
                try:  # the service takes a lock and may read the store: off the event loop
                    outcome = await run_in_threadpool(work, body)
                except Busy as exc:
                    answer = JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})
                except TooLarge as exc:  # could never be taken whole: retrying would not help
                    answer = JSONResponse({"detail": str(exc)}, status_code=413)
                else:
                    answer = JSONResponse(outcome.as_dict(), status_code=200 if usable(outcome) else 400)
        metrics.observe(endpoint, answer.status_code, time.perf_counter() - started)
        return answer

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok", **receiver.stats()}

    @app.get("/metrics")
    def metrics_text() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/events")
    async def events(request: Request) -> JSONResponse:
        return await handle(request, ENDPOINT_EVENTS, receiver.accept_lines,
                            lambda outcome: outcome.events > 0 or not outcome.dead_letters)

    @app.post(OTLP_PATH)
    async def traces(request: Request) -> Response:
        started = time.perf_counter()
        answer: Response | None = refused(request)
        if answer is None and otlp is None:
            answer = JSONResponse({"detail": "OTLP traces are off in this receiver"}, status_code=404)
        if answer is None:
            body = await body_or_refusal(request)
            if isinstance(body, JSONResponse):
                answer = body
            else:
                protobuf = media_type(request.headers.get("content-type")) == PROTOBUF
                encoding = request.headers.get("content-encoding", "")
                try:
                    result: OtlpOutcome = await run_in_threadpool(otlp.accept_http, body,  # type: ignore[union-attr]
                                                                  PROTOBUF if protobuf else "json", encoding)
                except OtlpError as exc:
                    answer = JSONResponse({"detail": str(exc)}, status_code=400)
                except Busy as exc:
                    answer = JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})
                except TooLarge as exc:
                    answer = JSONResponse({"detail": str(exc)}, status_code=413)
                else:
                    message = export_response(result)
                    answer = (Response(message.SerializeToString(), media_type=PROTOBUF) if protobuf
                              else JSONResponse(_partial_success_json(result)))
        metrics.observe(ENDPOINT_OTLP, answer.status_code, time.perf_counter() - started)
        return answer

    @app.post("/")
    @app.post("/{path:path}")
    async def cloudevents(request: Request, path: str = "") -> JSONResponse:
        if path in _RESERVED:
            return JSONResponse({"detail": "not found"}, status_code=404)
        hints = {name: request.query_params.get(name, "") for name in HINTS}
        hints["version"] = hints["version"] or request.headers.get("x-driftline-version", "")
        headers = dict(request.headers)
        return await handle(request, ENDPOINT_CLOUDEVENTS,
                            lambda body: receiver.accept_cloudevents(headers, body, hints),
                            lambda outcome: (outcome.events > 0 or outcome.waiting > 0 or outcome.duplicates > 0
                                             or not outcome.dead_letters))

    def count_refused(path: str, status: int) -> None:
        if path not in ("/healthz", "/metrics"):
            endpoint = {"/events": ENDPOINT_EVENTS, OTLP_PATH: ENDPOINT_OTLP}.get(path, ENDPOINT_CLOUDEVENTS)
            metrics.observe(endpoint, status, 0.0)

    rules = IngressRules("receiver", allowed_hosts, HOSTS_SETTING, limits,
                         lambda path: {"/events": JSON_LINES_BODY, OTLP_PATH: OTLP_BODY}.get(path, CLOUDEVENTS_BODY))
    return IngressGuard(app, rules, count_refused)


def _partial_success_json(result: OtlpOutcome) -> dict:
    """OTLP/JSON's ExportTraceServiceResponse, with driftline's own counts beside it."""
    body: dict = {"events": result.outcome.events, "dead_lettered": result.outcome.dead_lettered,
                  "errors": result.outcome.dead_letters}
    if result.rejected or result.message():
        body["partialSuccess"] = {"rejectedSpans": str(result.rejected), "errorMessage": result.message()}
    return body


def _too_large(bound: int) -> JSONResponse:
    return JSONResponse({"detail": f"the body is larger than {bound} bytes (receiver max body)"}, status_code=413)
