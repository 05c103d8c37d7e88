"""The raw-array statistics against scipy (random data) and Evidently 0.7 (same method, same value)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from scipy.spatial import distance

from driftline.detectors.stats import two_sample
from driftline import defaults

GENERATORS = {
    "normal": lambda rng, n, shift: rng.normal(shift, 1.0, n),
    "lognormal": lambda rng, n, shift: rng.lognormal(shift, 0.8, n),
    "ties": lambda rng, n, shift: np.round(rng.normal(shift, 1.0, n), 1),
    "integers": lambda rng, n, shift: rng.poisson(3 + shift, n).astype(float),
}


def _pair(name: str, n_ref: int, n_cur: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return GENERATORS[name](rng, n_ref, 0.0), GENERATORS[name](rng, n_cur, shift)


# --- against scipy ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("n_ref,n_cur,shift", [(300, 200, 0.0), (800, 1500, 0.2), (4000, 3000, 0.05)])
def test_ks_matches_scipy_exactly_up_to_ten_thousand_rows(name, n_ref, n_cur, shift):
    reference, current = _pair(name, n_ref, n_cur, shift, seed=n_ref + n_cur)
    expected = scipy_stats.ks_2samp(reference, current)
    statistic, p_value = two_sample.ks_2samp(reference, current)
    assert statistic == pytest.approx(expected.statistic, abs=1e-12)
    assert p_value == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_ks_large_samples_same_statistic_and_close_p_value(name):
    # Shifts chosen so that p-values span "clearly not" to "clearly significant".
    for shift, seed in [(0.0, 1), (0.02, 2), (0.04, 3)]:
        reference, current = _pair(name, 30_000, 20_000, shift, seed)
        expected = scipy_stats.ks_2samp(reference, current)
        statistic, p_value = two_sample.ks_2samp(reference, current)
        assert statistic == pytest.approx(expected.statistic, abs=1e-12)
        if expected.pvalue > 1e-8:
            assert p_value == pytest.approx(expected.pvalue, rel=1e-2)
        else:
            assert p_value < 1e-7


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("n_ref,n_cur", [(50, 70), (2000, 500), (20_000, 15_000)])
def test_wasserstein_normed_matches_scipy(name, n_ref, n_cur):
    reference, current = _pair(name, n_ref, n_cur, 0.3, seed=n_ref)
    expected = scipy_stats.wasserstein_distance(reference, current) / max(np.std(reference), 0.001)
    assert two_sample.wasserstein_normed(reference, current) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_chi2_matches_scipy_chisquare_with_reference_frequencies():
    rng = np.random.default_rng(7)
    for k in (2, 5, 12):
        reference_counts = rng.integers(20, 400, k)
        current_counts = rng.integers(20, 400, k)
        expected_counts = current_counts.sum() * reference_counts / reference_counts.sum()
        expected = scipy_stats.chisquare(current_counts, expected_counts)
        statistic, p_value = two_sample.chi2(reference_counts, current_counts)
        assert statistic == pytest.approx(expected.statistic, rel=1e-12)
        assert p_value == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-300)


def test_jensenshannon_matches_scipy_on_counts_and_numeric_bins():
    rng = np.random.default_rng(11)
    p, q = rng.integers(0, 50, 9), rng.integers(1, 50, 9)
    assert two_sample.jensenshannon(p, q) == pytest.approx(distance.jensenshannon(p / p.sum(), q / q.sum()), rel=1e-12)
    reference, current = rng.normal(0, 1, 3000), rng.normal(0.3, 1.2, 2000)
    edges = np.histogram_bin_edges(np.concatenate([reference, current]), bins="sturges")
    expected = distance.jensenshannon(np.histogram(reference, edges)[0] / reference.size,
                                      np.histogram(current, edges)[0] / current.size)
    assert two_sample.jensenshannon_numeric(reference, current) == pytest.approx(expected, rel=1e-12)


def test_psi_is_the_symmetrised_kl_sum_on_its_bins():
    reference, current = np.array([90.0, 10.0]), np.array([50.0, 50.0])
    r, c = reference / reference.sum(), current / current.sum()
    assert two_sample.psi(reference, current) == pytest.approx(float(np.sum((r - c) * np.log(r / c))), rel=1e-12)
    assert two_sample.psi(reference, reference * 3) == 0.0


def test_psi_numeric_uses_ten_reference_decile_bins():
    rng = np.random.default_rng(3)
    reference = rng.normal(size=10_000)
    edges = two_sample.decile_edges(reference)
    assert edges.size == 9
    counts = two_sample.bin_counts(reference, edges)
    assert counts.size == 10 and counts.sum() == reference.size
    assert np.all(np.abs(counts - 1000) <= 1)
    current = rng.normal(0.5, 1, 5000)
    shares_ref = counts / counts.sum()
    shares_cur = two_sample.bin_counts(current, edges) / current.size
    expected = float(np.sum((shares_ref - shares_cur) * np.log(shares_ref / shares_cur)))
    assert two_sample.psi_numeric(reference, current) == pytest.approx(expected, rel=1e-12)
    assert two_sample.psi_numeric(reference, rng.normal(size=5000)) < two_sample.psi_numeric(reference, current)


def test_linf_is_the_largest_share_change():
    assert two_sample.linf([50, 30, 20], [40, 30, 30]) == pytest.approx(0.1)
    assert two_sample.linf_categorical(list("aaab"), list("abbb")) == pytest.approx(0.5)


def test_missing_rate_test_matches_the_two_by_two_chi_square():
    difference, p_value = two_sample.missing_rate_test(30, 1000, 60, 1000)
    table = np.array([[30, 970], [60, 940]])
    expected = scipy_stats.chi2_contingency(table, correction=False).pvalue
    assert difference == pytest.approx(0.03)
    assert p_value == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n_ref,n_cur", [(700, 400), (30_000, 120_000)])
def test_fused_numeric_statistics_equal_the_separate_functions(n_ref, n_cur):
    reference, current = _pair("ties", n_ref, n_cur, 0.1, seed=5)
    fused = two_sample.numeric_statistics_sorted(np.sort(reference), np.sort(current))
    ks_statistic, ks_p = two_sample.ks_2samp(reference, current)
    assert fused["ks_statistic"] == ks_statistic and fused["ks_p_value"] == ks_p
    assert fused["psi"] == two_sample.psi_numeric(reference, current)
    assert fused["wasserstein"] == pytest.approx(two_sample.wasserstein_normed(reference, current), rel=1e-12)
    assert fused["jensenshannon"] == two_sample.jensenshannon_numeric(reference, current)


# --- awkward inputs: defined results, never a crash or NaN ---------------------------

ALL_NUMERIC = [two_sample.psi_numeric, two_sample.wasserstein_normed, two_sample.jensenshannon_numeric,
               lambda r, c: two_sample.ks_2samp(r, c)[1], lambda r, c: two_sample.ks_2samp(r, c)[0]]


@pytest.mark.parametrize("function", ALL_NUMERIC)
def test_empty_and_all_nan_samples_give_no_evidence(function):
    data = np.random.default_rng(0).normal(size=100)
    for reference, current in [([], data), (data, []), ([np.nan] * 5, data), (data, [np.nan, np.inf])]:
        value = function(reference, current)
        assert math.isfinite(value)
        assert value in (0.0, 1.0)


@pytest.mark.parametrize("function", ALL_NUMERIC)
def test_nan_and_inf_are_dropped_not_propagated(function):
    rng = np.random.default_rng(1)
    reference, current = rng.normal(size=500), rng.normal(0.2, 1, 400)
    dirty = np.concatenate([current, [np.nan, np.inf, -np.inf]])
    assert function(reference, dirty) == function(reference, current)


def test_constant_reference_has_defined_finite_results():
    reference = np.full(200, 5.0)
    same, moved = np.full(100, 5.0), np.full(100, 5.01)
    assert two_sample.wasserstein_normed(reference, same) == 0.0
    # Divided by the documented 0.001 floor: 0.01 / 0.001.
    assert two_sample.wasserstein_normed(reference, moved) == pytest.approx(0.01 / defaults.WASSERSTEIN_MIN_STD)
    assert two_sample.psi_numeric(reference, same) == 0.0
    # Two bins, below the constant and at-or-above it: PSI sees a move down, not
    # up (documented); KS and Wasserstein see both.
    assert two_sample.psi_numeric(reference, np.full(100, 4.99)) > 1.0
    assert two_sample.psi_numeric(reference, moved) == 0.0
    assert two_sample.ks_2samp(reference, moved) == (1.0, pytest.approx(0.0, abs=1e-12))
    for value in (two_sample.jensenshannon_numeric(reference, moved), *two_sample.ks_2samp(reference, moved)):
        assert math.isfinite(value)


def test_unseen_categories_raise_the_statistics_but_stay_finite():
    reference = ["a"] * 500 + ["b"] * 500
    current = ["a"] * 450 + ["b"] * 450 + ["c"] * 100
    statistic, p_value = two_sample.chi2_categorical(reference, current)
    assert math.isfinite(statistic) and statistic > 1000
    assert p_value < 1e-12
    assert math.isfinite(two_sample.psi_categorical(reference, current)) and two_sample.psi_categorical(reference, current) > 0.5
    assert two_sample.linf_categorical(reference, current) == pytest.approx(0.1)


def test_single_category_and_nulls_in_categories():
    assert two_sample.chi2_categorical(["a"] * 10, ["a"] * 5) == (0.0, 1.0)
    with_nulls = ["a", None, "b", np.nan, "a"]
    assert two_sample.psi_categorical(with_nulls, ["a", "b", "a"]) == 0.0
    categories, reference_counts, current_counts = two_sample.category_counts(with_nulls, ["c"])
    assert list(categories) == ["a", "b", "c"]
    assert reference_counts.tolist() == [2, 1, 0] and current_counts.tolist() == [0, 0, 1]


# --- against Evidently 0.7, where the methods coincide ------------------------------

@pytest.fixture(scope="module")
def evidently_values():
    """Evidently's ValueDrift values per column from one small DataDriftPreset run."""
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    rng = np.random.default_rng(2024)
    n_ref, n_cur = 1500, 900
    numeric_ref, numeric_cur = rng.normal(10, 3, n_ref), rng.normal(10.6, 3.5, n_cur)
    categories = np.array(["north", "south", "east", "west", "centre"])
    cat_ref = rng.choice(categories, n_ref, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    cat_cur = rng.choice(categories, n_cur, p=[0.3, 0.3, 0.2, 0.15, 0.05])
    methods = {"n_wasserstein": "wasserstein", "n_jensenshannon": "jensenshannon", "n_ks": "ks",
               "n_psi": "psi", "c_psi": "psi", "c_jensenshannon": "jensenshannon", "c_chisquare": "chisquare"}
    reference = pd.DataFrame({name: (numeric_ref if name.startswith("n_") else cat_ref) for name in methods})
    current = pd.DataFrame({name: (numeric_cur if name.startswith("n_") else cat_cur) for name in methods})
    # Nulls are dropped by both tools before testing.
    current.loc[current.index[:30], ["n_wasserstein", "c_psi"]] = np.nan
    numeric = [c for c in methods if c.startswith("n_")]
    categorical = [c for c in methods if c.startswith("c_")]
    definition = DataDefinition(numerical_columns=numeric, categorical_columns=categorical)
    snapshot = Report([DataDriftPreset(per_column_method=methods)]).run(
        Dataset.from_pandas(current, data_definition=definition),
        Dataset.from_pandas(reference, data_definition=definition))
    values = {}
    for metric in snapshot.dict()["metrics"]:
        column = metric["config"].get("column")
        if column is not None:
            values[column] = float(metric["value"])
    assert set(values) == set(methods)
    return reference, current, values


def test_wasserstein_equals_evidently(evidently_values):
    reference, current, values = evidently_values
    assert two_sample.wasserstein_normed(reference["n_wasserstein"], current["n_wasserstein"]) == pytest.approx(
        values["n_wasserstein"], abs=1e-6)


def test_numeric_jensenshannon_equals_evidently(evidently_values):
    reference, current, values = evidently_values
    assert two_sample.jensenshannon_numeric(reference["n_jensenshannon"], current["n_jensenshannon"]) == pytest.approx(
        values["n_jensenshannon"], abs=1e-6)


def test_ks_p_value_equals_evidently(evidently_values):
    reference, current, values = evidently_values
    assert two_sample.ks_2samp(reference["n_ks"], current["n_ks"])[1] == pytest.approx(values["n_ks"], abs=1e-6)


def test_psi_on_evidentlys_bins_equals_evidently(evidently_values):
    # Evidently bins numeric PSI by Sturges over both samples (we use reference
    # deciles, the documented bins); on the same bins `psi` gives the same value.
    reference, current, values = evidently_values
    r, c = np.sort(reference["n_psi"].to_numpy()), np.sort(current["n_psi"].to_numpy())
    edges = two_sample.sturges_edges_sorted(r, c)
    assert two_sample.psi(two_sample.histogram_sorted(r, edges), two_sample.histogram_sorted(c, edges)) == pytest.approx(
        values["n_psi"], abs=1e-6)


def test_categorical_psi_js_and_chi_square_equal_evidently(evidently_values):
    reference, current, values = evidently_values
    assert two_sample.psi_categorical(reference["c_psi"], current["c_psi"]) == pytest.approx(values["c_psi"], abs=1e-6)
    assert two_sample.jensenshannon_categorical(reference["c_jensenshannon"], current["c_jensenshannon"]) == \
        pytest.approx(values["c_jensenshannon"], abs=1e-6)
    assert two_sample.chi2_categorical(reference["c_chisquare"], current["c_chisquare"])[1] == pytest.approx(
        values["c_chisquare"], abs=1e-6)


def test_psi_smoothing_of_empty_bins_equals_evidently():
    from evidently.legacy.calculations.stattests.psi import _psi
    from evidently.legacy.core import ColumnType

    rng = np.random.default_rng(9)
    # "d" is unseen in the reference and "a" vanishes from the current sample;
    # the 1-in-20000 share of "e" triggers Evidently's "smallest share / 1e6" branch.
    reference = pd.Series(list(rng.choice(["a", "b", "c"], 19_999)) + ["e"])
    current = pd.Series(list(rng.choice(["b", "c", "d"], 3000)))
    expected, _ = _psi(reference, current, ColumnType.Categorical, 0.1)
    assert two_sample.psi_categorical(reference, current) == pytest.approx(float(expected), rel=1e-9)
