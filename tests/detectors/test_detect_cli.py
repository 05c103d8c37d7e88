"""`driftline detect` end to end: files in, the documented JSON out, one-line errors for bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from driftline.vocabulary import DATASET_DRIFT
from tests.support.cli import run_detect

REPO = Path(__file__).resolve().parents[2]


def frame(rng: np.random.Generator, n: int, shift: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame({
        "id": np.arange(n),
        "ts": pd.date_range("2026-11-01", periods=n, freq="30min", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "income": rng.normal(5000 + shift * 1000, 1000, n),
        "age": rng.integers(18, 80, n),
        "zip": rng.choice([1000, 2000, 3000], n),
        "region": rng.choice(["north", "south", "east"], n),
        "member": rng.choice([True, False], n),
        "y_pred": rng.random(n),
    })


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    reference, current = frame(rng, 2000), frame(rng, 1500, shift=0.8)
    paths = {"ref_csv": tmp_path / "ref.csv", "cur_csv": tmp_path / "cur.csv",
             "ref_parquet": tmp_path / "ref.parquet", "cur_parquet": tmp_path / "cur.parquet"}
    reference.to_csv(paths["ref_csv"], index=False)
    current.to_csv(paths["cur_csv"], index=False)
    reference.to_parquet(paths["ref_parquet"])
    current.to_parquet(paths["cur_parquet"])
    return {k: str(v) for k, v in paths.items()} | {"dir": tmp_path}


def _base(files, ref="ref_csv", cur="cur_csv"):
    return ["--reference", files[ref], "--current", files[cur]]


# --- the contract's JSON ------------------------------------------------------------

def test_json_to_stdout_matches_the_contract(files, capfd):
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts", "--prediction", "y_pred"], capfd)
    assert code == 0, err
    result = json.loads(out)
    assert set(result) == {"schema_version", "reference_rows", "windows"}
    assert result["schema_version"] == 1 and result["reference_rows"] == 2000
    [window] = result["windows"]
    assert {"index", "rows", "start", "end", "features", "prediction", "drifted_features",
            DATASET_DRIFT} <= set(window)
    assert window["index"] == 0 and window["rows"] == 1500 and window["start"] is None and window["end"] is None
    features = {f["name"]: f for f in window["features"]}
    assert list(features) == ["income", "age", "zip", "region", "member"]
    income = features["income"]
    assert income["kind"] == "numeric" and income["missing_rate"] == 0.0 and income["drift"] is True
    assert set(income["tests"]) == {"psi", "ks", "wasserstein", "jensenshannon"}
    assert {"value", "threshold", "drift"} <= set(income["tests"]["psi"])
    assert {"statistic", "p_value", "drift"} <= set(income["tests"]["ks"])
    region = features["region"]
    assert region["kind"] == "categorical" and set(region["tests"]) == {"chi2", "jensenshannon", "psi"}
    assert features["member"]["kind"] == "categorical"
    assert features["zip"]["kind"] == "numeric"
    assert window["drifted_features"] == [n for n, f in features.items() if f["drift"]] == ["income"]
    assert window["prediction"]["name"] == "y_pred" and window["prediction"]["kind"] == "numeric"
    assert window["prediction"]["drift"] is False and "tests" in window["prediction"]
    assert window[DATASET_DRIFT] is False


def test_parquet_json_file_and_categorical_override(files, capfd):
    out_path = files["dir"] / "out.json"
    code, out, err = run_detect(_base(files, "ref_parquet", "cur_parquet")
                                + ["--ignore", "id,ts", "--categorical", "zip", "--json", str(out_path)], capfd)
    assert code == 0, err
    assert out == ""  # the JSON went to the file
    assert "1 window(s)" in err
    features = {f["name"]: f for f in json.loads(out_path.read_text())["windows"][0]["features"]}
    assert features["zip"]["kind"] == "categorical" and "chi2" in features["zip"]["tests"]


def test_no_drift_still_exits_zero(files, capfd):
    code, out, _ = run_detect(["--reference", files["ref_csv"], "--current", files["ref_csv"], "--ignore", "id,ts"],
                              capfd)
    assert code == 0
    window = json.loads(out)["windows"][0]
    assert window["drifted_features"] == [] and window[DATASET_DRIFT] is False


def test_chunk_size_windows_and_progress(files, capfd):
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts", "--chunk-size", "400"], capfd)
    assert code == 0, err
    windows = json.loads(out)["windows"]
    assert [w["rows"] for w in windows] == [400, 400, 400, 300]
    assert [w["index"] for w in windows] == [0, 1, 2, 3]
    assert "window 4 (300 rows)" in err  # a streamed CSV: the number of windows is known at its end
    code, out, err = run_detect(_base(files, "ref_parquet", "cur_parquet") + ["--ignore", "id,ts", "--chunk-size",
                                                                              "400"], capfd)
    assert code == 0, err
    assert "window 4/4 (300 rows)" in err  # Parquet: its footer holds the row count


def test_chunk_period_windows_have_bounds(files, capfd):
    code, out, err = run_detect(_base(files) + ["--ignore", "id", "--timestamp", "ts", "--chunk-period", "1D"], capfd)
    assert code == 0, err
    windows = json.loads(out)["windows"]
    # 1500 half-hours from midnight: 31 full days of 48 rows and a last day of 12.
    assert [w["rows"] for w in windows] == [48] * 31 + [12]
    assert windows[0]["start"] == "2026-11-01T00:00:00+00:00" and windows[0]["end"] == "2026-11-02T00:00:00+00:00"
    assert all("ts" not in [f["name"] for f in w["features"]] for w in windows)
    # Windows under the minimum row count are "insufficient data", never drift.
    assert all(f["reason"].startswith("insufficient data") and not f["drift"] for f in windows[-1]["features"])


def test_thresholds_from_config(files, capfd):
    config = files["dir"] / "driftline.toml"
    config.write_text("[drift]\n[drift.features.income]\npsi = 50.0\nwasserstein = 50.0\njensenshannon = 50.0\n")
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts", "--config", str(config)], capfd)
    assert code == 0, err
    assert json.loads(out)["windows"][0]["drifted_features"] == []


def test_multivariate_thresholds_from_config(files, capfd):
    config = files["dir"] / "driftline.toml"
    config.write_text("[multivariate_drift]\ndomain_classifier_auc = 0.99\nmax_rows = 200\ntop_features = 1\n")
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts", "--config", str(config)], capfd)
    assert code == 0, err
    classifier = json.loads(out)["windows"][0]["multivariate"]["domain_classifier"]
    assert classifier["threshold"] == 0.99 and len(classifier["top_features"]) <= 1
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts"], capfd)
    assert json.loads(out)["windows"][0]["multivariate"]["domain_classifier"]["threshold"] < 0.99


def test_html_report_from_evidently(files, capfd):
    html = files["dir"] / "report.html"
    code, out, err = run_detect(_base(files) + ["--ignore", "id,ts", "--html", str(html)], capfd)
    assert code == 0, err
    text = html.read_text()
    assert "<html" in text.lower() and "Drifted Columns" in text
    assert all(name in text for name in ("income", "age", "region"))
    assert json.loads(out)["windows"][0]["drifted_features"] == ["income"]


# --- bad input: one line, non-zero exit, nothing on stdout -----------------------------

def _write(path: Path, content: bytes) -> str:
    path.write_bytes(content)
    return str(path)


BAD_CASES = {
    "missing column in current": (lambda f, d: ["--reference", f["ref_csv"], "--current", _write(
        d / "c.csv", pd.read_csv(f["cur_csv"]).drop(columns=["age"]).to_csv(index=False).encode())],
        "missing from the current"),
    "type mismatch": (lambda f, d: ["--reference", f["ref_csv"], "--current", _write(
        d / "c.csv", pd.read_csv(f["cur_csv"]).assign(income="lots").to_csv(index=False).encode()),
        "--ignore", "id,ts"], "income"),
    "empty file": (lambda f, d: ["--reference", f["ref_csv"], "--current", _write(d / "e.csv", b"")], "empty"),
    "header only": (lambda f, d: ["--reference", _write(d / "h.csv", b"a,b\n"), "--current", f["cur_csv"]],
                    "no rows"),
    "not a file": (lambda f, d: ["--reference", f["ref_csv"], "--current", str(d / "nope.csv")], "does not exist"),
    "directory": (lambda f, d: ["--reference", str(d), "--current", f["cur_csv"]], "not a file"),
    "corrupt parquet": (lambda f, d: ["--reference", f["ref_csv"], "--current", _write(d / "x.parquet",
                                                                                     b"PAR1garbage")],
                        "cannot read current"),
    "binary csv": (lambda f, d: ["--reference", _write(d / "b.csv", bytes(range(256)) * 4), "--current",
                                 f["cur_csv"]], "reference"),
    "unsupported type": (lambda f, d: ["--reference", _write(d / "r.xlsx", b"x"), "--current", f["cur_csv"]],
                         "unsupported"),
    "unknown ignore": (lambda f, d: _base(f) + ["--ignore", "id,nope"], "--ignore"),
    "unknown categorical": (lambda f, d: _base(f) + ["--categorical", "nope"], "--categorical"),
    "unknown prediction": (lambda f, d: _base(f) + ["--prediction", "nope"], "--prediction"),
    "unknown timestamp": (lambda f, d: _base(f) + ["--timestamp", "nope", "--chunk-period", "1D"], "--timestamp"),
    "bad chunk period": (lambda f, d: _base(f) + ["--ignore", "id", "--timestamp", "ts", "--chunk-period",
                                                  "fortnightish"], "--chunk-period"),
    "negative chunk period": (lambda f, d: _base(f) + ["--ignore", "id", "--timestamp", "ts", "--chunk-period",
                                                       "-1D"], "--chunk-period"),
    "period without timestamp": (lambda f, d: _base(f) + ["--chunk-period", "1D"], "--timestamp"),
    "both chunkings": (lambda f, d: _base(f) + ["--chunk-size", "10", "--timestamp", "ts", "--chunk-period", "1D"],
                       "either"),
    "zero chunk size": (lambda f, d: _base(f) + ["--chunk-size", "0"], "--chunk-size"),
    "unreadable timestamps": (lambda f, d: _base(f) + ["--ignore", "id", "--timestamp", "region",
                                                       "--chunk-period", "1D"], "--timestamp"),
    "zero-byte parquet": (lambda f, d: ["--reference", _write(d / "r.parquet", b""), "--current", f["cur_csv"]],
                          "reference"),
    "bad config key": (lambda f, d: _base(f) + ["--config", _write(d / "t.toml", b"[drift]\npsii = 1\n")], "psii"),
    "bad multivariate key": (lambda f, d: _base(f) + ["--config", _write(d / "t.toml", b"[multivariate_drift]\nsigma = 1\n")],
                             "sigma"),
    "multivariate folds 1": (lambda f, d: _base(f) + ["--config", _write(d / "t.toml", b"[multivariate_drift]\nfolds = 1\n")],
                             "folds"),
    "multivariate negative sigmas": (lambda f, d: _base(f) + ["--config", _write(
        d / "t.toml", b"[multivariate_drift]\npca_error_sigmas = -1.0\n")], "pca_error_sigmas"),
    "multivariate nan auc": (lambda f, d: _base(f) + ["--config", _write(
        d / "t.toml", b"[multivariate_drift]\ndomain_classifier_auc = nan\n")], "domain_classifier_auc"),
    "multivariate text value": (lambda f, d: _base(f) + ["--config", _write(
        d / "t.toml", b"[multivariate_drift]\ntrees = \"many\"\n")], "trees"),
    "multivariate not a table": (lambda f, d: _base(f) + ["--config", _write(d / "t.toml", b"multivariate_drift = 3\n")],
                                 "multivariate_drift"),
    "unwritable json": (lambda f, d: _base(f) + ["--ignore", "id,ts", "--json", str(d / "no" / "such" / "o.json")],
                        "--json"),
    "unwritable html": (lambda f, d: _base(f) + ["--html", str(d / "no" / "r.html")], "--html"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_is_one_clear_line_and_non_zero_exit(case, files, capfd):
    make_args, expected = BAD_CASES[case]
    code, out, err = run_detect(make_args(files, files["dir"]), capfd)
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("driftline: error:") and expected in lines[0], lines[0]


def test_datetime_column_must_be_ignored_or_the_timestamp(tmp_path, capfd):
    rng = np.random.default_rng(1)
    data = frame(rng, 300).assign(ts=lambda f: pd.to_datetime(f["ts"]))
    data.to_parquet(tmp_path / "r.parquet")
    code, out, err = run_detect(["--reference", str(tmp_path / "r.parquet"), "--current", str(tmp_path / "r.parquet"),
                                 "--ignore", "id"], capfd)
    assert code == 1 and out == "" and "ts" in err and "--ignore" in err
    code, out, _ = run_detect(["--reference", str(tmp_path / "r.parquet"), "--current", str(tmp_path / "r.parquet"),
                               "--ignore", "id", "--timestamp", "ts", "--chunk-period", "1D"], capfd)
    assert code == 0 and len(json.loads(out)["windows"]) == 7


def test_console_script_exit_codes(files):
    script = Path(sys.executable).parent / "driftline"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "driftline.cli"]
    ok = subprocess.run(command + ["detect", *_base(files), "--ignore", "id,ts"], capture_output=True,
                        cwd=REPO, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["schema_version"] == 1
    bad = subprocess.run(command + ["detect", *_base(files), "--ignore", "nope"], capture_output=True,
                         cwd=REPO, timeout=120)
    assert bad.returncode == 1 and bad.stdout == b""
    assert bad.stderr.decode().count("\n") == 1 and b"Traceback" not in bad.stderr


def test_kinds_are_inferred_from_dtypes():
    from driftline.detectors.batch.engine import feature_kinds

    data = pd.DataFrame({
        "amount": [1.5, 2.5, None],
        "count": [1, 2, 3],
        "grade": pd.Series([1, 2, 1], dtype="category"),
        "code": pd.Series([10, 20, 10], dtype=object),
        "flag": [True, False, True],
        "name": ["a", "b", None],
    })
    assert feature_kinds(data, data) == {"amount": "numeric", "count": "numeric", "grade": "categorical",
                                         "code": "categorical", "flag": "categorical", "name": "categorical"}
    assert feature_kinds(data, data, categorical=["count"])["count"] == "categorical"


def test_html_report_keeps_hostile_values_and_names_inert(tmp_path, capfd):
    from tests.support.markup import injected

    script, handler = "</script><script>alert(document.domain)</script>", "<img src=x onerror=alert(2)>"
    rng = np.random.default_rng(1)

    def hostile(n: int, shift: float) -> pd.DataFrame:
        return pd.DataFrame({"income": rng.normal(5000 + shift, 1000, n),
                             "region": rng.choice(["north", script, "east"], n), handler: rng.choice(["a", "b"], n)})

    hostile(500, 0).to_csv(tmp_path / "ref.csv", index=False)
    hostile(400, 800).to_csv(tmp_path / "cur.csv", index=False)
    html = tmp_path / "report.html"
    code, out, err = run_detect(["--reference", str(tmp_path / "ref.csv"), "--current", str(tmp_path / "cur.csv"),
                                 "--categorical", f"region,{handler}", "--html", str(html)], capfd)
    assert code == 0, err
    text = html.read_text()
    assert injected(text, "alert(document.domain)") == [] and injected(text, "alert(2)") == []
    assert script not in text and handler not in text
    assert "alert(document.domain)" in text and "onerror=alert(2)" in text  # still shown, as text
    assert handler in [f["name"] for f in json.loads(out)["windows"][0]["features"]]  # the JSON keeps real names
