"""`MetricsEndpoint`: a stage's own Prometheus registry served at /metrics on a daemon thread."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


class MetricsEndpoint:
    """Serves `self.registry` (set by the subclass) until `stop()`; one server per instance."""

    registry: CollectorRegistry
    _server = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start the /metrics HTTP server (a daemon thread); returns the bound port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_address[1])

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
