"""Hellinger distance: Evidently's definition, from raw arrays and from window states, reported and judged by the
service and by `detect` (in memory, streamed, the command line) only where a threshold turns it on."""
from __future__ import annotations

import json
from math import sqrt

import numpy as np
import pandas as pd
import pytest

from driftline.baseline import compute_baseline
from driftline.detectors.batch.engine import Judging, Windowing, detect
from driftline.detectors.batch.streamed import Budget, detect_streamed
from driftline.detectors.families.drift import drift_results
from driftline.detectors.stats.hellinger import Hellinger
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.vocabulary import DATA_DRIFT
from driftline.window_state import EventBatch, WindowState
from tests.support.cli import run_detect

KEY = Hellinger.key
ON = DriftThresholds.from_mapping({KEY: 0.1, "features": {"region": {KEY: 0.05}}})


def frame(rng: np.random.Generator, n: int, shift: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"income": rng.normal(50 + 10 * shift, 10, n), "rooms": rng.integers(1, 6, n).astype(float),
                         "region": rng.choice(["north", "south", "east"], n, p=[0.5 - 0.2 * shift, 0.3, 0.2 + 0.2 * shift])})


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(11)
    return frame(rng, 1_500), frame(rng, 900, shift=0.6)


def evidently_hellinger(reference: pd.Series, current: pd.Series, categorical: bool) -> float:
    """Evidently 0.7's `_hellinger_distance` (evidently/legacy/calculations/stattests/hellinger_distance.py)."""
    keys = sorted(set(reference.unique()) | set(current.unique()))
    if categorical:
        p, q = reference.value_counts(normalize=True), current.value_counts(normalize=True)
        coefficient = sum(sqrt(float(p.get(k, 0.0)) * float(q.get(k, 0.0))) for k in keys)
    else:
        bins = np.histogram_bin_edges(keys, bins="sturges")
        h1 = np.histogram(reference.to_numpy(), bins=bins, density=True)[0]
        h2 = np.histogram(current.to_numpy(), bins=bins, density=True)[0]
        width = (bins.max() - bins.min()) / (len(bins) - 1)
        coefficient = sum(sqrt(float(a) * float(b)) * width for a, b in zip(h1, h2))
    return sqrt(1.0 - float(np.clip(coefficient, 0.0, 1.0)))


def test_the_value_is_evidentlys_hellinger_distance(tables):
    reference, current = tables
    statistic = Hellinger()
    for column, categorical in (("income", False), ("region", True)):
        ours = statistic.from_samples(reference[column], current[column], "categorical" if categorical else "numeric")
        assert ours == pytest.approx(evidently_hellinger(reference[column], current[column], categorical), abs=1e-12)
        assert 0.0 < ours < 1.0
    assert statistic.from_samples(reference["income"], reference["income"], "numeric") == 0.0
    assert statistic.value([3, 0], [0, 7]) == pytest.approx(1.0)  # disjoint
    assert statistic.value([0, 0], [1, 2]) == 0.0  # an empty side: no distance


def test_the_window_state_gives_the_raw_values_distance(tables):
    reference, current = tables
    baseline = compute_baseline(reference)
    events = [{"event_id": f"e{i}", "ts_ms": i, "features": row, "prediction": 0.5, "latency_ms": {"total": 1.0}}
              for i, row in enumerate(current.to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    statistic = Hellinger()
    for column, kind in (("income", "numeric"), ("rooms", "numeric"), ("region", "categorical")):
        binned = statistic.from_window(baseline.profiles[column], state.features[column])
        assert binned == pytest.approx(statistic.from_samples(reference[column], current[column], kind), abs=0.01)
    # the service's data_drift results carry it where it is on, and it decides with the other floors off
    own = DriftThresholds.from_mapping({"psi": 9.0, "wasserstein": 9.0, "jensenshannon": 9.0, KEY: 0.05})
    results = {r.feature: r for r in drift_results(baseline, state, own, prediction=False) if r.detector == DATA_DRIFT}
    income = results["income"].details
    assert income["tests"][KEY]["threshold"] == 0.05 and income["tests"][KEY]["drift"] is True
    assert results["income"].breached and f"{KEY} " in income["reason"]
    quiet = {r.feature: r for r in drift_results(baseline, state, own.replace(**{KEY: None}), prediction=False)
             if r.detector == DATA_DRIFT}
    assert not quiet["income"].breached and KEY not in quiet["income"].details["tests"]


def test_detect_reports_it_only_where_a_threshold_turns_it_on(tables):
    reference, current = tables
    off = detect(reference, current, judging=Judging(multivariate=False))
    assert all(KEY not in f["tests"] for f in off["windows"][0]["features"])
    on = detect(reference, current, judging=Judging(thresholds=ON, multivariate=False))
    tests = {f["name"]: f["tests"] for f in on["windows"][0]["features"]}
    assert {name: t[KEY]["threshold"] for name, t in tests.items()} == {"income": 0.1, "rooms": 0.1, "region": 0.05}
    assert tests["region"][KEY]["noise"] > 0  # its sampling level over the categories, as Jensen-Shannon's
    # everything else is what it was without it
    for before, after in zip(off["windows"][0]["features"], on["windows"][0]["features"]):
        assert {k: v for k, v in after["tests"].items() if k != KEY} == before["tests"]
    one = detect(reference, current,
                 judging=Judging(thresholds=DriftThresholds.from_mapping({"features": {"income": {KEY: 0.1}}}),
                                 multivariate=False))
    assert [f["name"] for f in one["windows"][0]["features"] if KEY in f["tests"]] == ["income"]
    # reference-derived floors are PSI's, Wasserstein's and Jensen-Shannon's: Hellinger keeps its configured one
    derived = detect(reference, current.iloc[:150],
                     judging=Judging(multivariate=False,
                                     thresholds=DriftThresholds.from_mapping({"thresholds": "reference", KEY: 0.1})))
    [income] = [f for f in derived["windows"][0]["features"] if f["name"] == "income"]
    assert income["threshold_source"] == "reference" and income["tests"]["psi"]["threshold"] != 0.2
    assert income["tests"][KEY]["threshold"] == 0.1


def test_streamed_detect_gives_the_in_memory_values(tables):
    reference, current = tables

    def chunks(table: pd.DataFrame, rows: int):
        return lambda: (table.iloc[i:i + rows] for i in range(0, len(table), rows))

    in_memory = detect(reference, current, windowing=Windowing(chunk_size=450),
                       judging=Judging(thresholds=ON, multivariate=False))
    streamed = detect_streamed(chunks(reference, 400), chunks(current, 300), windowing=Windowing(chunk_size=450),
                               judging=Judging(thresholds=ON, multivariate=False))
    assert json.dumps(streamed, sort_keys=True) == json.dumps(in_memory, sort_keys=True)
    folded = detect_streamed(chunks(reference, 400), chunks(current, 300), windowing=Windowing(chunk_size=450),
                             judging=Judging(thresholds=ON, multivariate=False),
                             budget=Budget(exact_values=50))  # past 50 values: from the fine bins
    for exact, binned in zip(in_memory["windows"], folded["windows"]):
        for a, b in zip(exact["features"], binned["features"]):
            assert b["tests"][KEY]["value"] == pytest.approx(a["tests"][KEY]["value"], abs=0.02)
            assert b["tests"][KEY].get("approximate", False) is (a["name"] == "income")


def test_the_command_line_takes_it_from_the_drift_section(tables, tmp_path, capfd):
    reference, current = tables
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    (tmp_path / "drift.toml").write_text(f"[drift]\n{KEY} = 0.1\n[drift.features.region]\n{KEY} = 0.05\n")
    code, out, err = run_detect(["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
                                 "--config", str(tmp_path / "drift.toml")], capfd)
    assert code == 0, err
    tests = {f["name"]: f["tests"][KEY] for f in json.loads(out)["windows"][0]["features"]}
    assert tests["region"]["threshold"] == 0.05 and tests["income"]["threshold"] == 0.1
    assert tests["income"]["drift"] is True
    (tmp_path / "bad.toml").write_text(f"[drift]\n{KEY} = -1\n")
    code, _, err = run_detect(["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
                               "--config", str(tmp_path / "bad.toml")], capfd)
    assert code != 0 and f"[drift] {KEY}" in err
