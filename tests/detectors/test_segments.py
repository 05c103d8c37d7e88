"""`detect --segment-by`: a drift confined to one segment is found there and nowhere else."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from driftline import defaults
from driftline.cli import main
from driftline.detectors.batch.engine import ColumnRoles, Windowing, detect
from driftline.detectors.batch.segments import OTHER
from driftline.errors import UserError
from driftline.vocabulary import DATASET_DRIFT, INSUFFICIENT_DATA
from driftline.worker.dataset import generate_inputs
from driftline.worker.scenarios import SCENARIOS


@pytest.fixture(scope="module")
def credit():
    reference = generate_inputs(20_000, seed=11, population=SCENARIOS["none"].population)
    current = generate_inputs(5_000, seed=12, population=SCENARIOS["segment_shift"].population)
    return reference, current


def _by_value(window):
    return {segment["value"]: segment for segment in window["segments"]}


def test_a_one_region_shift_is_silent_overall_and_loud_in_its_segment(credit):
    reference, current = credit
    whole = detect(reference, current)["windows"][0]
    assert not whole[DATASET_DRIFT]
    assert len(whole["drifted_features"]) <= 2, whole["drifted_features"]
    assert "segments" not in whole

    window = detect(reference, current, columns=ColumnRoles(segment_by="region"))["windows"][0]
    segments = _by_value(window)
    assert set(segments) == set(reference["region"].unique())
    north = segments["north"]
    assert north[DATASET_DRIFT], north["drifted_features"]
    assert {"age", "annual_income", "credit_score"} <= set(north["drifted_features"])
    assert north["rows"] == int((current["region"] == "north").sum())
    for value, segment in segments.items():
        assert "region" not in [f["name"] for f in segment["features"]]  # not tested inside its own segments
        if value != "north":
            assert not segment[DATASET_DRIFT] and len(segment["drifted_features"]) <= 1, (value, segment)
    # the window's own result is the same with or without segments
    assert window["drifted_features"] == whole["drifted_features"]


def _frame(rng, rows, values, shift_value=None):
    segment = rng.choice(values, rows)
    x = rng.normal(0.0, 1.0, rows) + np.where(segment == shift_value, 1.5, 0.0)
    return pd.DataFrame({"x": x, "y": rng.normal(0.0, 1.0, rows), "shop": segment})


def test_many_values_are_capped_and_the_rest_pooled_as_other():
    rng = np.random.default_rng(3)
    values = np.array([f"s{i:02d}" for i in range(defaults.SEGMENT_MAX_VALUES + 5)])
    reference, current = _frame(rng, 40_000, values), _frame(rng, 20_000, values)
    segments = detect(reference, current, columns=ColumnRoles(segment_by="shop"))["windows"][0]["segments"]
    assert len(segments) == defaults.SEGMENT_MAX_VALUES + 1
    other = segments[-1]
    assert other["value"] == OTHER and other["pooled_values"] == 5
    kept = [s["value"] for s in segments[:-1]]
    largest = reference["shop"].value_counts().index[:defaults.SEGMENT_MAX_VALUES]
    assert set(kept) == set(largest)
    assert sum(s["rows"] for s in segments) == len(current)


def test_unseen_values_are_reported_not_compared_and_small_segments_are_insufficient():
    rng = np.random.default_rng(4)
    reference = _frame(rng, 5_000, np.array(["a", "b"]))
    reference.loc[:29, "shop"] = "tiny"
    current = _frame(rng, 3_000, np.array(["a", "b", "new"]))
    current.loc[:9, "shop"] = "tiny"
    segments = _by_value(detect(reference, current, columns=ColumnRoles(segment_by="shop"))["windows"][0])
    assert segments["new"]["reference_rows"] == 0 and segments["new"]["features"] == []
    assert "not in the reference" in segments["new"]["reason"]
    assert segments["tiny"][INSUFFICIENT_DATA] and not segments["tiny"][DATASET_DRIFT]
    assert segments["a"]["features"] and INSUFFICIENT_DATA not in segments["a"]


def test_the_shifted_segment_drifts_in_every_window():
    rng = np.random.default_rng(5)
    values = np.array(["a", "b", "c"])
    reference, current = _frame(rng, 9_000, values), _frame(rng, 6_000, values, shift_value="c")
    windows = detect(reference, current, columns=ColumnRoles(segment_by="shop"),
                     windowing=Windowing(chunk_size=3_000))["windows"]
    assert len(windows) == 2
    for window in windows:
        segments = _by_value(window)
        assert "x" in segments["c"]["drifted_features"]
        assert "x" not in segments["a"]["drifted_features"] and "x" not in segments["b"]["drifted_features"]


def test_bad_segment_columns_are_user_errors():
    rng = np.random.default_rng(6)
    reference, current = _frame(rng, 500, np.array(["a", "b"])), _frame(rng, 500, np.array(["a", "b"]))
    with pytest.raises(UserError, match="--segment-by nope: no such column in the reference"):
        detect(reference, current, columns=ColumnRoles(segment_by="nope"))
    with pytest.raises(UserError, match="current data"):
        detect(reference.assign(extra="e"), current, columns=ColumnRoles(segment_by="extra", ignore=["extra"]))
    with pytest.raises(UserError, match="numeric column with .* distinct values"):
        detect(reference, current, columns=ColumnRoles(segment_by="x"))
    # a numeric column with few distinct values is a segment column as it is
    codes = reference.assign(code=rng.integers(0, 3, 500)), current.assign(code=rng.integers(0, 3, 500))
    segments = detect(*codes, columns=ColumnRoles(segment_by="code"))["windows"][0]["segments"]
    assert sorted(s["value"] for s in segments) == [0, 1, 2]


def test_the_command_line_option(tmp_path, capfd):
    rng = np.random.default_rng(7)
    reference, current = _frame(rng, 2_000, np.array(["a", "b"])), _frame(rng, 2_000, np.array(["a", "b"]), "b")
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    out = tmp_path / "out.json"
    main(["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
          "--segment-by", "shop", "--json", str(out)])
    window = json.loads(out.read_text())["windows"][0]
    assert "x" in _by_value(window)["b"]["drifted_features"]
    with pytest.raises(SystemExit) as exc:
        main(["detect", "--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
              "--segment-by", "nope"])
    assert exc.value.code == 1
    assert "--segment-by nope" in capfd.readouterr().err


def test_with_a_label_each_compared_segment_has_its_own_performance():
    rng = np.random.default_rng(11)

    def frame(n: int, hard_in_b: bool) -> pd.DataFrame:
        group = rng.choice(["a", "b"], n)
        x = rng.normal(0.0, 1.0, n)
        score = 1 / (1 + np.exp(-2 * x))
        # In "b" the current scores are pushed towards 0.5: harder cases there, the same in "a".
        if hard_in_b:
            score = np.where(group == "b", 0.5 + (score - 0.5) * 0.2, score)
        label = (rng.random(n) < score).astype(int)
        return pd.DataFrame({"x": x, "g": group, "score": score, "y": label})

    result = detect(frame(6000, False), frame(4000, True),
                    columns=ColumnRoles(prediction="score", label="y", segment_by="g"))
    segments = {s["value"]: s for s in result["windows"][0]["segments"]}
    estimated = {key: s["performance"]["estimated"]["roc_auc"]["value"] for key, s in segments.items()}
    realized = {key: s["performance"]["realized"]["roc_auc"]["value"] for key, s in segments.items()}
    assert estimated["b"] < estimated["a"] - 0.1  # the segment's own scores, not the window's
    assert abs(estimated["a"] - realized["a"]) < 0.05 and abs(estimated["b"] - realized["b"]) < 0.05


def test_a_segment_that_was_always_harder_is_judged_against_its_own_training_performance():
    """Region "b" is harder in training too (scores near 0.5): unchanged, it must not read as a drop."""
    rng = np.random.default_rng(12)

    def frame(n: int) -> pd.DataFrame:
        group = rng.choice(["a", "b"], n, p=[0.7, 0.3])
        score = 1 / (1 + np.exp(-3 * rng.normal(0.0, 1.0, n)))
        score = np.where(group == "b", 0.5 + (score - 0.5) * 0.25, score)
        return pd.DataFrame({"g": group, "x": rng.normal(size=n), "score": score,
                             "y": (rng.random(n) < score).astype(int)})

    reference = frame(20_000)
    window = detect(reference, frame(6_000),
                    columns=ColumnRoles(prediction="score", label="y", segment_by="g"))["windows"][0]
    whole_training = window["performance"]["estimated"]["accuracy"]["training"]
    segments = {s["value"]: s["performance"]["estimated"] for s in window["segments"]}
    hard = segments["b"]["accuracy"]
    assert hard["training"] < whole_training - 0.15  # the segment's own reference, not the whole one's
    assert hard["lower"] <= hard["training"] <= hard["upper"]
    assert not any(entry["alert"] for estimated in segments.values() for entry in estimated.values())
    b_rows = reference[reference["g"] == "b"]
    assert hard["training"] == pytest.approx(((b_rows["score"] >= 0.5) == b_rows["y"]).mean(), abs=0.01)


def test_a_regression_segment_is_judged_against_its_own_training_error():
    rng = np.random.default_rng(13)

    def frame(n: int) -> pd.DataFrame:
        group = rng.choice(["calm", "noisy"], n, p=[0.6, 0.4])
        x = rng.normal(size=n)
        return pd.DataFrame({"g": group, "x": x, "pred": 2 * x,
                             "y": 2 * x + np.where(group == "noisy", 3.0, 0.5) * rng.normal(size=n)})

    window = detect(frame(10_000), frame(4_000),
                    columns=ColumnRoles(prediction="pred", label="y", segment_by="g"))["windows"][0]
    segments = {s["value"]: s["performance"]["estimated"]["mae"] for s in window["segments"]}
    assert segments["noisy"]["training"] > 3 * segments["calm"]["training"]
    assert not segments["noisy"]["alert"] and not segments["calm"]["alert"]
    assert segments["noisy"]["lower"] <= segments["noisy"]["training"] <= segments["noisy"]["upper"]
