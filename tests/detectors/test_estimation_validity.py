"""Estimates to trust: the model's own decisions (`--prediction-class`), and `estimation_invalid` once labels come.

The synthetic model: scores Beta(2, 3), labels Bernoulli(score) (calibrated by construction). Its decisions
are taken at 0.3, not 0.5. Concept drift keeps the scores' distribution and changes P(label | score) to
0.25 + score / 2: the estimate cannot see it, the realized metrics can.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.estimation.validity import WindowCheck, judge_validity, miss_probability
from driftline.detectors.thresholds.levels import WindowThresholds
from driftline import defaults
from driftline.errors import UserError
from driftline.vocabulary import ACCURACY, ESTIMATED_METRICS
from tests.support.cli import run_detect

DECIDES_AT = 0.3
# labelled windows after the break before estimation_invalid is raised (docs/detectors.md, CBPE)
DOCUMENTED_DELAY = 2


def model_frame(rng, n, drift_from=None):
    scores = rng.beta(2, 3, n)
    chance = scores.copy()
    if drift_from is not None:
        chance[drift_from:] = 0.25 + 0.5 * scores[drift_from:]
    labels = (rng.random(n) < chance).astype(int)
    return pd.DataFrame({"x": scores + rng.normal(0, 0.1, n), "score": scores,
                         "decision": (scores >= DECIDES_AT).astype(int), "y": labels})


# --- (a) the model's own decisions ------------------------------------------------------------

def test_prediction_class_estimates_the_models_own_decisions(tmp_path, capfd):
    rng = np.random.default_rng(7)
    reference, current = model_frame(rng, 20_000), model_frame(rng, 20_000)
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    realized = float((current["decision"] == current["y"]).mean())  # the accuracy of what the model decided
    files = ["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv")]
    code, out, err = run_detect([*files, "--prediction", "score", "--label", "y", "--prediction-class", "decision"],
                                capfd)
    assert code == 0, err
    [window] = json.loads(out)["windows"]
    assert "decision" not in {f["name"] for f in window["features"]}  # the decisions are no feature
    performance = window["performance"]
    decided = performance["estimated"][ACCURACY]["value"]
    assert abs(decided - realized) < 0.02, (decided, realized)
    assert performance["realized"][ACCURACY]["value"] == pytest.approx(realized)  # realized follows them too
    assert performance["estimation_invalid"] is False

    code, out, err = run_detect([*files, "--prediction", "score", "--label", "y", "--ignore", "decision"], capfd)
    assert code == 0, err
    at_half = json.loads(out)["windows"][0]["performance"]["estimated"][ACCURACY]["value"]
    assert abs(at_half - realized) > 0.05, (at_half, realized)  # a 0.5 threshold estimates another model


def test_the_configured_threshold_stands_in_for_decisions_not_logged(tmp_path, capfd):
    rng = np.random.default_rng(8)
    reference, current = model_frame(rng, 20_000), model_frame(rng, 20_000)
    realized = float((current["decision"] == current["y"]).mean())
    reference.drop(columns=["decision"]).to_csv(tmp_path / "ref.csv", index=False)
    current.drop(columns=["decision"]).to_csv(tmp_path / "cur.csv", index=False)
    config = tmp_path / "t.toml"
    config.write_text(f'[estimated_quality.models."credit"]\nthreshold = {DECIDES_AT}\n')
    code, out, err = run_detect(["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
                                 "--prediction", "score", "--label", "y", "--config", str(config), "--model",
                                 "credit"], capfd)
    assert code == 0, err
    estimate = json.loads(out)["windows"][0]["performance"]["estimated"][ACCURACY]["value"]
    assert abs(estimate - realized) < 0.02, (estimate, realized)
    assert WindowThresholds().estimated_quality_threshold == 0.5  # other models: the default


@pytest.mark.parametrize("change, message", [
    (dict(label=None), "needs --label"),
    (dict(prediction_class="nope"), "no such column"),
])
def test_prediction_class_errors_are_clear(change, message):
    rng = np.random.default_rng(9)
    reference, current = model_frame(rng, 500), model_frame(rng, 500)
    options = {"prediction": "score", "label": "y", "prediction_class": "decision", **change}
    with pytest.raises(UserError, match=message):
        detect(reference, current, columns=ColumnRoles(**options))


def test_decisions_that_are_not_zero_or_one_are_refused():
    rng = np.random.default_rng(10)
    reference, current = model_frame(rng, 500), model_frame(rng, 500)
    reference["decision"] = np.where(reference["decision"] == 1, "yes", "no")
    with pytest.raises(UserError, match="0/1 or true/false"):
        detect(reference, current, columns=ColumnRoles(prediction="score", label="y", prediction_class="decision"))


# --- (b) concept drift: the estimate stays, realized falls, estimation_invalid is raised ---------------

def test_concept_drift_raises_estimation_invalid_within_the_documented_delay():
    rng = np.random.default_rng(3)
    size, windows, k = 1000, 12, 6
    reference = model_frame(rng, 20_000)
    current = model_frame(rng, windows * size, drift_from=k * size)
    result = detect(reference, current, columns=ColumnRoles(prediction="score", label="y", ignore=["decision"]),
                    windowing=Windowing(chunk_size=size), judging=Judging(multivariate=False))
    performances = [w["performance"] for w in result["windows"]]
    estimates = [p["estimated"][ACCURACY]["value"] for p in performances]
    realized = [p["realized"][ACCURACY]["value"] for p in performances]
    invalid = [p["estimation_invalid"] for p in performances]
    assert max(estimates) - min(estimates) < 0.03  # the scores did not move: neither does the estimate
    assert np.mean(realized[k:]) < np.mean(realized[:k]) - 0.05
    assert not any(invalid[:k])
    first = invalid.index(True)
    assert k <= first < k + DOCUMENTED_DELAY  # the second labelled window after the break
    assert all(invalid[first:])


# --- (c) no drift: raised at most at the stated rate ---------------------------------------------------

def test_no_drift_raises_estimation_invalid_at_most_at_the_stated_rate():
    rng = np.random.default_rng(4)
    size, windows = 500, 200
    result = detect(model_frame(rng, 20_000), model_frame(rng, windows * size),
                    columns=ColumnRoles(prediction="score", label="y", ignore=["decision"]),
                    windowing=Windowing(chunk_size=size), judging=Judging(multivariate=False))
    raised = sum(w["performance"]["estimation_invalid"] for w in result["windows"])
    assert raised <= defaults.ESTIMATION_INVALID_ALPHA * windows, raised


# --- the test itself -----------------------------------------------------------------------------------

def test_one_miss_is_chance_two_in_ten_are_not():
    z, alpha, windows = defaults.ESTIMATED_QUALITY_Z, defaults.ESTIMATION_INVALID_ALPHA, 10
    assert miss_probability(z) == pytest.approx(len(ESTIMATED_METRICS) * 0.0026998, rel=1e-3)
    one = judge_validity([WindowCheck((ACCURACY,))] + [WindowCheck()] * 9, z=z, alpha=alpha, windows=windows)
    assert not one.invalid and one.p_value > alpha
    two = judge_validity([WindowCheck((ACCURACY,))] + [WindowCheck()] * 8 + [WindowCheck((ACCURACY,))], z=z,
                         alpha=alpha, windows=windows)
    assert two.invalid and two.misses == 2 and two.windows == 10
    # misses older than the last `windows` checked windows stop counting: the verdict clears
    cleared = judge_validity([WindowCheck((ACCURACY,))] * 2 + [WindowCheck()] * 10, z=z, alpha=alpha,
                             windows=windows)
    assert not cleared.invalid and cleared.misses == 0
    assert not judge_validity([], z=z, alpha=alpha, windows=windows).invalid


@pytest.mark.parametrize("read", [[], ["--in-memory"]])
def test_baseline_prediction_class_makes_the_training_metrics_follow_the_decisions(sqlite_url, tmp_path, read):
    from click.testing import CliRunner
    from sqlalchemy import select

    from driftline.baseline import Baseline
    from driftline.cli import cli
    from driftline.detectors.stats.quality import quality_metrics
    from driftline.store.db import session_scope
    from driftline.store.models import BaselineRecord

    rng = np.random.default_rng(11)
    train = model_frame(rng, 5_000)
    train.to_csv(tmp_path / "train.csv", index=False)
    CliRunner().invoke(cli, ["baseline", "--model", "m", "--version", "1", "--file", str(tmp_path / "train.csv"),
                             "--prediction", "score", "--label", "y", "--prediction-class", "decision", *read,
                             "--db", sqlite_url], catch_exceptions=False, standalone_mode=False)
    with session_scope(sqlite_url) as s:
        baseline = Baseline.from_dict(s.scalars(select(BaselineRecord)).one().summary)
    assert "decision" not in baseline.feature_names  # the decisions are no feature
    training = quality_metrics(baseline.quality)
    assert training[ACCURACY] == pytest.approx(float((train["decision"] == train["y"]).mean()))
