"""What driftline writes is its owner's only: files 0600, folders 0700, whatever the umask."""
from __future__ import annotations

import os
import stat

import pytest

from driftline.private_files import open_private, private_dir, touch_private
from driftline.store import db as store_db


@pytest.fixture(autouse=True)
def umask_022():
    """The usual umask, under which plain open()/mkdir() give 0644/0755."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path) -> int:  # noqa: ANN001
    return stat.S_IMODE(os.stat(path).st_mode)


def test_private_dir_creates_every_missing_folder_0700_and_leaves_existing_ones(tmp_path):
    (tmp_path / "shared").mkdir(mode=0o755)
    created = private_dir(tmp_path / "shared" / "home" / "models")
    assert (mode(tmp_path / "shared"), mode(tmp_path / "shared" / "home"), mode(created)) == (0o755, 0o700, 0o700)
    assert private_dir(created) == created  # idempotent


def test_open_private_creates_0600_and_tightens_a_file_it_rewrites(tmp_path):
    with open_private(tmp_path / "new.bin") as fh:
        fh.write(b"x")
    assert mode(tmp_path / "new.bin") == 0o600
    with pytest.raises(FileExistsError):  # "x" by default: never overwrites
        open_private(tmp_path / "new.bin")
    loose = tmp_path / "broker.log"
    loose.write_text("earlier run\n")
    assert mode(loose) == 0o644
    with open_private(loose, "ab") as fh:
        fh.write(b"more\n")
    assert mode(loose) == 0o600 and loose.read_text() == "earlier run\nmore\n"
    assert touch_private(tmp_path / "empty") and not touch_private(tmp_path / "empty")
    assert mode(tmp_path / "empty") == 0o600


def test_a_new_sqlite_store_its_wal_and_its_folder_are_private(tmp_path):
    path = tmp_path / "home" / "driftline.db"
    url = f"sqlite:///{path}"
    try:
        store_db.upgrade(url)
        with store_db.get_engine(url).connect() as conn:  # WAL mode: -wal and -shm exist once it reads
            conn.exec_driver_sql("SELECT count(*) FROM alembic_version")
            files = {p.name: mode(p) for p in path.parent.iterdir()}
    finally:
        store_db.dispose_engines()
    assert mode(path.parent) == 0o700
    assert files == {"driftline.db": 0o600, "driftline.db-wal": 0o600, "driftline.db-shm": 0o600}


def test_the_scenario_settings_up_writes_beside_the_store_are_0600(tmp_path):
    from driftline.commands.up import _scenario_config
    from driftline.config import load_settings

    config = tmp_path / "mine.toml"
    config.write_text('slack_webhook_url = "https://hooks.example/secret"\n')
    settings = load_settings(config, home=tmp_path / ".driftline")
    private_dir(settings.home)
    written = _scenario_config(settings, "segment_shift", ("region",))
    assert written.parent == settings.home and "hooks.example/secret" in written.read_text()
    assert mode(written) == 0o600
