"""The replay's schedule on a simulated clock: a rollout's candidate preparation pauses it once, without a burst."""
from __future__ import annotations

import asyncio
import time
import types

import httpx
import pytest

from driftline.worker import replay
from driftline.worker.replay import ReplayConfig, ReplayReport, build_traffic
from driftline.worker.scenarios import SCENARIOS

RATE = 10.0
PREPARATION_S = 80.0  # how long the simulated candidate takes to train


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []  # every wait the replay asked for, in order

    def monotonic(self) -> float:
        return self.now


class SlowCandidate:
    """A rollout start that returns once the clock has moved on by the candidate's preparation."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.started_at = clock, None

    async def start(self) -> dict:
        self.started_at = self.clock.now
        self.clock.now += PREPARATION_S
        return {}


@pytest.fixture
def clock(monkeypatch) -> Clock:
    simulated = Clock()
    real_sleep = asyncio.sleep

    async def sleep(seconds: float, result=None):  # noqa: ANN001
        simulated.slept.append(seconds)
        simulated.now += seconds
        return await real_sleep(0, result)

    monkeypatch.setattr(replay, "time", types.SimpleNamespace(monotonic=simulated.monotonic,
                                                              perf_counter=time.perf_counter, time=time.time))
    monkeypatch.setattr(asyncio, "sleep", sleep)
    return simulated


def drive(clock: Clock, warmup_rows: int, scenario_rows: int) -> tuple[ReplayReport, SlowCandidate]:
    """The shadow scenario's schedule against an always-answering worker."""
    scenario = SCENARIOS["shadow"]
    traffic = build_traffic(scenario, warmup_rows, scenario_rows, seed=3)
    config = ReplayConfig(worker_url="http://worker", scenario=scenario.name, rate=RATE, requests=scenario_rows)
    report = ReplayReport(scenario.name)
    candidate = SlowCandidate(clock)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"probability": 0.1}))

    async def main() -> None:
        async with httpx.AsyncClient(transport=transport, base_url=config.worker_url) as client:
            await replay._drive(client, config, scenario, traffic, None, report, candidate)

    asyncio.run(main())
    return report, candidate


def test_the_first_scenario_request_leaves_as_soon_as_the_candidate_is_ready(clock):
    report, candidate = drive(clock, warmup_rows=0, scenario_rows=20)
    assert report.requests == report.ok == 20
    assert candidate.started_at == 1000.0
    # the preparation, then nothing but the gaps between requests: the pause is not slept a second time
    assert clock.slept == pytest.approx([1 / RATE] * 19)
    assert clock.now == pytest.approx(1000.0 + PREPARATION_S + 19 / RATE)


def test_after_a_warm_up_the_schedule_resumes_where_it_paused_without_a_burst(clock):
    report, candidate = drive(clock, warmup_rows=5, scenario_rows=10)
    assert report.requests == report.ok == 15
    assert candidate.started_at == pytest.approx(1000.0 + 4 / RATE)  # once the last warm-up row is sent
    # every request one interval after the one before it, the pause aside: no burst of the requests it delayed
    assert clock.slept == pytest.approx([1 / RATE] * 14)
    assert clock.now == pytest.approx(1000.0 + PREPARATION_S + 14 / RATE)
