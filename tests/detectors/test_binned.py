"""Statistics from summaries agree with the raw-array statistics (KS and Wasserstein within 2e-3)."""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest

from driftline.detectors.stats.registry import STATISTICS
from driftline.detectors.stats import binned, two_sample
from driftline.baseline import compute_baseline
from driftline.window_state import FeatureWindow

GENERATORS = {
    "normal": lambda rng, n, shift: rng.normal(shift, 1.0, n),
    "lognormal": lambda rng, n, shift: rng.lognormal(shift, 1.0, n),
    "uniform": lambda rng, n, shift: rng.uniform(shift, 1.0 + shift, n),
    "poisson": lambda rng, n, shift: rng.poisson(3.0 + 5 * shift, n).astype(float),
    "bimodal": lambda rng, n, shift: np.where(rng.random(n) < 0.3, rng.normal(-3, 0.5, n), rng.normal(2 + shift, 1, n)),
    "student_t": lambda rng, n, shift: rng.standard_t(2, n) + shift,
}


def summarise(reference, current):
    profile = compute_baseline(pd.DataFrame({"x": reference})).profiles["x"]
    window = FeatureWindow(kind="numeric")
    for chunk in np.array_split(current, 3):  # several batches, as a collector adds them
        window.add(chunk, {"number": chunk.size}, 0, profile)
    return profile, window


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("shift", [0.0, 0.05, 0.3])
def test_ks_and_wasserstein_from_bins_match_raw_arrays(name, shift):
    rng = np.random.default_rng(zlib.crc32(f"{name}:{shift}".encode()))
    for n, m in ((20_000, 3_000), (5_000, 500)):
        reference = GENERATORS[name](rng, n, 0.0)
        current = GENERATORS[name](rng, m, shift)
        profile, window = summarise(reference, current)
        statistic, p_value = binned.ks_binned(profile, window)
        exact_statistic, _ = two_sample.ks_2samp(reference, current)
        assert abs(statistic - exact_statistic) <= 2e-3
        assert p_value == pytest.approx(two_sample.ks_p_value(statistic, n, m))
        w = binned.wasserstein_normed_binned(profile, window)
        assert abs(w - two_sample.wasserstein_normed(reference, current)) <= 2e-3
        # Jensen-Shannon is re-binned from fine bins: close, not exact (documented).
        assert abs(binned.jensenshannon_binned(profile, window) - two_sample.jensenshannon_numeric(reference, current)) < 0.03


def test_psi_from_fine_bins_equals_psi_on_the_decile_bins():
    rng = np.random.default_rng(3)
    for name in GENERATORS:
        reference = GENERATORS[name](rng, 10_000, 0.0)
        current = GENERATORS[name](rng, 2_000, 0.2)
        profile, window = summarise(reference, current)
        edges = two_sample.decile_edges(reference)
        expected = two_sample.psi(two_sample.bin_counts(reference, edges), two_sample.bin_counts(current, edges))
        assert binned.psi_binned(profile, window) == pytest.approx(expected, abs=1e-12)
        if name != "poisson":  # continuous values never sit on an edge
            assert binned.psi_binned(profile, window) == pytest.approx(two_sample.psi_numeric(reference, current), abs=1e-12)


def test_wasserstein_is_exact_for_values_far_out_of_range():
    rng = np.random.default_rng(5)
    reference = rng.normal(0, 1, 5_000)
    current = np.concatenate((rng.normal(0, 1, 900), rng.uniform(50, 80, 100), rng.uniform(-90, -40, 20)))
    profile, window = summarise(reference, current)
    exact = two_sample.wasserstein_normed(reference, current)
    assert exact > 5
    # The far-out mass contributes exactly; only sign changes of F - G inside a bin cost anything.
    assert abs(binned.wasserstein_normed_binned(profile, window) - exact) < 1e-4


def test_empty_window_gives_no_evidence():
    profile, _ = summarise(np.arange(100.0), np.arange(3.0))
    empty = FeatureWindow(kind="numeric")
    assert binned.ks_binned(profile, empty) == (0.0, 1.0)
    assert binned.wasserstein_binned(profile, empty) == 0.0
    assert binned.psi_binned(profile, empty) == 0.0
    assert binned.jensenshannon_binned(profile, empty) == 0.0


def test_constant_reference():
    reference = np.full(1000, 3.0)
    current = np.concatenate((np.full(90, 3.0), np.full(10, 4.0)))
    profile, window = summarise(reference, current)
    assert binned.ks_binned(profile, window)[0] == pytest.approx(two_sample.ks_2samp(reference, current)[0])
    assert binned.wasserstein_normed_binned(profile, window) == pytest.approx(
        two_sample.wasserstein_normed(reference, current))


def test_categorical_tests_equal_the_raw_array_versions():
    rng = np.random.default_rng(9)
    reference = rng.choice(["a", "b", "c", "d"], 5_000, p=[0.4, 0.3, 0.2, 0.1]).astype(object)
    current = rng.choice(["a", "b", "c", "d", "new"], 800, p=[0.25, 0.3, 0.2, 0.15, 0.1]).astype(object)
    profile = compute_baseline(pd.DataFrame({"c": reference})).profiles["c"]
    window = FeatureWindow(kind="categorical")
    window.add(current, {"string": current.size}, 0, profile)
    tests = binned.categorical_tests(profile, window)
    assert tests["chi2"]["statistic"] == pytest.approx(two_sample.chi2_categorical(reference, current)[0])
    assert tests["chi2"]["p_value"] == pytest.approx(two_sample.chi2_categorical(reference, current)[1], abs=1e-300)
    assert tests["psi"]["value"] == pytest.approx(two_sample.psi_categorical(reference, current))
    assert tests["jensenshannon"]["value"] == pytest.approx(two_sample.jensenshannon_categorical(reference, current))
    assert tests["linf"]["value"] == pytest.approx(two_sample.linf_categorical(reference, current))
    categories, ref_counts, cur_counts = binned.category_counts(profile, window)
    assert categories[-1] == "new" and ref_counts[-1] == 0 and cur_counts.sum() == 800


def test_numeric_tests_have_the_decision_rule_shape():
    rng = np.random.default_rng(1)
    profile, window = summarise(rng.normal(0, 1, 4000), rng.normal(0.5, 1, 1000))
    tests = binned.numeric_tests(profile, window)
    # every registered numeric statistic (those that are off are dropped when the window is judged)
    assert set(tests) == {key for key, s in STATISTICS.items() if "numeric" in s.kinds}
    assert {"psi", "ks", "wasserstein", "jensenshannon"} <= set(tests)
    assert tests["ks"]["p_value"] < 1e-10 and tests["wasserstein"]["value"] == pytest.approx(0.5, abs=0.1)
