"""The local Runtime's state file (what `nylorun admin --local` reads: moto's endpoint, which takes any credentials)
is this user's alone whatever was at its path before: an old 0644 file, or a symlink planted in a shared folder."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from nylorun_local.runtime import state_file, write_state_file

ENV = {"NYLORUN_TABLE": "tasks", "NYLORUN_PUSH_SECRET": "never-written"}


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NYLORUN_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    return tmp_path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_state_file_left_readable_by_others_is_rewritten_as_this_users_alone(folder: Path) -> None:
    # Given an old state file for port 8123 that everyone may read
    path = state_file(8123)
    path.write_text("{}")
    path.chmod(0o644)
    # When a local Runtime on that port writes its state
    written = write_state_file(8123, "http://127.0.0.1:5999", ENV)
    # Then the file is mode 0600 and holds the new state (never a secret)
    assert written == path and mode(path) == 0o600
    assert json.loads(path.read_text()) == {"awsEndpoint": "http://127.0.0.1:5999", "env": {"NYLORUN_TABLE": "tasks"}}


def test_a_symlink_at_the_state_files_path_is_replaced_never_written_through(folder: Path) -> None:
    # Given a symlink where the state file goes, pointing at another file (someone else's, in a shared folder)
    victim = folder / "victim.txt"
    victim.write_text("keep me")
    victim.chmod(0o644)
    path = state_file(8124)
    path.symlink_to(victim)
    # When a local Runtime on that port writes its state
    write_state_file(8124, "http://127.0.0.1:5999", ENV)
    # Then the file pointed at is untouched, and the path is now a regular file of mode 0600 with the state
    assert victim.read_text() == "keep me" and mode(victim) == 0o644
    assert not path.is_symlink() and stat.S_ISREG(path.lstat().st_mode) and mode(path) == 0o600
    assert json.loads(path.read_text())["awsEndpoint"] == "http://127.0.0.1:5999"
    # And no temporary file is left beside it
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
