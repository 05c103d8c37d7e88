"""kafka-python's read-after-close race on stopping is kept out of the collector's log; other read errors are not."""
from __future__ import annotations

import logging
import socket

import pytest
from kafka.net.transport import KafkaTCPTransport

from driftline.collector.kafka_internals import quiet_closed_socket_reads


class _Net:
    """The two calls a transport makes on its network loop when it closes."""

    def unregister_event(self, sock: socket.socket, events: int) -> None:
        pass

    def cancel(self, task: object) -> None:
        pass


@pytest.fixture
def transport():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield KafkaTCPTransport(_Net(), ours)
    theirs.close()


def _read_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kafka.net.transport" and r.levelno >= logging.ERROR]


def test_a_read_woken_after_close_logs_no_traceback(transport, caplog):
    quiet_closed_socket_reads()
    quiet_closed_socket_reads()  # idempotent
    assert len(logging.getLogger("kafka.net.transport").filters) == 1
    caplog.set_level(logging.INFO, logger="kafka")
    transport.close()  # the caller's thread: the socket is gone
    data, err = transport._sock_recv()  # the network thread, woken for a read a moment before
    assert data == b"" and err is not None  # the library still reports it to itself
    assert _read_errors(caplog) == []


def test_the_race_shows_at_debug(transport, caplog):
    quiet_closed_socket_reads()
    caplog.set_level(logging.DEBUG, logger="kafka")
    transport.close()
    transport._sock_recv()
    assert any(r.exc_info and isinstance(r.exc_info[1], AttributeError) for r in _read_errors(caplog))


def test_a_read_error_on_an_open_transport_is_still_logged(transport, caplog):
    quiet_closed_socket_reads()
    caplog.set_level(logging.INFO, logger="kafka")
    transport._sock.close()  # the socket fails under an open transport: that is worth a traceback
    transport._sock_recv()
    assert len(_read_errors(caplog)) == 1
