"""The layers hold at run time, not only in import statements: importing the detectors, in a fresh process,
loads neither the store nor an I/O library (a detector computes over summaries; test_layers.py reads the
source, this runs it, so an import pulled in through the core is caught too)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

# what a process that only computes detector verdicts must not have loaded
FORBIDDEN = ("sqlalchemy", "alembic", "psycopg", "driftline.store", "kafka", "confluent_kafka", "httpx", "redis",
             "driftline.collector", "driftline.scheduler", "driftline.alerts", "driftline.worker")


def _loaded(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("statement", ["import driftline.detectors", "from driftline import detectors",
                                       "from driftline.detectors import detect, evaluate_window",
                                       "import driftline.detectors.rollout.verdict"])
def test_importing_the_detectors_loads_no_store_and_no_io(statement):
    loaded = _loaded(statement)
    assert "driftline.detectors" in loaded  # the statement did import them
    bad = sorted(m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert bad == [], f"{statement!r} loaded {bad}"


def test_the_settings_do_not_load_the_detectors():
    """The worker reads `[rollouts]` through the settings; that must not import the detectors (nor scipy)."""
    loaded = _loaded("from driftline.config import Settings\nfrom driftline.policies import RolloutPolicy\n"
                     "RolloutPolicy.from_mapping({'windows': 2})")
    assert not [m for m in loaded if m.startswith("driftline.detectors")]
