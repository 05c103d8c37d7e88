"""driftline.worker.feature_transform: the formulas, nulls, unseen categories, the registry round trip, purity."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from driftline.worker.feature_transform import FEATURES, RAW_INPUTS, Z_CLIP, FeatureTransform, transform_row
from driftline.worker.dataset import generate_inputs

ROW = {"age": 40, "annual_income": 60_000.0, "monthly_debt": 1_000.0, "loan_amount": 15_000.0, "loan_term_months": 36,
       "credit_score": 700, "num_credit_lines": 5, "num_late_payments": 1, "employment_years": 4.5,
       "credit_limit": 10_000.0, "credit_balance": 2_500.0, "region": " North ", "employment_type": "SALARIED",
       "home_ownership": "rent"}


def test_apply_computes_the_documented_features():
    features = FeatureTransform().apply([ROW])[0]
    assert list(features) == [name for name, _ in FEATURES]
    assert features["debt_to_income"] == pytest.approx(1_000.0 / 5_000.0)
    assert features["loan_to_income"] == pytest.approx(0.25)
    assert features["credit_utilization"] == pytest.approx(0.25)
    assert features["age"] == 40.0 and isinstance(features["age"], float)
    assert features["region"] == "north" and features["employment_type"] == "salaried"


@pytest.mark.parametrize("changes, feature", [
    ({"annual_income": None}, "debt_to_income"),
    ({"annual_income": 0}, "loan_to_income"),
    ({"annual_income": -5}, "debt_to_income"),
    ({"credit_limit": 0.0}, "credit_utilization"),
    ({"monthly_debt": None}, "debt_to_income"),
])
def test_a_ratio_is_null_when_an_operand_is_missing_or_the_denominator_not_positive(changes, feature):
    assert transform_row({**ROW, **changes})[feature] is None


def test_nulls_and_unseen_categories_stay_visible_in_features_and_encode_safely():
    records = FeatureTransform().apply(generate_inputs(500, seed=1).to_dict("records"))
    transform = FeatureTransform.fit(records)
    dirty = transform_row({**ROW, "age": None, "region": "atlantis", "credit_score": 99_999})
    assert dirty["age"] is None and dirty["region"] == "atlantis" and dirty["credit_score"] == 99_999.0
    encoded = transform.encode([dirty])[0]
    numeric = list(FeatureTransform.numeric_features)
    age_z = (transform.medians["age"] - transform.means["age"]) / transform.stds["age"]
    assert encoded[numeric.index("age")] == pytest.approx(age_z, abs=1e-5)  # null -> training median
    assert encoded[numeric.index("credit_score")] == Z_CLIP  # out of range -> clipped, not exploding
    offset = len(numeric)
    region_vocab = transform.vocabulary["region"]
    region_block = encoded[offset:offset + len(region_vocab) + 1]
    assert region_block.tolist() == [0.0] * len(region_vocab) + [1.0]  # the unknown bucket
    assert np.isfinite(encoded).all()


def test_fit_standardises_the_training_features():
    records = FeatureTransform().apply(generate_inputs(2_000, seed=2).to_dict("records"))
    matrix = FeatureTransform.fit(records).encode(records)
    numeric = matrix[:, :len(FeatureTransform.numeric_features)]
    assert np.abs(numeric.mean(axis=0)).max() < 0.05
    assert np.abs(numeric.std(axis=0) - 1).max() < 0.1  # clipping trims a little of the heaviest tails
    assert set(np.unique(matrix[:, len(FeatureTransform.numeric_features):])) <= {0.0, 1.0}


def test_round_trip_through_json_encodes_identically():
    records = FeatureTransform().apply(generate_inputs(300, seed=3).to_dict("records"))
    transform = FeatureTransform.fit(records)
    again = FeatureTransform.from_dict(json.loads(json.dumps(transform.to_dict())))
    assert np.array_equal(transform.encode(records), again.encode(records))
    assert [entry["name"] for entry in transform.to_dict()["inputs"]] == [name for name, _, _ in RAW_INPUTS]


def test_unknown_transform_versions_are_refused():
    spec = FeatureTransform.fit(FeatureTransform().apply([ROW])).to_dict()
    with pytest.raises(ValueError, match="version 99"):
        FeatureTransform.from_dict({**spec, "version": 99})
    with pytest.raises(ValueError, match="kind"):
        FeatureTransform.from_dict({**spec, "kind": "other"})
    with pytest.raises(ValueError, match="not fitted"):
        FeatureTransform().encode([transform_row(ROW)])


def test_importable_without_torch_or_fastapi():
    code = ("import sys, driftline.worker.feature_transform as t; t.FeatureTransform().apply([{}]); "
            "print(sorted(m for m in ('torch', 'fastapi', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_scheduler_finds_it_by_the_import_path_in_its_spec_as_a_users_own():
    from driftline.transform import load_transform

    spec = json.loads(json.dumps(FeatureTransform.fit(FeatureTransform().apply([ROW])).to_dict()))
    assert spec["import"].endswith("feature_transform:FeatureTransform")  # whatever package the worker installs as
    assert load_transform(spec)([ROW]) == [transform_row(ROW)]
    legacy = {k: v for k, v in spec.items() if k != "import"}  # stored before transforms were named by path
    assert load_transform(legacy) is None and load_transform(None) is None
