"""The effect-size floor judged above the distance's sampling noise, and the prediction in the features' family."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.stats.noise import wasserstein_noise, wasserstein_noise_scale, wasserstein_noise_scale_binned
from driftline.detectors.stats.two_sample import reference_std, wasserstein_normed
from driftline.detectors.thresholds.decision import DriftThresholds, benjamini_hochberg, decide_feature


@pytest.mark.parametrize("shape", ["normal", "lognormal", "ties"])
def test_the_noise_level_is_the_mean_distance_of_unchanged_windows(shape):
    rng = np.random.default_rng(1)
    draw = {"normal": lambda n: rng.normal(size=n), "lognormal": lambda n: rng.lognormal(0.0, 0.7, n),
            "ties": lambda n: rng.poisson(3.0, n).astype(float)}[shape]
    reference = np.sort(draw(20_000))
    scale = wasserstein_noise_scale(reference, reference_std(reference))
    measured = np.mean([wasserstein_normed(reference, draw(500)) for _ in range(300)])
    assert wasserstein_noise(scale, 500, reference.size) == pytest.approx(measured, rel=0.12)
    counts, edges = np.histogram(reference, bins=200)
    binned = wasserstein_noise_scale_binned(edges[1:-1], counts, float(reference[0]), float(reference[-1]),
                                            reference_std(reference))
    assert binned == pytest.approx(scale, rel=0.05)


def test_a_distance_within_noise_does_not_clear_a_fixed_floor_but_meets_a_derived_one():
    tests = {"ks": {"statistic": 0.08, "p_value": 0.001}, "psi": {"value": 0.03},
             "wasserstein": {"value": 0.11, "noise": 0.045}, "jensenshannon": {"value": 0.07}}
    drift, reason = decide_feature(tests, "numeric", 500, DriftThresholds())
    assert not drift and "wasserstein 0.11 - noise 0.045 < 0.1" in reason
    assert decide_feature(tests, "numeric", 500, DriftThresholds(threshold_source="reference"))[0]
    tests["wasserstein"]["value"] = 0.2
    assert decide_feature(tests, "numeric", 500, DriftThresholds())[0]


def test_the_prediction_is_one_more_hypothesis_of_the_features_family():
    rng = np.random.default_rng(5)

    def frame(n):
        return pd.DataFrame({**{f"x{i}": rng.normal(size=n) for i in range(7)}, "score": rng.beta(0.5, 0.5, n)})

    report = detect(frame(20_000), frame(2_000), columns=ColumnRoles(prediction="score"),
                    windowing=Windowing(chunk_size=500), judging=Judging(multivariate=False), workers=1)
    for window in report["windows"]:
        raw = [f["tests"]["ks"]["p_value"] for f in window["features"]] + [window["prediction"]["tests"]["ks"]["p_value"]]
        _, adjusted = benjamini_hochberg(raw)
        assert window["prediction"]["tests"]["ks"]["p_value_adjusted"] == pytest.approx(adjusted[-1])
        assert [f["tests"]["ks"]["p_value_adjusted"] for f in window["features"]] == pytest.approx(adjusted[:-1])
        assert window["features"][0]["tests"]["wasserstein"]["noise"] == pytest.approx(0.058, abs=0.004)  # normal
