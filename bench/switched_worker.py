"""`driftline worker` whose event logging the benchmark switches on and off while it runs.

    python bench/switched_worker.py [driftline worker options]

SIGUSR1 turns logging on, SIGUSR2 off (it starts on when `--events`). `bench/worker.py` runs
this for its "logging on/off" configuration, to compare one process with itself, logging on
and off in alternate rounds, instead of a logging process with another process: two
processes of the same code differ by several % of requests/s (bench/RESULTS.md),
which hides a cost of a few %. Off, the worker serves exactly as `--no-events` does (it
logs nothing); the logger, its thread and its producer child stay, idle. Requests in flight
when the switch turns are logged or not depending on when they finish: the benchmark only
turns it between rounds, with nothing in flight.

This is a benchmark harness, not a way to run the worker: the serving code is the
installed worker's, unchanged; only `Worker.start` and `Worker.stop` are wrapped here.
"""
from __future__ import annotations

import asyncio
import signal
import sys

from driftline.worker import server
from driftline.worker.commands import worker as worker_command

_start, _stop = server.Worker.start, server.Worker.stop


async def _start_switchable(self: server.Worker) -> None:
    await _start(self)
    self._switched_logger = self.logger  # what SIGUSR1 puts back

    def switch(on: bool) -> None:
        self.logger = self._switched_logger if on else None

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, switch, True)
    loop.add_signal_handler(signal.SIGUSR2, switch, False)


async def _stop_with_logger(self: server.Worker) -> None:
    self.logger = self._switched_logger  # closed (and flushed) by the worker's own stop
    await _stop(self)


server.Worker.start = _start_switchable
server.Worker.stop = _stop_with_logger

if __name__ == "__main__":
    worker_command.main(args=sys.argv[1:], prog_name="driftline worker")
