"""Verdict quality: few false alarms on undrifted data, drift found in shifted data of several kinds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftline import defaults
from driftline.detectors.batch.engine import Judging, Windowing, detect
from driftline.vocabulary import DATASET_DRIFT

# The documented false-alarm level: share of (window, feature) verdicts that flag drift when every window is
# drawn from the reference distribution (docs/detectors.md; the alerts' `for` K rests on it).
FEATURE_FALSE_ALARM_RATE_MAX = 0.01
CATEGORIES = np.array(["north", "south", "east", "west", "centre"])
CATEGORY_SHARES = np.array([0.35, 0.25, 0.2, 0.15, 0.05])


def draw(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """The reference distribution: skewed, discrete, tied and categorical features, as real tables have."""
    return pd.DataFrame({
        "income": rng.lognormal(8.5, 0.5, n),
        "age": rng.integers(18, 90, n).astype(float),
        "score": rng.normal(600, 50, n),
        "balance": np.round(rng.exponential(1000, n), -1),
        "ratio": rng.beta(2, 5, n),
        "tenure": rng.poisson(4, n).astype(float),
        "region": rng.choice(CATEGORIES, n, p=CATEGORY_SHARES),
        "plan": rng.choice(np.array(["basic", "plus", "pro"]), n, p=[0.6, 0.3, 0.1]),
    })


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return draw(np.random.default_rng(1), 20_000)


def _false_alarm_rate(reference: pd.DataFrame, window_rows: int, windows: int, seed: int) -> tuple[int, int, int]:
    current = draw(np.random.default_rng(seed), window_rows * windows)
    # Per-feature verdicts only: multivariate drift's false alarms are measured by bench/multivariate.py.
    result = detect(reference, current, windowing=Windowing(chunk_size=window_rows),
                    judging=Judging(multivariate=False))
    verdicts = [f["drift"] for w in result["windows"] for f in w["features"]]
    dataset_alarms = sum(w[DATASET_DRIFT] for w in result["windows"])
    return sum(verdicts), len(verdicts), dataset_alarms


@pytest.mark.parametrize("window_rows,windows", [(150, 120), (1000, 80), (20_000, 12)])
def test_false_alarm_rate_is_under_the_documented_level(reference, window_rows, windows):
    alarms, verdicts, dataset_alarms = _false_alarm_rate(reference, window_rows, windows, seed=window_rows)
    rate = alarms / verdicts
    assert verdicts == windows * reference.shape[1]
    assert rate <= FEATURE_FALSE_ALARM_RATE_MAX, f"{alarms} false alarms in {verdicts} verdicts"
    assert dataset_alarms == 0


def test_windows_below_min_rows_never_alarm(reference):
    rng = np.random.default_rng(5)
    current = draw(rng, 50)
    current["score"] += 500  # blatant, but only 50 rows
    window = detect(reference, current)["windows"][0]
    assert not window["drifted_features"]
    assert all(f["reason"].startswith("insufficient data") for f in window["features"])


def test_huge_window_with_a_trivial_shift_is_significant_but_not_drift(reference):
    rng = np.random.default_rng(6)
    current = draw(rng, 200_000)
    current["score"] += 0.04 * 50  # 0.04 standard deviations
    feature = next(f for f in detect(reference, current)["windows"][0]["features"] if f["name"] == "score")
    assert feature["tests"]["ks"]["p_value_adjusted"] < defaults.DRIFT_ALPHA
    assert feature["drift"] is False and "below floor" in feature["reason"]


def _drifted(reference: pd.DataFrame, current: pd.DataFrame) -> set[str]:
    return set(detect(reference, current)["windows"][0]["drifted_features"])


@pytest.mark.parametrize("rows", [500, 5000])
def test_mean_shift_is_found(reference, rows):
    current = draw(np.random.default_rng(10 + rows), rows)
    current["score"] += 0.5 * 50
    assert _drifted(reference, current) == {"score"}


@pytest.mark.parametrize("rows", [500, 5000])
def test_scale_change_is_found(reference, rows):
    current = draw(np.random.default_rng(20 + rows), rows)
    current["ratio"] = current["ratio"].mean() + (current["ratio"] - current["ratio"].mean()) * 1.8
    assert _drifted(reference, current) == {"ratio"}


@pytest.mark.parametrize("rows", [500, 5000])
def test_category_mix_change_is_found(reference, rows):
    rng = np.random.default_rng(30 + rows)
    current = draw(rng, rows)
    current["region"] = rng.choice(CATEGORIES, rows, p=[0.15, 0.25, 0.2, 0.15, 0.25])
    assert _drifted(reference, current) == {"region"}


def test_unseen_category_is_found(reference):
    rng = np.random.default_rng(40)
    current = draw(rng, 2000)
    current.loc[current.sample(frac=0.15, random_state=1).index, "plan"] = "enterprise"
    assert _drifted(reference, current) == {"plan"}


@pytest.mark.parametrize("column", ["income", "region"])
def test_nulls_are_found(reference, column):
    rng = np.random.default_rng(50)
    current = draw(rng, 3000)
    current.loc[rng.random(len(current)) < 0.2, column] = None
    feature = next(f for f in detect(reference, current)["windows"][0]["features"] if f["name"] == column)
    assert feature["drift"] is True and feature["missing_rate"] == pytest.approx(0.2, abs=0.03)
    assert _drifted(reference, current) == {column}


def test_many_drifted_features_make_dataset_drift(reference):
    rng = np.random.default_rng(60)
    current = draw(rng, 3000)
    for column in ["income", "age", "score", "balance", "ratio"]:
        current[column] = current[column] * 1.5
    window = detect(reference, current)["windows"][0]
    assert len(window["drifted_features"]) >= 4 and window[DATASET_DRIFT] is True
