"""Files and folders only their owner may read: the store, models, holdouts, logs, generated settings.

What driftline writes holds data (training holdouts, the store's events) or secrets (a
config copy, a broker log), so it is created 0600 (files) and 0700 (folders) whatever the
process umask: the mode is given to the system call that creates it, not set afterwards, so
there is no moment when another user can open it. An existing file driftline writes into again
is made 0600; existing folders keep their mode (a `home` may be a folder the user shares).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import IO

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create `path` and any missing parents 0700 (existing ones keep their mode); returns it."""
    path = Path(path)
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass  # another process created it first: its mode is its creator's
    return path


def open_private(path: str | os.PathLike[str], mode: str = "xb", **kwargs) -> IO:  # noqa: ANN003 - open()'s
    """open(path, mode), the file created 0600 ("x": it must not exist; "a"/"w": created if missing,
    and made 0600 if it existed: what driftline writes into it is as private as a new file's content)."""
    return open(path, mode, opener=_private_opener, **kwargs)


def _private_opener(path: str, flags: int) -> int:
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except PermissionError:
        pass  # another user's file, opened because it lets us write: not ours to change
    return fd


def touch_private(path: str | os.PathLike[str]) -> bool:
    """Create an empty 0600 file unless one exists; True when this call created it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        return False
    return True
