"""A model version's feature transform: what it is and how the parity-skew check finds it.

A transform turns raw request `inputs` records into model `features` records: a list
of dicts in, a list of dicts out, one per row and in order. The skew detector re-runs
the version's training transform on the raw inputs that serving logged and compares
its output with the features that serving logged; a difference is serving skew.

A version names its transform by import path, in a spec stored with the version
(`driftline baseline --transform package.module:name`; the bundled worker does the
same for its credit-default transform): ``{"import": "package.module:name", ...}``.
``name`` is a function of the records, or a class whose ``from_dict(spec)`` builds an
object with such an ``apply`` method (a transform with fitted settings keeps them in
the rest of the spec).

The store is input, not code: importing a module runs it, so only allowed paths are ever
imported. Allowed are the bundled worker's transform and every ``module:name`` an installed
package registers under the entry-point group ``driftline.transforms``; any other path is
refused (TransformNotAllowed) before anything is imported.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, Sequence

Transform = Callable[[Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]]
IMPORT_KEY = "import"
ENTRY_POINT_GROUP = "driftline.transforms"
# The bundled worker's transform (also registered in pyproject.toml; named here so a checkout
# whose package metadata is stale still evaluates its own model).
BUNDLED_TRANSFORM = "driftline.worker.feature_transform:FeatureTransform"


class TransformNotAllowed(ValueError):
    """A stored or given transform path that is neither bundled nor registered as an entry point."""


def allowed_transforms() -> frozenset[str]:
    """The import paths that may be loaded: the bundled transform and the registered entry points."""
    registered = {f"{ep.module}:{ep.attr}" for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.attr}
    return frozenset({BUNDLED_TRANSFORM, *registered})


def check_allowed(target: str) -> None:
    """Raise TransformNotAllowed naming `target` unless it is on the allow-list."""
    if target not in allowed_transforms():
        raise TransformNotAllowed(
            f"transform {target!r} is not an allowed transform: only {BUNDLED_TRANSFORM!r} and the paths "
            f"installed packages register under the entry-point group {ENTRY_POINT_GROUP!r} are imported "
            "(docs/detectors.md, \"Skew: your feature transform\")")


def import_path(obj: Any) -> str:
    """The "package.module:name" of a function or class, as a spec stores it."""
    return f"{obj.__module__}:{obj.__qualname__}"


def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"transform {target!r}: expected an import path 'package.module:name'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def load_transform(spec: Mapping[str, Any] | None) -> Transform | None:
    """The transform a stored spec names; None without one (then parity cannot be judged).

    A spec without an import path was stored before transforms were named that way: no transform.
    Raises TransformNotAllowed (before importing anything) for a path off the allow-list, and
    ImportError, AttributeError or ValueError when the named transform cannot be loaded.
    """
    if not spec or spec.get(IMPORT_KEY) is None:
        return None
    target = spec[IMPORT_KEY]
    if not isinstance(target, str):
        raise ValueError(f"transform spec: {IMPORT_KEY!r} must be a string 'package.module:name'")
    check_allowed(target)
    obj = _resolve(target)
    if isinstance(obj, type):
        if not callable(getattr(obj, "from_dict", None)):
            raise ValueError(f"transform {target!r} is a class without a from_dict(spec) constructor")
        obj = getattr(obj, "from_dict")(spec)  # checked callable above
    apply = getattr(obj, "apply", None)
    if callable(apply):
        return apply
    if callable(obj):
        return obj
    raise ValueError(f"transform {target!r} is neither a function of records nor has an apply method")


def transform_spec(target: str) -> dict[str, Any]:
    """The spec of the function or class at `target` ("package.module:name"), checked by loading it."""
    spec = {IMPORT_KEY: target}
    load_transform(spec)
    return spec
