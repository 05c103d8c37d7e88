"""Bounded-memory `detect`: streamed chunks through summaries give the in-memory JSON; where values fold into
bins, KS and Wasserstein stay within their documented bounds and PSI stays exact."""
from __future__ import annotations

import json

import numpy as np
import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftline.cli import main
from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.batch.plan import Plan
from driftline.detectors.batch.streamed import Budget, detect_streamed, summarize_table
from driftline.detectors.batch.summary import merge, summarize
from driftline.errors import UserError
from driftline.worker.dataset import generate
from driftline.worker.scenarios import SCENARIOS


def chunks_of(frame: pd.DataFrame, rows: int):
    return lambda: (frame.iloc[i:i + rows] for i in range(0, len(frame), rows))


def as_json(result) -> bytes:
    return orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)


@pytest.fixture(scope="module")
def credit():
    """The bundled credit data: a reference with labels and a score, a shifted current data set with timestamps."""
    rng = np.random.default_rng(3)
    inputs, labels = generate(6_000, 21)
    reference = inputs.assign(label=labels, score=np.clip(0.5 * labels + 0.6 * rng.random(len(labels)), 0, 1))
    shifted, shifted_labels = generate(4_500, 22, population=SCENARIOS["covariate_shift"].population)
    current = shifted.assign(label=shifted_labels, score=rng.random(len(shifted_labels)),
                             ts=pd.date_range("2026-11-01", periods=len(shifted), freq="7min", tz="UTC").astype(str))
    return reference, current


@pytest.mark.parametrize("options", [
    {},
    {"windowing": Windowing(chunk_size=1_000), "columns": ColumnRoles(prediction="score")},
    {"windowing": Windowing(chunk_period="3D"), "columns": ColumnRoles(timestamp="ts", prediction="score"),
     "judging": Judging(multivariate=False)},
    {"windowing": Windowing(chunk_period="2D"), "columns": ColumnRoles(timestamp="ts"),
     "judging": Judging(multivariate=False)},  # bins from the first day: a scan first
    {"columns": ColumnRoles(label="label", prediction="score", segment_by="region")},
    {"columns": ColumnRoles(timestamp="ts", ignore=["label"], categorical=["loan_term_months"])},
])
def test_streamed_json_equals_the_in_memory_json_on_the_bundled_data(credit, options):
    reference, current = credit
    in_memory = detect(reference, current, **options)
    streamed = detect_streamed(chunks_of(reference, 777), chunks_of(current, 512), **options)
    assert as_json(streamed) == as_json(in_memory)
    assert any(window["drifted_features"] for window in streamed["windows"])  # the comparison has drift to agree on


def test_decisions_agree_when_every_numeric_column_folds_into_bins(credit):
    reference, current = credit
    in_memory = detect(reference, current, windowing=Windowing(chunk_size=1_500))
    binned = detect_streamed(chunks_of(reference, 1_000), chunks_of(current, 700),
                             windowing=Windowing(chunk_size=1_500), budget=Budget(exact_values=50))
    for exact, folded in zip(in_memory["windows"], binned["windows"]):
        assert folded["drifted_features"] == exact["drifted_features"]
        assert folded["dataset_drift"] == exact["dataset_drift"]
        for a, b in zip(exact["features"], folded["features"]):
            assert b["tests"]["psi"]["value"] == pytest.approx(a["tests"]["psi"]["value"], rel=1e-12, abs=1e-15)
            assert b["missing_rate"] == a["missing_rate"]
            if a["kind"] == "numeric":
                assert "max_error" in b["tests"]["ks"]


def test_the_split_of_a_table_does_not_change_its_summary(credit):
    reference, _ = credit
    plan = Plan.scan({"annual_income": "numeric", "region": "categorical"}, sample_rows=500, exact_values=10**6)
    plan = plan.with_reference(summarize_table(chunks_of(reference, 2_000)(), plan, "reference"))
    whole = summarize(reference, plan)
    pieces = [summarize(reference.iloc[a:b], plan, a) for a, b in ((0, 10), (10, 3_333), (3_333, 6_000))]
    right_first = merge(pieces[0], merge(pieces[1], pieces[2], plan), plan)
    for merged in (right_first, merge(merge(pieces[0], pieces[1], plan), pieces[2], plan)):
        assert merged.rows == whole.rows
        assert merged.columns["region"].counts == whole.columns["region"].counts
        assert np.array_equal(np.sort(merged.columns["annual_income"].values),
                              np.sort(whole.columns["annual_income"].values))
        assert merged.sample_frame().equals(whole.sample_frame())  # bottom-k: the sample of the union


def _numeric(draw, n):
    shape = draw(st.sampled_from(["normal", "lognormal", "integers", "rounded"]))
    seed = draw(st.integers(0, 2**31))
    shift = draw(st.floats(-1.0, 1.0))
    rng = np.random.default_rng(seed)
    if shape == "normal":
        values = rng.normal(shift, 1.0 + abs(shift), n)
    elif shape == "lognormal":
        values = rng.lognormal(shift, 0.8, n)
    elif shape == "integers":
        values = rng.poisson(4 + 3 * abs(shift), n).astype(np.float64)
    else:
        values = np.round(rng.normal(100 + 10 * shift, 15, n), 0)
    if draw(st.booleans()):
        values[rng.random(n) < 0.05] = np.nan
    return values


@st.composite
def two_tables(draw):
    rows = draw(st.integers(200, 3_000)), draw(st.integers(200, 3_000))
    return (pd.DataFrame({"x": _numeric(draw, rows[0])}), pd.DataFrame({"x": _numeric(draw, rows[1])}),
            draw(st.integers(0, 3)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_tables())
def test_binned_ks_and_wasserstein_stay_within_their_documented_bounds(tables):
    reference, current, fold = tables
    exact = detect(reference, current, judging=Judging(multivariate=False))["windows"][0]["features"][0]["tests"]
    # what a side may keep: nothing, only the smaller side's values, only the larger's, everything
    counts = sorted((int(reference["x"].notna().sum()), int(current["x"].notna().sum())))
    plan_limit = [0, counts[0], counts[1] - 1, 10**6][fold]
    streamed = detect_streamed(chunks_of(reference, 400), chunks_of(current, 300), judging=Judging(multivariate=False),
                               budget=Budget(exact_values=plan_limit))["windows"][0]["features"][0]["tests"]
    assert streamed["psi"]["value"] == pytest.approx(exact["psi"]["value"], rel=1e-12, abs=1e-15)
    ks_error = streamed["ks"].get("max_error", 0.0)
    assert exact["ks"]["statistic"] - ks_error - 1e-12 <= streamed["ks"]["statistic"] <= exact["ks"]["statistic"] + 1e-12
    w_error = streamed["wasserstein"].get("max_error", 0.0)
    assert abs(streamed["wasserstein"]["value"] - exact["wasserstein"]["value"]) <= w_error + 1e-9
    if "max_error" not in streamed["ks"]:  # nothing folded: every statistic is the in-memory one
        assert streamed == exact


def test_cli_streams_csv_and_parquet_in_small_chunks_to_the_in_memory_json(credit, tmp_path, capfd):
    reference, current = credit
    outputs = {}
    for suffix in ("csv", "parquet"):
        ref_path, cur_path = tmp_path / f"ref.{suffix}", tmp_path / f"cur.{suffix}"
        for frame, path in ((reference, ref_path), (current, cur_path)):
            # several row groups, each read in chunks of --batch-rows
            frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path, row_group_size=1_500)
        for mode in (["--batch-rows", "999"], ["--in-memory"]):
            out = tmp_path / f"{suffix}{mode[0]}.json"
            code = 0
            try:
                main(["detect", "--reference", str(ref_path), "--current", str(cur_path),
                      "--chunk-size", "2000", "--json", str(out), *mode])
            except SystemExit as exc:
                code = int(exc.code or 0)
            assert code == 0, capfd.readouterr().err
            outputs[suffix, mode[0]] = json.loads(out.read_text())
    assert outputs["csv", "--batch-rows"] == outputs["csv", "--in-memory"]
    assert outputs["parquet", "--batch-rows"] == outputs["parquet", "--in-memory"]
    assert len(outputs["parquet", "--batch-rows"]["windows"]) == 3


def test_a_text_value_deep_in_a_numeric_csv_column_is_a_clear_error(tmp_path):
    reference = pd.DataFrame({"x": np.arange(100, dtype=float)})
    current = pd.DataFrame({"x": [*map(str, range(60)), "oops", *map(str, range(39))]})
    with pytest.raises(UserError, match="column x is numeric in the first rows"):
        detect_streamed(chunks_of(reference, 50), lambda: iter([current.iloc[:50].astype(float),
                                                                 current.iloc[50:]]))


def test_a_reference_too_long_to_keep_still_gets_its_exact_deciles_and_psi(credit):
    reference, current = credit
    in_memory = detect(reference, current, judging=Judging(multivariate=False))["windows"][0]
    # 50 values kept, a 300-row sample: deciles from three more passes over the reference
    streamed = detect_streamed(chunks_of(reference, 1_000), chunks_of(current, 1_000),
                               judging=Judging(multivariate=False),
                               budget=Budget(exact_values=50, sample_rows=300))["windows"][0]
    for exact, folded in zip(in_memory["features"], streamed["features"]):
        assert folded["tests"]["psi"]["value"] == exact["tests"]["psi"]["value"], exact["name"]
    assert streamed["drifted_features"] == in_memory["drifted_features"]


def test_the_cli_reads_small_parquet_files_whole_and_streams_what_it_is_told_to_or_cannot_size(
        credit, tmp_path, monkeypatch):
    """Parquet files under BATCH_IN_MEMORY_MAX_BYTES together are read whole (the same JSON, less memory and CPU);
    `--batch-rows`, a batch_rows setting, a larger pair or a CSV file stream."""
    import driftline.detectors.batch.streamed as streamed_module
    from driftline import batch_defaults

    reference, current = credit
    paths = {}
    for suffix in ("csv", "parquet"):
        for role, frame in (("ref", reference), ("cur", current)):
            path = tmp_path / f"{role}.{suffix}"
            frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path)
            paths[role, suffix] = str(path)
    streamed_calls = []
    real = streamed_module.detect_streamed

    def counting(*args, **kwargs):
        streamed_calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(streamed_module, "detect_streamed", counting)

    def streams(suffix: str, *extra: str) -> bool:
        before = len(streamed_calls)
        try:
            main(["detect", "--reference", paths["ref", suffix], "--current", paths["cur", suffix],
                  "--json", str(tmp_path / "out.json"), *extra])
        except SystemExit as exc:
            assert not exc.code
        return len(streamed_calls) > before

    assert not streams("parquet")
    assert streams("parquet", "--batch-rows", "999")
    assert streams("csv")
    monkeypatch.setenv("DRIFTLINE_BATCH_ROWS", "5000")
    assert streams("parquet")
    monkeypatch.delenv("DRIFTLINE_BATCH_ROWS")
    monkeypatch.setattr(batch_defaults, "BATCH_IN_MEMORY_MAX_BYTES", 1_000)
    assert streams("parquet")
