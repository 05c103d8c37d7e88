"""`MetricsEndpoint`: a stage's own Prometheus registry served at /metrics on a daemon thread.

prometheus_client's WSGI app behind the ingress guard (driftline/ingress.py): only the loopback names in
`Host` (a DNS-rebinding page would read feature names and scores otherwise), GET and HEAD only, a deadline on
each request's head and a cap on connections. The collector's and the scheduler's metrics are served here.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, make_wsgi_app

from driftline import defaults
from driftline.hosts import parse_allowed_hosts
from driftline.ingress import NO_BODY, IngressRules, Limits, serve_wsgi

# A scrape sends no body: the body deadline only bounds a client that claims one.
METRICS_LIMITS = Limits(max_body_bytes=0, body_timeout_s=defaults.METRICS_HEAD_TIMEOUT_SECONDS,
                        head_timeout_s=defaults.METRICS_HEAD_TIMEOUT_SECONDS,
                        max_connections=defaults.METRICS_MAX_CONNECTIONS)


class MetricsEndpoint:
    """Serves `self.registry` (set by the subclass) until `stop()`; one server per instance."""

    registry: CollectorRegistry
    _server = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start the /metrics HTTP server (a daemon thread); returns the bound port."""
        rules = IngressRules(f"{type(self).__name__} /metrics", parse_allowed_hosts(""), None, METRICS_LIMITS,
                             lambda _path: NO_BODY)
        server = serve_wsgi(make_wsgi_app(self.registry), host, port, rules)
        self._server = server
        return int(server.server_address[1])

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
