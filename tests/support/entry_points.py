"""Register feature transforms the way an installed package does: a dist-info folder on sys.path."""
from __future__ import annotations

from pathlib import Path


def register_transforms(folder: Path, monkeypatch, *targets: str) -> None:  # noqa: ANN001 - pytest's MonkeyPatch
    """Make each "module:name" in `targets` an entry point of group driftline.transforms, with `folder`
    on sys.path (importlib.metadata finds installed distributions there, as pip leaves them)."""
    dist = folder / "user_transforms-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-transforms\nVersion: 1.0\n")
    lines = [f"t{i} = {target}" for i, target in enumerate(targets)]
    (dist / "entry_points.txt").write_text("[driftline.transforms]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(folder))
