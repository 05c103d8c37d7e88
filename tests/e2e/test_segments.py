"""`driftline up --scenario segment_shift`: a drift confined to one region fires as a segment alert there.

The scenario configures `[segments] columns = ["region"]` for its run; the whole population's
dataset-level verdict never moves (the north is a fifth of the traffic), the north's features do.
"""
from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from driftline.store.db import session_scope
from driftline.store.models import Alert, DetectorResult
from driftline.vocabulary import DATA_DRIFT, DATASET_DRIFT

pytestmark = pytest.mark.timeout(600)


def test_segment_shift_fires_in_region_north_and_not_for_the_whole_population(home, sink, run_up):
    # 8 s windows at 100 requests/s: about 170 applicants from the north a window, over DRIFT_MIN_ROWS (4 s
    # windows give the north fewer than 100 on two cores, where the replay reaches ~90 requests/s).
    run = run_up(home, "segment_shift", duration=70, rate=100.0, window_seconds=8, sink=sink)
    assert run.returncode == 0, run.output[-4000:]
    assert "Traceback" not in run.output, run.output[-4000:]
    with session_scope(run.db_url) as s:
        fired = [(a.detector, a.feature, a.segment) for a in s.scalars(select(Alert).where(
            Alert.fired_at.is_not(None), Alert.detector.in_((DATA_DRIFT, DATASET_DRIFT))))]
        north_results = s.scalar(select(DetectorResult.id).where(DetectorResult.segment == "region=north").limit(1))
    assert north_results is not None, "no result stored for the segment region=north"
    assert any(segment == "region=north" for _, _, segment in fired), fired
    # The whole population's dataset-level verdict stays quiet (single features, age or income, may drift
    # there too on windows this small: the north's shift is diluted to about 0.1 standard deviation).
    assert not [a for a in fired if a[2] == "" and a[0] == DATASET_DRIFT], fired
    # the segment's Slack notification names it
    assert any("region=north" in json.dumps(body) for body in sink.bodies("/slack")), sink.bodies("/slack")[:3]
