"""The bundled data set: seeded, documented, and the scenario knobs do what they say."""
from __future__ import annotations

import numpy as np

from driftline.worker.dataset import (RAW_COLUMNS, Population, RiskModel, data_sha256, default_probability, generate,
                            generate_inputs)


def test_same_seed_same_data_and_hash():
    a_inputs, a_labels = generate(500, seed=5)
    b_inputs, b_labels = generate(500, seed=5)
    c_inputs, c_labels = generate(500, seed=6)
    assert a_inputs.equals(b_inputs) and np.array_equal(a_labels, b_labels)
    assert data_sha256(a_inputs, a_labels) == data_sha256(b_inputs, b_labels)
    assert data_sha256(a_inputs, a_labels) != data_sha256(c_inputs, c_labels)
    assert list(a_inputs.columns) == list(RAW_COLUMNS)


def test_default_rate_and_ranges_match_the_documented_process():
    inputs, labels = generate(20_000, seed=1)
    assert 0.15 < labels.mean() < 0.25  # "about 20 %"
    assert inputs["age"].between(18, 90).all()
    assert inputs["credit_score"].between(300, 850).all()
    assert (inputs["credit_balance"] <= inputs["credit_limit"]).all()
    assert set(inputs["region"]) == {"north", "south", "east", "west", "central"}
    assert not inputs.isna().any().any()


def test_risk_rises_with_debt_and_late_payments():
    inputs = generate_inputs(4_000, seed=2)
    p = default_probability(inputs)
    burdened = inputs.assign(monthly_debt=inputs["annual_income"] / 12 * 0.6, num_late_payments=4)
    assert (default_probability(burdened) > p).mean() > 0.95


def test_population_and_risk_knobs_shift_inputs_and_concept():
    base = generate_inputs(5_000, seed=3)
    shifted = generate_inputs(5_000, seed=3, population=Population(age_mean=30, income_median=35_000))
    assert shifted["age"].mean() < base["age"].mean() - 8
    assert shifted["annual_income"].median() < 0.8 * base["annual_income"].median()
    drifted = default_probability(base, RiskModel(w_south=2.0))
    south = (base["region"] == "south").to_numpy()
    assert (drifted[south] > default_probability(base)[south]).all()
    assert np.allclose(drifted[~south], default_probability(base)[~south])
