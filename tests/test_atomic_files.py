"""Outputs are written whole or not at all, and their parent directories are created."""

import os

import pytest

from bert_keras.atomic_files import atomic_directory
from bert_keras.atomic_files import atomic_file
from bert_keras.atomic_files import recover_interrupted_writes
from bert_keras.atomic_files import write_text


class Interrupted(Exception):
    pass


def test_a_failed_directory_write_leaves_the_old_directory_and_no_staging(tmp_path):
    target = tmp_path / "export"
    with atomic_directory(target) as staging:
        write_text(os.path.join(staging, "old.txt"), "old")
    with pytest.raises(Interrupted):
        with atomic_directory(target, overwrite=True) as staging:
            write_text(os.path.join(staging, "new.txt"), "new")
            raise Interrupted
    assert sorted(os.listdir(tmp_path)) == ["export"]
    assert os.listdir(target) == ["old.txt"]


def test_the_next_write_removes_what_a_killed_one_left(tmp_path):
    killed = tmp_path / ".1.partial-abc123"  # what `kill -9` in the middle of a write leaves
    killed.mkdir()
    (killed / "variables.data").write_text("half")
    previous = tmp_path / ".1.partial-def456-old"  # killed between the renames: the old output
    previous.mkdir()
    other = tmp_path / ".2.partial-ghi789"  # another destination's
    other.mkdir()
    (previous / "saved_model.pb").write_text("previous")
    with pytest.raises(FileExistsError, match="1 exists and is not empty"):
        with atomic_directory(tmp_path / "1"):  # the previous output is back in place
            pass
    assert sorted(os.listdir(tmp_path)) == [other.name, "1"]
    assert (tmp_path / "1" / "saved_model.pb").read_text() == "previous"
    left = tmp_path / ".1.partial-jkl012-old"  # killed before removing the replaced output
    left.mkdir()
    with atomic_directory(tmp_path / "1", overwrite=True) as staging:
        write_text(os.path.join(staging, "saved_model.pb"), "new")
    assert sorted(os.listdir(tmp_path)) == [other.name, "1"]
    assert (tmp_path / "1" / "saved_model.pb").read_text() == "new"


def test_recovering_a_directory_clears_every_destination_but_live_writers(tmp_path):
    moved_aside = tmp_path / ".1.partial-def456-old"  # killed between the renames
    moved_aside.mkdir()
    (moved_aside / "saved_model.pb").write_text("previous")
    (tmp_path / "2").mkdir()
    (tmp_path / ".2.partial-abc123-old").mkdir()  # killed before removing the replaced output
    (tmp_path / ".3.partial-ghi789").mkdir()  # killed while writing
    live = tmp_path / f".4.partial-{os.getpid()}-jkl012"  # a writer still running
    live.mkdir()

    recover_interrupted_writes(tmp_path)

    assert sorted(os.listdir(tmp_path)) == [live.name, "1", "2"]
    assert (tmp_path / "1" / "saved_model.pb").read_text() == "previous"


def test_two_writers_of_one_directory_never_leave_half_of_it(tmp_path):
    target = tmp_path / "export"
    with pytest.raises(FileExistsError, match="export exists and is not empty"):
        with atomic_directory(target) as staging:
            write_text(os.path.join(staging, "first.txt"), "first")
            with atomic_directory(target) as other:  # another writer, finishing first
                write_text(os.path.join(other, "second.txt"), "second")
            write_text(os.path.join(staging, "first_more.txt"), "first")
    assert os.listdir(target) == ["second.txt"]  # neither replaced without overwrite nor mixed
    assert os.listdir(tmp_path) == ["export"]
    with atomic_directory(target, overwrite=True) as staging:
        with atomic_directory(target, overwrite=True) as other:
            write_text(os.path.join(other, "second.txt"), "second")
        write_text(os.path.join(staging, "third.txt"), "third")
    assert os.listdir(target) == ["third.txt"]
    assert os.listdir(tmp_path) == ["export"]


def test_a_link_to_the_output_is_kept_and_its_target_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "export").mkdir()
    (tmp_path / "runs" / "export" / "old.txt").write_text("old")
    os.symlink(tmp_path / "runs" / "export", tmp_path / "latest")
    with atomic_directory(tmp_path / "latest", overwrite=True) as staging:
        write_text(os.path.join(staging, "new.txt"), "new")
    assert os.path.islink(tmp_path / "latest")
    assert os.listdir(tmp_path / "latest") == ["new.txt"]
    assert sorted(os.listdir(tmp_path)) == ["latest", "runs"]
    assert os.listdir(tmp_path / "runs") == ["export"]


def test_overwrite_replaces_and_refuses_without_it(tmp_path):
    target = tmp_path / "export"
    with atomic_directory(target) as staging:
        write_text(os.path.join(staging, "old.txt"), "old")
    with pytest.raises(FileExistsError, match="export exists and is not empty"):
        with atomic_directory(target):
            pass
    with atomic_directory(target, overwrite=True) as staging:
        write_text(os.path.join(staging, "new.txt"), "new")
    assert os.listdir(target) == ["new.txt"]
    assert sorted(os.listdir(tmp_path)) == ["export"]


def test_a_failed_file_write_keeps_the_old_file_and_removes_the_partial(tmp_path):
    path = tmp_path / "missing" / "parents" / "results.json"
    write_text(path, "old")
    with pytest.raises(Interrupted):
        with atomic_file(path) as temporary:
            with open(temporary, "w") as file:
                file.write("half")
            raise Interrupted
    assert path.read_text() == "old"
    assert os.listdir(path.parent) == ["results.json"]


def test_an_empty_path_or_the_working_directory_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "precious.txt").write_text("kept")
    for destination in ("", ".", str(tmp_path.parent)):
        with pytest.raises(ValueError, match="is empty|holds the working directory"):
            with atomic_directory(destination, overwrite=True) as staging:
                write_text(os.path.join(staging, "config.json"), "{}")
    with pytest.raises(ValueError, match="The output path is empty"):
        write_text("", "{}")
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a directory"):
        write_text(tmp_path, "{}")
    assert sorted(os.listdir(tmp_path)) == ["precious.txt"]
