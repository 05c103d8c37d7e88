"""The drift statistics' registry: its statistics give the detectors' values, every one is documented, the
documented example runs, and a small run's results are the ones pinned before the statistics moved onto it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from driftline.baseline import compute_baseline
from driftline.detectors.batch.engine import ColumnRoles, Judging, Windowing, detect
from driftline.detectors.families.drift import drift_results
from driftline.detectors.thresholds.decision import DriftThresholds
from driftline.window_state import EventBatch, WindowState

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).parent / "data" / "pinned_drift_run.json"


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)

    def draw(n: int, shift: float) -> pd.DataFrame:
        return pd.DataFrame({
            "income": rng.lognormal(10 + shift, 0.4, n), "rooms": rng.integers(1, 6 + int(3 * shift), n).astype(float),
            "region": rng.choice(["north", "south", "east", "west"], n, p=[0.4 - shift / 4, 0.3, 0.2, 0.1 + shift / 4]),
            "score": rng.beta(2, 5 - 2 * shift, n)})

    return draw(600, 0.0), pd.concat([draw(300, 0.0), draw(300, 0.4)], ignore_index=True)


def pinned_run() -> dict:
    """`detect`'s JSON of two windows and the service's drift results of one window, on small fixed tables."""
    reference, current = _tables()
    batch = detect(reference, current, columns=ColumnRoles(prediction="score"), windowing=Windowing(chunk_size=300),
                   judging=Judging(multivariate=False))
    baseline = compute_baseline(reference.drop(columns="score"), predictions=reference["score"].to_numpy())
    events = [{"event_id": f"e{i}", "ts_ms": i, "features": {k: v for k, v in row.items() if k != "score"},
               "prediction": row["score"], "latency_ms": {"total": 1.0}}
              for i, row in enumerate(current.iloc[300:].to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    service = [r.to_dict() for r in drift_results(baseline, state, DriftThresholds())]
    return json.loads(json.dumps({"detect": batch, "service": service}, default=str))


def test_a_small_run_gives_the_results_pinned_before_the_registry():
    assert pinned_run() == json.loads(PINNED.read_text())


def test_each_statistic_gives_the_values_of_the_detectors_own_pass():
    from driftline.detectors.stats import binned
    from driftline.detectors.stats.registry import STATISTICS

    reference, current = _tables()
    window = current.iloc[300:]
    judging = Judging(thresholds=DriftThresholds.from_mapping({"hellinger": 0.1}), multivariate=False)
    features = {f["name"]: f for f in detect(reference, window, columns=ColumnRoles(prediction="score"),
                                             judging=judging)["windows"][0]["features"]}
    baseline = compute_baseline(reference)
    events = [{"event_id": f"e{i}", "ts_ms": i, "features": row, "latency_ms": {"total": 1.0}}
              for i, row in enumerate(window.to_dict(orient="records"))]
    state = WindowState.empty(baseline).add_batch(EventBatch.from_events(events))
    checked = set()
    for name, feature in features.items():
        profile, own = baseline.profiles[name], state.features[name]
        tests = binned.numeric_tests(profile, own) if feature["kind"] == "numeric" else binned.categorical_tests(
            profile, own)
        for key, statistic in STATISTICS.items():
            if feature["kind"] not in statistic.kinds:
                continue
            raw = statistic.from_samples(reference[name], window[name], feature["kind"])
            if key in feature["tests"]:
                assert raw == pytest.approx(feature["tests"][key][statistic.field], rel=1e-12, abs=1e-15), (name, key)
            assert statistic.from_window(profile, own) == pytest.approx(tests[key][statistic.field], rel=1e-12,
                                                                        abs=1e-15), (name, key)
            checked.add(key)
    assert checked == set(STATISTICS)


def test_every_registered_statistic_is_documented():
    from driftline.detectors.stats.registry import STATISTICS

    configuration = (ROOT / "docs" / "configuration.md").read_text()
    detectors = (ROOT / "docs" / "detectors.md").read_text()
    registry_source = (ROOT / "detectors" / "stats" / "registry.py").read_text()
    for key, statistic in STATISTICS.items():
        assert f"| `{key}` | `{statistic.toml_key}` |" in configuration, key
        assert f"`{key}`" in detectors, key
        assert statistic.why, key
        module = type(statistic).__module__.rsplit(".", 1)[-1]
        assert f"from driftline.detectors.stats import {module}  # noqa: E402,F401\n" in registry_source, module


def test_the_extending_guide_example_registers_a_working_statistic():
    from driftline.detectors.stats import registry

    guide = (ROOT / "docs" / "extending.md").read_text()
    section = guide.split("## Adding a drift statistic", 1)[1].split("\n## ", 1)[0]
    module, registration = re.findall(r"```python\n(.*?)```", section, re.S)
    assert re.fullmatch(r"from driftline\.detectors\.stats import (\w+)  # noqa: E402,F401\n", registration)
    code = compile(module, "docs/extending.md", "exec")
    namespace: dict = {"__name__": "total_variation"}
    try:
        exec(code, namespace)
        statistic = registry.STATISTICS["total_variation"]
        assert statistic.value([40, 30, 20, 10], [25, 25, 25, 25]) == pytest.approx(0.2)
        assert statistic.optional and [s.key for s in registry.effects("categorical")][-1] == "total_variation"
        assert registry.binned_tests([5, 5], [9, 1], "categorical")["total_variation"]["value"] == pytest.approx(0.4)
    finally:
        registry.STATISTICS.pop("total_variation", None)
    taken = type("Taken", (type(registry.STATISTICS["jensenshannon"]),), {"key": "hellinger"})
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(taken)


def test_a_statistic_added_later_is_its_module_and_its_registration_line():
    """Hellinger distance came after the registry: no source file but its own names it, beside the registry's
    import line (the docs and tests may)."""
    sources = [path for folder in ("driftline", "detectors", "scheduler", "alerts", "collector", "worker",
                                   "dashboard", "receiver", "scripts")
               for path in (ROOT / folder).rglob("*.py")]
    naming = {str(path.relative_to(ROOT)): [line for line in path.read_text().splitlines() if "hellinger" in line.lower()]
              for path in sources}
    naming = {path: lines for path, lines in naming.items() if lines}
    assert set(naming) == {"detectors/stats/hellinger.py", "detectors/stats/registry.py"}
    assert naming["detectors/stats/registry.py"] == ["from driftline.detectors.stats import hellinger  # noqa: E402,F401"]
