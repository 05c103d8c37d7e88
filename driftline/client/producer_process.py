"""The producer child process's loop: batches in from the parent's pipe, delivery counts back out."""
from __future__ import annotations

import logging
import os
import pickle
from multiprocessing.connection import Connection

from driftline.client.librdkafka_sender import LibrdkafkaSender
from driftline.client.tuning import DRAIN_INTERVAL_S, FLUSH_TIMEOUT_S, PRODUCER_PROCESS_NICENESS

# what the parent writes instead of a batch to ask the child to close
CLOSE_CHILD = b"close"


def run_producer_process(fd: int) -> None:
    """The child of `ProcessEventSender`: batches in from the pipe on `fd`, into a `LibrdkafkaSender`; counts out."""
    conn = Connection(fd)
    os.nice(PRODUCER_PROCESS_NICENESS)
    options = conn.recv()
    logging.basicConfig(level=options.pop("log_level"),
                        format="%(asctime)s %(levelname)s driftline-event-producer %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(options.pop("kafka_log_level"))
    sender = LibrdkafkaSender(**options)
    reported: tuple[int, int, bool] | None = None
    close_timeout_s = FLUSH_TIMEOUT_S  # the parent died: deliver what we hold, for a bounded time
    try:
        while True:
            if conn.poll(DRAIN_INTERVAL_S):
                message = conn.recv_bytes()
                if message == CLOSE_CHILD:
                    close_timeout_s = 0.0  # the parent has waited for delivery already
                    break
                sender.add(pickle.loads(message))
            sender.pump()
            report = (sender.sent, sender.failed, sender.connected)
            if report != reported:
                conn.send(report)
                reported = report
    except (EOFError, OSError):
        pass
    sender.close(close_timeout_s)
    try:
        conn.send((sender.sent, sender.failed, False))
        conn.close()
    except OSError:
        pass
