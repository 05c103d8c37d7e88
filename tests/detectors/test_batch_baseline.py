"""Bounded-memory `baseline`: streamed chunks give the in-memory baseline (exactly where the summaries allow,
within rounding for float sums), and a column too long to keep still gets its exact quantile edges."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driftline.baseline import Baseline
from driftline.detectors.batch.baseline import baseline_in_memory, stream_baseline
from driftline.detectors.batch.passes import ChunkedTable, EngineTable
from driftline.detectors.batch.quantiles import RankSearch
from driftline.errors import UserError
from driftline.table_files import iter_table
from driftline.worker.dataset import generate
from tests.support.baselines import assert_same


def chunks_of(frame: pd.DataFrame, rows: int):
    return lambda: (frame.iloc[i:i + rows].reset_index(drop=True) for i in range(0, len(frame), rows))


@pytest.fixture(scope="module")
def training():
    """The bundled credit data with a score and labels, and a few awkward values (nulls, infinities)."""
    rng = np.random.default_rng(5)
    inputs, labels = generate(5_000, 31)
    frame = inputs.assign(label=labels, score=np.clip(0.5 * labels + 0.6 * rng.random(len(labels)), 0, 1))
    frame.loc[frame.index[::97], frame.columns[0]] = np.nan
    numeric = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c])]
    frame.loc[frame.index[5::211], numeric[-2]] = np.inf
    return frame


@pytest.mark.parametrize("rows", [700, 5_000])
def test_streamed_baseline_equals_the_in_memory_one_on_the_bundled_data(training, rows):
    options = dict(prediction="score", label="label", segment_columns=["employment_type"])
    expected = baseline_in_memory(training, **options)
    streamed = stream_baseline(ChunkedTable(chunks_of(training, rows), "training data"), **options)
    assert streamed.fingerprint == expected.fingerprint  # rows, every edge
    assert streamed.sample == expected.sample and streamed.reconstruction == expected.reconstruction
    assert streamed.segments.keys() == expected.segments.keys() and streamed.segments
    assert_same(streamed.to_dict(), expected.to_dict())
    assert Baseline.from_dict(streamed.to_dict()).fingerprint == expected.fingerprint


def _profiles_match(streamed: Baseline, expected: Baseline) -> None:
    for name, profile in expected.profiles.items():
        got = streamed.profiles[name].to_dict()
        want = profile.to_dict()
        if want["kind"] != "numeric":
            assert got == want, name
            continue
        for key in ("edges", "decile_edges", "counts", "count", "nulls", "nonfinite", "min", "max"):
            assert got[key] == want[key], (name, key)
        assert_same({k: got[k] for k in ("sums", "mean", "std")}, {k: want[k] for k in ("sums", "mean", "std")},
                    name)
        if want["distinct"] <= 20:
            assert got["distinct"] == want["distinct"], name
        else:
            assert 20 < got["distinct"] <= want["distinct"], name


def test_a_column_too_long_to_keep_gets_the_exact_edges_and_counts(training):
    """Long columns (more finite values than `exact_values`): edges, deciles and counts exactly as in memory."""
    expected = baseline_in_memory(training, prediction="score")
    streamed = stream_baseline(ChunkedTable(chunks_of(training, 400), "training data"), prediction="score",
                               exact_values=300, sample_rows=500)
    assert streamed.fingerprint == expected.fingerprint
    _profiles_match(streamed, expected)
    assert streamed.prediction.to_dict()["edges"] == expected.prediction.to_dict()["edges"]


@st.composite
def columns(draw):
    n = draw(st.integers(50, 3_000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    shape = draw(st.sampled_from(["normal", "ties", "few", "spike", "heavy"]))
    if shape == "normal":
        values = rng.normal(0, 1, n)
    elif shape == "ties":
        values = np.round(rng.normal(0, 3, n))
    elif shape == "few":
        values = rng.choice([0.5, 1.0, 7.0], n)
    elif shape == "spike":  # most values one number, the rest spread: bins that cannot be cut finer
        values = np.where(rng.random(n) < 0.8, 1e-300, rng.normal(0, 1e6, n))
    else:
        values = rng.standard_cauchy(n) * 1e100
    holes = rng.random(n) < draw(st.floats(0, 0.2))
    values = np.where(holes, np.nan, values)
    values[rng.random(n) < 0.01] = np.inf
    return pd.DataFrame({"x": values, "y": rng.lognormal(0, 1, n)}), draw(st.integers(7, 900)), \
        draw(st.integers(1, 400)), draw(st.integers(20, 300))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns())
def test_streamed_profiles_stay_exact_or_within_rounding_whatever_the_split(case):
    frame, rows, exact_values, sample_rows = case
    expected = baseline_in_memory(frame)
    streamed = stream_baseline(ChunkedTable(chunks_of(frame, rows), "training data"), exact_values=exact_values,
                               sample_rows=sample_rows)
    assert streamed.fingerprint == expected.fingerprint
    _profiles_match(streamed, expected)


def test_rank_search_cuts_bins_until_the_values_fit_and_stops_at_single_values():
    rng = np.random.default_rng(1)
    values = np.concatenate((np.full(5_000, 2.0), rng.normal(size=20_000), [np.nextafter(2.0, 3.0)] * 300))
    wanted = np.linspace(0, 1, 101)
    search = RankSearch.start({"x": np.concatenate((values[:50], [values.min(), values.max()]))},
                              {"x": values.size}, {"x": wanted}, budget=200)
    passes = 0
    while not search.done:
        passes += 1
        fold = search.values_fold() if search.wants_values else search.counts_fold()
        result = {"x": fold.summarize_array("x", values)}
        search = search.with_values(result) if search.wants_values else search.with_counts(result)
    assert passes >= 3  # refined at least once: 200 values cannot hold 202 ranks' bins
    assert np.array_equal(search.quantiles("x"), np.quantile(values, wanted))


def test_pandas_frames_go_through_the_same_passes(training):
    expected = stream_baseline(ChunkedTable(chunks_of(training, 5_000), "training data"), prediction="score")
    got = stream_baseline(EngineTable(training, "training data"), prediction="score")
    assert got.fingerprint == expected.fingerprint
    assert_same(got.to_dict(), expected.to_dict())


def test_a_prediction_column_changing_kind_midway_is_a_clear_error():
    frame = pd.DataFrame({"x": np.arange(400.0), "p": [[0.2, 0.8]] * 200 + ["yes"] * 200})
    with pytest.raises(UserError, match="prediction column p"):
        stream_baseline(ChunkedTable(chunks_of(frame, 100), "training data"), prediction="p")


def test_text_deep_in_a_numeric_csv_column_is_a_clear_error(tmp_path):
    path = tmp_path / "train.csv"
    pd.DataFrame({"x": [1.0] * 300 + ["oops"] * 10, "z": np.arange(310.0)}).to_csv(path, index=False)
    with pytest.raises(UserError, match="column x is numeric in the first rows"):
        stream_baseline(ChunkedTable(iter_table(str(path), "training", 100), "training data"))


def test_the_command_streams_a_csv_in_blocks_to_the_in_memory_baseline(training, sqlite_url, tmp_path):
    from click.testing import CliRunner
    from sqlalchemy import select

    from driftline.cli import cli
    from driftline.store.db import session_scope
    from driftline.store.models import BaselineRecord

    path = tmp_path / "train.csv"
    training.to_csv(path, index=False)
    args = ["baseline", "--model", "m", "--file", str(path), "--prediction", "score", "--label", "label",
            "--db", sqlite_url]
    for version, extra in (("1", ["--batch-rows", "600"]), ("2", ["--in-memory"])):
        result = CliRunner().invoke(cli, [*args, "--version", version, *extra], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    with session_scope(sqlite_url) as session:
        stored = {r.version: r.summary for r in session.scalars(select(BaselineRecord))}
    assert stored["1"]["fingerprint"] == stored["2"]["fingerprint"]
    assert_same(stored["1"], stored["2"])



def test_a_zero_edge_signed_either_way_keeps_the_fingerprint():
    """Rounded values give a 0.0 edge in one pass and -0.0 in another: the same bins, so the same fingerprint."""
    positive = baseline_in_memory(pd.DataFrame({"x": np.round(np.random.default_rng(1).normal(0, 3, 500))}))
    edges = positive.profiles["x"].edges
    assert (edges == 0).any()
    flipped = dataclasses.replace(positive.profiles["x"], edges=np.where(edges == 0, -0.0, edges))
    negative = dataclasses.replace(positive, profiles={"x": flipped}, fingerprint="")
    assert np.signbit(negative.profiles["x"].edges).sum() > np.signbit(edges).sum()
    assert negative.fingerprint == positive.fingerprint
