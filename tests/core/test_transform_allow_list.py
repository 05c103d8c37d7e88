"""Stored transform paths are input: only the bundled transform and registered entry points are imported."""
from __future__ import annotations

import sys

import pytest

from driftline.transform import BUNDLED_TRANSFORM, TransformNotAllowed, allowed_transforms, load_transform
from tests.support.entry_points import register_transforms

# A module whose import alone leaves a trace: importing a stored path runs its code.
HOSTILE = '''
import pathlib
pathlib.Path(__file__).with_name("imported.marker").write_text("ran")
def to_features(records):
    return records
'''


def _hostile_module(tmp_path, monkeypatch, name: str) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{name}.py").write_text(HOSTILE)
    monkeypatch.syspath_prepend(str(code))


def test_a_path_off_the_allow_list_is_refused_naming_it_before_anything_is_imported(tmp_path, monkeypatch):
    _hostile_module(tmp_path, monkeypatch, "hostile_transform_a")
    with pytest.raises(TransformNotAllowed, match="'hostile_transform_a:to_features' is not an allowed transform"):
        load_transform({"import": "hostile_transform_a:to_features"})
    assert not (tmp_path / "code" / "imported.marker").exists()
    assert "hostile_transform_a" not in sys.modules
    for target in ("os:system", "subprocess:run", "driftline.names:name_problem"):
        with pytest.raises(TransformNotAllowed, match=repr(target)):
            load_transform({"import": target})


def test_a_transform_a_package_registers_as_an_entry_point_is_loaded(tmp_path, monkeypatch):
    _hostile_module(tmp_path, monkeypatch, "registered_transform_b")
    register_transforms(tmp_path / "site", monkeypatch, "registered_transform_b:to_features")
    assert "registered_transform_b:to_features" in allowed_transforms()
    assert load_transform({"import": "registered_transform_b:to_features"})([{"x": 1}]) == [{"x": 1}]


def test_the_bundled_transform_is_allowed_with_or_without_package_metadata():
    assert BUNDLED_TRANSFORM in allowed_transforms()
    from driftline.worker.feature_transform import FeatureTransform
    from driftline.transform import import_path

    assert import_path(FeatureTransform) == BUNDLED_TRANSFORM  # what the worker stores is what is allowed
