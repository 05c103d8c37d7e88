"""`driftline detect` loads only what a run needs: pipelines run it as a command, and imports were half its time.

Checked in fresh processes (what is already imported in the test process says nothing): the import path of a
plain detect, and a whole run of it, must not load the store, the optimiser, Evidently or torch; scipy.stats and
scikit-learn come only with the domain classifier (imported beside the reads, `preload_classifier`).
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd

DETECT_PATH = "import driftline.cli, driftline.commands.detect, driftline.detectors.batch.streamed"
# never needed by a plain detect (no --html, no store, no model)
NEVER = ("evidently", "sqlalchemy", "driftline.store", "torch", "matplotlib")
# needed only by the domain classifier (scikit-learn imports the rest) or a binary model's --label
CLASSIFIER = ("sklearn", "scipy.stats", "scipy.optimize", "scipy.spatial")


def _loaded(code: str) -> list[str]:
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _under(loaded: list[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in packages))


def test_the_detect_import_path_loads_no_optimiser_no_classifier_and_no_store():
    loaded = _loaded(DETECT_PATH)
    assert "driftline.detectors.batch.streamed" in loaded
    assert _under(loaded, NEVER + CLASSIFIER) == []


def test_a_plain_detect_run_loads_nothing_it_does_not_use(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40), "c": rng.choice(["x", "y"], 40)})
    frame.to_csv(tmp_path / "ref.csv", index=False)
    frame.assign(a=frame["a"] + 1).to_csv(tmp_path / "cur.csv", index=False)
    out = tmp_path / "out.json"
    loaded = _loaded("from driftline.cli import main\n"
                     f"try:\n    main(['detect', '--reference', {str(tmp_path / 'ref.csv')!r}, '--current', "
                     f"{str(tmp_path / 'cur.csv')!r}, '--json', {str(out)!r}])\nexcept SystemExit as exc:\n"
                     "    assert not exc.code, exc.code")
    assert json.loads(out.read_text())["windows"][0]["rows"] == 40  # the run did judge the window
    assert _under(loaded, NEVER) == []
