"""Logging set-up for driftline's commands: one format, and HTTP clients kept quiet.

HTTP client libraries log every request's URL at INFO (httpx: "HTTP Request: POST
https://hooks.slack.com/services/..."), and alert and webhook URLs carry tokens in
their path or query string. Whenever driftline configures logging, those loggers are
held at WARNING, so a secret URL never reaches a log line.
"""
from __future__ import annotations

import logging
import sys

HTTP_CLIENT_LOGGERS = ("httpx", "httpcore", "urllib3", "slack_sdk")


def quiet_http_clients() -> None:
    """HTTP client loggers at WARNING (their INFO and DEBUG lines name URLs)."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def configure_logging(level: int | str = logging.INFO,
                      fmt: str = "%(asctime)s %(levelname)s %(message)s") -> None:
    """Log to stderr at `level`, with the HTTP client loggers quiet."""
    logging.basicConfig(level=level, format=fmt, stream=sys.stderr)
    quiet_http_clients()
