"""`detect` and `baseline` on Spark and Dask: the partitions' summaries, merged, give the single-machine results.

Spark runs in local mode (a JVM from Debian's default-jre-headless) and Dask on a `LocalCluster`; each
is started once per test session (`xdist_group` keeps their tests in one process). The data sets are
split into several partitions on purpose, so the merging across partitions is what is compared.
"""
from __future__ import annotations

import json
import pickle

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.batch.baseline import stream_baseline
from driftline.detectors.batch.frames import detect_frames
from driftline.detectors.batch.streamed import Budget, ProgressHooks
from driftline.detectors.batch.passes import ChunkedTable, EngineTable
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.table_files import iter_table
from driftline.worker.dataset import generate
from driftline.worker.scenarios import SCENARIOS
from tests.support.cli import run_detect
from tests.support.baselines import assert_same

pytestmark = pytest.mark.slow
# a statistic of the registry turned on: the engines' paths measure it as the single machine does
HELLINGER_ON = DriftThresholds.from_mapping({"hellinger": 0.1})


def as_json(result) -> bytes:
    return orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    """The bundled credit data (a reference with labels and a score, shifted current data with timestamps),
    as in-memory frames and as Parquet files of several row groups."""
    rng = np.random.default_rng(3)
    inputs, labels = generate(4_000, 21)
    reference = inputs.assign(label=labels, score=np.clip(0.5 * labels + 0.6 * rng.random(len(labels)), 0, 1))
    shifted, shifted_labels = generate(3_000, 22, population=SCENARIOS["covariate_shift"].population)
    current = shifted.assign(label=shifted_labels, score=rng.random(len(shifted_labels)),
                             ts=pd.date_range("2026-11-01", periods=len(shifted), freq="7min", tz="UTC").astype(str))
    folder = tmp_path_factory.mktemp("engines")
    pq.write_table(pa.Table.from_pandas(reference, preserve_index=False), folder / "ref.parquet", row_group_size=700)
    pq.write_table(pa.Table.from_pandas(current, preserve_index=False), folder / "cur.parquet", row_group_size=600)
    # read back, as the single-machine run reads them
    return pd.read_parquet(folder / "ref.parquet"), pd.read_parquet(folder / "cur.parquet"), folder


@pytest.fixture(scope="session")
def spark():
    from driftline.engines.spark import spark_session

    with spark_session("local[2]") as session:
        session.conf.set("spark.sql.files.maxPartitionBytes", "40000")  # a few row groups per partition
        yield session


@pytest.fixture(scope="session")
def dask_client():
    from driftline.engines.dask import dask_client as start

    with start() as client:
        yield client


@pytest.mark.xdist_group("spark")
def test_spark_gives_the_single_machine_json(credit, spark):
    from driftline.engines.spark import SparkEngine, read_table

    reference, current, folder = credit
    spark_reference = read_table(spark, str(folder / "ref.parquet"), "reference")
    spark_current = read_table(spark, str(folder / "cur.parquet"), "current data")
    assert min(spark_reference.rdd.getNumPartitions(), spark_current.rdd.getNumPartitions()) > 2
    seen = []
    for options in ({}, {"windowing": Windowing(chunk_size=1_000), "judging": Judging(thresholds=HELLINGER_ON),
                         "columns": ColumnRoles(prediction="score", label="label")}):
        expected = detect(reference, current, **options)
        got = detect_frames(spark_reference, spark_current, engine=SparkEngine(spark),
                            hooks=ProgressHooks(on_progress=lambda what, done, total: seen.append((what, done, total))),
                            **options)
        assert as_json(got) == as_json(expected)
        assert any(window["drifted_features"] for window in got["windows"])
    assert all("hellinger" in f["tests"] for w in got["windows"] for f in w["features"])  # the registry's statistic
    assert ("current data", spark_current.rdd.getNumPartitions(), spark_current.rdd.getNumPartitions()) in seen


@pytest.mark.xdist_group("spark")
def test_detect_engine_spark_writes_the_local_json(credit, spark, capfd):
    _, _, folder = credit
    args = ["--reference", str(folder / "ref.parquet"), "--current", str(folder / "cur.parquet"),
            "--chunk-period", "2D", "--timestamp", "ts", "--prediction", "score"]
    code, local, _ = run_detect(args, capfd)
    assert code == 0
    code, on_spark, err = run_detect([*args, "--engine", "spark", "--spark-master", "local[2]"], capfd)
    assert code == 0, err
    assert json.loads(on_spark) == json.loads(local)
    assert "current data" in err and "partitions" in err  # progress, per pass over the partitions


@pytest.mark.xdist_group("dask")
def test_dask_gives_the_single_machine_json(credit, dask_client):
    import dask.dataframe as dd

    from driftline.engines.dask import DaskEngine

    reference, current, _ = credit
    for options in ({"columns": ColumnRoles(label="label", prediction="score", segment_by="region")},
                    {"windowing": Windowing(chunk_period="2D"), "columns": ColumnRoles(timestamp="ts"),
                     "judging": Judging(multivariate=False, thresholds=HELLINGER_ON)}):
        expected = detect(reference, current, **options)
        got = detect_frames(dd.from_pandas(reference, npartitions=4), dd.from_pandas(current, npartitions=3),
                            engine=DaskEngine(dask_client), **options)
        assert as_json(got) == as_json(expected)
    assert all("hellinger" in f["tests"] for w in got["windows"] for f in w["features"])  # the registry's statistic


@pytest.mark.xdist_group("dask")
def test_dask_reads_hive_style_partitions(credit, dask_client, tmp_path):
    from driftline.engines.dask import DaskEngine, read_table

    reference, current, _ = credit
    for frame, name in ((reference, "ref"), (current.drop(columns="ts"), "cur")):
        pq.write_to_dataset(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / name,
                            partition_cols=["region"])
    got = detect_frames(read_table(str(tmp_path / "ref"), "reference"), read_table(str(tmp_path / "cur"), "current"),
                        engine=DaskEngine(dask_client), judging=Judging(multivariate=False))
    # the single-machine run over the same folders (pandas reads the region=.../ folders the same way)
    expected = detect(pd.read_parquet(tmp_path / "ref"), pd.read_parquet(tmp_path / "cur"),
                      judging=Judging(multivariate=False))
    assert "region" in [feature["name"] for feature in got["windows"][0]["features"]]
    assert as_json(got) == as_json(expected)


def test_an_engine_option_the_files_do_not_allow_is_a_clear_error(credit, capfd):
    _, _, folder = credit
    code, _, err = run_detect(["--reference", str(folder / "ref.parquet"), "--current", str(folder / "nope.parquet"),
                               "--engine", "dask", "--in-memory"], capfd)
    assert code != 0 and "--in-memory, --html, --embedding and --text need --engine local" in err


def local_baseline(folder, **options):
    """The single-machine streamed baseline of the reference file (its row groups as chunks)."""
    return stream_baseline(ChunkedTable(iter_table(str(folder / "ref.parquet"), "training", 700), "training data"),
                           **options)


@pytest.mark.xdist_group("spark")
def test_spark_gives_the_single_machine_baseline(credit, spark):
    from driftline.engines.spark import SparkEngine, read_table

    _, _, folder = credit
    options = dict(prediction="score", label="label", segment_columns=["region"])
    table = EngineTable(read_table(spark, str(folder / "ref.parquet"), "reference"), "training data",
                        SparkEngine(spark))
    got, expected = stream_baseline(table, **options), local_baseline(folder, **options)
    assert got.fingerprint == expected.fingerprint and got.segments
    assert_same(got.to_dict(), expected.to_dict())


@pytest.mark.xdist_group("dask")
def test_baseline_engine_dask_stores_the_local_baseline(credit, dask_client, sqlite_url):
    from click.testing import CliRunner
    from sqlalchemy import select

    from driftline.baseline import Baseline
    from driftline.cli import cli
    from driftline.store.db import session_scope
    from driftline.store.models import BaselineRecord

    _, _, folder = credit
    args = ["baseline", "--model", "m", "--file", str(folder / "ref.parquet"), "--prediction", "score",
            "--label", "label", "--db", sqlite_url]
    for version, extra in (("1", ["--batch-rows", "700"]),
                           ("2", ["--engine", "dask", "--scheduler-address", dask_client.scheduler.address])):
        result = CliRunner().invoke(cli, [*args[:3], "--version", version, *args[3:], *extra], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    with session_scope(sqlite_url) as session:
        stored = {r.version: r.summary for r in session.scalars(select(BaselineRecord))}
    assert Baseline.from_dict(stored["2"]).fingerprint == Baseline.from_dict(stored["1"]).fingerprint
    assert_same(stored["2"], stored["1"])


# Dask's Parquet reader takes a column of this name for an unnamed index (driftline.engines.dask.DASK_INDEX_NAME).
DASK_INDEX = "__null_dask_index__"


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory):
    """Parquet files whose columns are named with a backtick and as Dask's unnamed index, a few row groups each."""
    rng = np.random.default_rng(5)
    folder = tmp_path_factory.mktemp("odd_names")
    for name, shift in (("ref", 0.0), ("cur", 0.8)):
        frame = pd.DataFrame({"x": rng.normal(shift, 1, 3_000), "odd`name": rng.normal(shift, 1, 3_000),
                              DASK_INDEX: rng.normal(shift, 1, 3_000)})
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / f"{name}.parquet",
                       row_group_size=500)
    return folder


@pytest.mark.xdist_group("spark")
def test_spark_folds_columns_named_with_a_backtick(odd_names, spark):
    from driftline.engines.spark import SparkEngine, read_table

    reference, current = (read_table(spark, str(odd_names / f"{name}.parquet"), name) for name in ("ref", "cur"))
    expected = detect(pd.read_parquet(odd_names / "ref.parquet"), pd.read_parquet(odd_names / "cur.parquet"))
    got = detect_frames(reference, current, engine=SparkEngine(spark))
    assert [f["name"] for f in got["windows"][0]["features"]] == ["x", "odd`name", DASK_INDEX]
    assert as_json(got) == as_json(expected)


@pytest.mark.xdist_group("dask")
def test_dask_refuses_the_column_it_would_drop_and_folds_a_backtick(odd_names, dask_client, capfd):
    import dask.dataframe as dd

    from driftline.engines.dask import DaskEngine

    code, out, err = run_detect(["--reference", str(odd_names / "ref.parquet"), "--current",
                                 str(odd_names / "cur.parquet"), "--engine", "dask",
                                 "--scheduler-address", dask_client.scheduler.address], capfd)
    assert code != 0 and not out
    assert len(err.strip().splitlines()) == 1 and f"Dask drops the column {DASK_INDEX}" in err, err
    reference, current = (pd.read_parquet(odd_names / f"{name}.parquet").drop(columns=DASK_INDEX)
                          for name in ("ref", "cur"))
    got = detect_frames(dd.from_pandas(reference, npartitions=3), dd.from_pandas(current, npartitions=2),
                        engine=DaskEngine(dask_client))
    assert as_json(got) == as_json(detect(reference, current))


@pytest.mark.xdist_group("dask")
def test_the_local_dask_cluster_listens_on_loopback_only(dask_client):
    import os

    import psutil

    def listening(pid: int) -> list[tuple[str, int]]:
        return [(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections("inet")
                if c.status == psutil.CONN_LISTEN]

    cluster = dask_client.cluster
    scheduler = cluster.scheduler  # in this process: its comm and HTTP (dashboard, worker list, metrics) servers
    comms = [scheduler.address, *scheduler.workers, *(nanny.address for nanny in cluster.workers.values())]
    assert all(address.startswith("tcp://127.0.0.1:") for address in comms), comms
    ports = {scheduler.http_server.port, *(int(address.rsplit(":", 1)[1]) for address in comms)}
    ours = [(ip, port) for ip, port in listening(os.getpid()) if port in ports]
    assert any(port == scheduler.http_server.port for _, port in ours)
    assert {ip for ip, _ in ours} == {"127.0.0.1"}, ours
    for pid in dask_client.run(os.getpid).values():  # the worker processes' own servers
        assert listening(pid) and {ip for ip, _ in listening(pid)} == {"127.0.0.1"}, listening(pid)


def assert_within_bounds(got, expected, path="") -> None:
    """Equal JSON but for floating-point merge order (1e-9 relative): summaries merged per partition, not per chunk."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), path
        for key in expected:
            assert_within_bounds(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), path
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_within_bounds(a, b, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), path
    else:
        assert got == expected, path


def test_partitions_of_a_long_table_send_counts_and_keep_short_columns_exact():
    from driftline.detectors.batch.plan import Plan
    from driftline.detectors.batch.streamed import detect_streamed
    from driftline.detectors.batch.summary import summarize
    from driftline.engines import LocalEngine

    rng = np.random.default_rng(0)

    def table(rows, shift):
        mostly_missing = rng.normal(0, 1, rows)
        mostly_missing[rng.random(rows) < 0.8] = np.nan  # 20% of 6,000: under exact_values, kept by the local run
        return pd.DataFrame({"x": rng.normal(shift, 1, rows), "y": mostly_missing,
                             "c": rng.choice(list("abc"), rows)})

    reference, current = table(1_400, 0.0), table(6_000, 0.3)
    for windowing in (Windowing(), Windowing(chunk_size=2_500)):
        options = dict(budget=Budget(exact_values=1_500, sample_rows=700), judging=Judging(multivariate=False),
                       windowing=windowing)
        got = detect_frames(reference, current, engine=LocalEngine(chunk_rows=900), **options)
        expected = detect_streamed(lambda: (reference.iloc[i:i + 900] for i in range(0, 1_400, 900)),
                                   lambda: (current.iloc[i:i + 900] for i in range(0, 6_000, 900)), **options)
        assert as_json(got) == as_json(expected)
        tests = {f["name"]: f["tests"] for f in got["windows"][0]["features"]}
        assert "max_error" in tests["x"]["ks"] and "max_error" not in tests["y"]["ks"]
    # a reference longer than exact_values: its deciles found exactly, as the single-machine run finds them
    long_reference = table(5_000, 0.0)
    options = dict(budget=Budget(exact_values=1_500, sample_rows=700), judging=Judging(multivariate=False),
                   windowing=Windowing(chunk_size=2_500))
    got = detect_frames(long_reference, current, engine=LocalEngine(chunk_rows=900), **options)
    expected = detect_streamed(lambda: (long_reference.iloc[i:i + 900] for i in range(0, 5_000, 900)),
                               lambda: (current.iloc[i:i + 900] for i in range(0, 6_000, 900)), **options)
    assert_within_bounds(json.loads(as_json(got)), json.loads(as_json(expected)))
    # a partition's summary under a long table's plan: its size does not grow with its rows
    scan = Plan.scan({"x": "numeric", "y": "numeric", "c": "categorical"}, exact_values=1_500, sample_rows=700)
    plan = scan.with_reference(summarize(reference, scan)).for_rows(6_000)
    sizes = [len(pickle.dumps(summarize(table(rows, 0.0), plan, 0))) for rows in (1_000, 1_400)]
    assert sizes[1] < 1.02 * sizes[0]  # kept values would add 40%


@pytest.mark.xdist_group("spark")
def test_spark_at_its_default_memory_folds_two_million_rows_as_the_local_run(spark, tmp_path):
    from driftline.detectors.batch.streamed import detect_streamed
    from driftline.engines.spark import SparkEngine, read_table

    rng = np.random.default_rng(5)
    features = [f"f{i}" for i in range(4)]
    for name, rows, shift in (("ref", 100_000, 0.0), ("cur", 2_000_000, 0.05)):
        pq.write_table(pa.table({f: rng.normal(shift * i, 1.0, rows) for i, f in enumerate(features)}),
                       tmp_path / f"{name}.parquet", row_group_size=250_000)
    options = dict(judging=Judging(multivariate=False))
    expected = detect_streamed(iter_table(str(tmp_path / "ref.parquet"), "reference", 200_000),
                               iter_table(str(tmp_path / "cur.parquet"), "current", 200_000), **options)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16m")  # partitions of 250,000 rows, not the fixture's
    try:
        current = read_table(spark, str(tmp_path / "cur.parquet"), "current data")
        assert current.rdd.getNumPartitions() > 1
        got = detect_frames(read_table(spark, str(tmp_path / "ref.parquet"), "reference"), current,
                            engine=SparkEngine(spark), **options)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", "40000")
    assert got["windows"][0]["rows"] == 2_000_000
    assert all("max_error" in f["tests"]["ks"] for f in got["windows"][0]["features"])  # the reported bound
    assert_within_bounds(json.loads(as_json(got)), json.loads(as_json(expected)))


def test_a_failed_spark_job_is_one_line_naming_what_to_change():
    pytest.importorskip("pyspark")
    from driftline.engines.spark import _failed

    out_of_memory = RuntimeError("An error occurred while calling o93.collectToPython.\n: org.apache.spark."
                                 "SparkException: Job aborted due to stage failure: Task 2 in stage 4.0 failed 1 times"
                                 "\njava.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays")
    message = str(_failed(out_of_memory, "current data"))
    assert "out of memory" in message and "spark.driver.memory" in message and "\n" not in message
    worker = RuntimeError("Traceback (most recent call last):\n  File ...\ndriftline.errors.UserError: the current "
                          "data has no column x\n")
    assert str(_failed(worker, "current data")) == "the current data has no column x"
    class JvmGone(Exception):
        def __str__(self):  # py4j asks the JVM for the message
            raise ConnectionRefusedError("the JVM is gone")

    assert "out of memory" in str(_failed(JvmGone(), "current data"))
    other = str(_failed(RuntimeError("An error occurred while calling o1.collect.\n: java.io.IOException: disk full"),
                        "reference"))
    assert other == "Spark failed reading the reference: java.io.IOException: disk full"
