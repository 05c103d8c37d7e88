"""Reference-derived thresholds: a feature's alarm level follows its own natural spread in the reference."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftline import defaults
from driftline.detectors.batch.engine import Judging, Windowing, detect
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.detectors.thresholds.reference import chunk_slices, spread_threshold
from driftline.errors import UserError
from driftline.vocabulary import PSI

REFERENCE = DriftThresholds(threshold_source="reference")


def _reference(rng: np.random.Generator, rows: int, block: int = 500) -> pd.DataFrame:
    """`stable` is one distribution throughout; `wandering`'s level moves from block to block (a season)."""
    levels = np.repeat(rng.normal(0.0, 0.6, rows // block + 1), block)[:rows]
    return pd.DataFrame({"stable": rng.normal(0.0, 1.0, rows), "wandering": levels + rng.normal(0.0, 1.0, rows),
                         "shop": rng.choice(["a", "b", "c"], rows)})


def _features(window):
    return {feature["name"]: feature for feature in window["features"]}


def test_a_naturally_variable_feature_gets_a_higher_derived_threshold():
    rng = np.random.default_rng(1)
    reference = _reference(rng, 20_000)
    current = _reference(rng, 1_000)
    window = detect(reference, current, judging=Judging(thresholds=REFERENCE))["windows"][0]
    features = _features(window)
    assert features["wandering"]["tests"][PSI]["threshold"] > 2 * features["stable"]["tests"][PSI]["threshold"]
    assert features["wandering"]["tests"]["wasserstein"]["threshold"] > features["stable"]["tests"]["wasserstein"]["threshold"]
    assert {f["threshold_source"] for f in features.values()} == {"reference"}
    assert "threshold_note" not in window
    # the significance level is not derived
    assert features["stable"]["tests"]["ks"]["threshold"] == defaults.DRIFT_ALPHA


def test_larger_windows_get_lower_derived_thresholds():
    rng = np.random.default_rng(2)
    reference = _reference(rng, 40_000)
    current = pd.concat([_reference(rng, 400), _reference(rng, 4_000)], ignore_index=True)
    small, large = detect(reference, current.iloc[:4_400], windowing=Windowing(chunk_size=400),
                          judging=Judging(thresholds=REFERENCE))["windows"][:2]
    assert small["rows"] == large["rows"] == 400  # same size: the same thresholds, computed once
    assert _features(small)["stable"]["tests"][PSI]["threshold"] == _features(large)["stable"]["tests"][PSI]["threshold"]
    whole = detect(reference, current.iloc[400:], judging=Judging(thresholds=REFERENCE))["windows"][0]
    assert _features(whole)["stable"]["tests"][PSI]["threshold"] < _features(small)["stable"]["tests"][PSI]["threshold"]


def test_fixed_thresholds_stay_the_default():
    rng = np.random.default_rng(3)
    window = detect(_reference(rng, 5_000), _reference(rng, 1_000))["windows"][0]
    for feature in window["features"]:
        assert feature["threshold_source"] == "fixed"
        assert feature["tests"][PSI]["threshold"] == defaults.PSI_THRESHOLD


def test_a_reference_too_small_for_enough_chunks_falls_back_to_fixed_thresholds():
    rng = np.random.default_rng(4)
    rows = 1_000
    reference = _reference(rng, rows * (defaults.REFERENCE_THRESHOLD_MIN_CHUNKS - 1))
    window = detect(reference, _reference(rng, rows), judging=Judging(thresholds=REFERENCE))["windows"][0]
    assert f"at least {defaults.REFERENCE_THRESHOLD_MIN_CHUNKS} reference chunks" in window["threshold_note"]
    for feature in window["features"]:
        assert feature["threshold_source"] == "fixed"
        assert feature["tests"][PSI]["threshold"] == defaults.PSI_THRESHOLD


def test_a_feature_override_wins_over_the_derived_threshold():
    rng = np.random.default_rng(5)
    thresholds = DriftThresholds.from_mapping({"thresholds": "reference", "features": {"stable": {"psi": 0.7}}})
    window = detect(_reference(rng, 20_000), _reference(rng, 1_000),
                    judging=Judging(thresholds=thresholds))["windows"][0]
    assert _features(window)["stable"]["tests"][PSI]["threshold"] == 0.7
    assert _features(window)["wandering"]["tests"][PSI]["threshold"] != defaults.PSI_THRESHOLD


def test_the_setting_parses_per_model_and_rejects_other_values():
    section = {"models": {"credit": {"thresholds": "reference"}}}
    assert DriftThresholds.from_mapping(section, model="credit").threshold_source == "reference"
    assert DriftThresholds.from_mapping(section, model="other").threshold_source == "fixed"
    assert DriftThresholds.from_mapping({"thresholds": "reference"}).threshold_source == "reference"
    with pytest.raises(UserError, match="thresholds"):
        DriftThresholds.from_mapping({"thresholds": "adaptive"})


def test_chunks_and_spread():
    assert chunk_slices(10, 3) == [slice(0, 3), slice(3, 6), slice(6, 9)]
    spread = chunk_slices(100_000, 10, max_chunks=7)
    assert len(spread) == 7 and spread[0].start == 0 and spread[-1].stop == 100_000
    assert chunk_slices(5, 10) == []
    values = [0.1, 0.2, 0.3, float("nan")]
    assert spread_threshold(values, k=2.0) == pytest.approx(0.2 + 2 * 0.1)
    assert np.isnan(spread_threshold([0.1]))


def test_the_config_file_switches_detect_to_derived_thresholds(tmp_path):
    import json

    from driftline.cli import main

    rng = np.random.default_rng(6)
    _reference(rng, 10_000).to_csv(tmp_path / "ref.csv", index=False)
    _reference(rng, 1_000).to_csv(tmp_path / "cur.csv", index=False)
    (tmp_path / "drift.toml").write_text('[drift.models.credit]\nthresholds = "reference"\n')
    args = ["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
            "--config", str(tmp_path / "drift.toml")]
    for model, source in (("credit", "reference"), ("other", "fixed")):
        main([*args, "--model", model, "--json", str(tmp_path / f"{model}.json")])
        window = json.loads((tmp_path / f"{model}.json").read_text())["windows"][0]
        assert {f["threshold_source"] for f in window["features"]} == {source}
