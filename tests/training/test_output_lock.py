"""A second run on a locked output directory is refused; a killed run blocks nothing; a refused
one leaves nothing."""

import os
import signal
import subprocess
import sys

import keras
import pytest

from bert_keras.training.output_lock import OutputDirectoryError
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock

# Takes the lock, says so, and holds it until killed.
_HOLDER = """
import sys, time
from bert_keras.training.output_lock import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path):
    """A child process holding tmp_path/run's lock; killed with SIGKILL at the end."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "run"), "--output_dir=run"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "locked"
        yield process
    finally:
        process.kill()
        process.wait(timeout=60)


def test_a_second_run_is_refused_with_the_running_one_named(tmp_path, holder):
    with pytest.raises(OutputLockedError) as refused:
        with output_lock(tmp_path / "run"):
            pytest.fail("the block ran under another run's lock")
    message = str(refused.value)
    assert f"process {holder.pid} on " in message and "--output_dir=run" in message
    assert str(tmp_path / "run") in message


def test_a_killed_run_leaves_nothing_that_blocks_its_resume(tmp_path, holder):
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=60)
    with output_lock(tmp_path / "run"):
        pass
    with output_lock(tmp_path / "run"):  # released at the end of the block, too
        pass


def test_a_run_that_writes_nothing_leaves_no_directory_behind(tmp_path):
    with output_lock(tmp_path / "refused"):
        assert os.listdir(tmp_path / "refused") == [".bert_keras.lock"]
    assert not os.path.exists(tmp_path / "refused")
    (tmp_path / "given").mkdir()
    with pytest.raises(ValueError):
        with output_lock(tmp_path / "given"):
            raise ValueError("a flag check failed")
    assert os.listdir(tmp_path / "given") == []
    with output_lock(tmp_path / "written"):
        (tmp_path / "written" / "results.json").write_text("{}")
    assert sorted(os.listdir(tmp_path / "written")) == [".bert_keras.lock", "results.json"]
    with output_lock(tmp_path / "written"):  # and the next run locks it as before
        pass


def test_only_process_zero_of_a_distributed_run_takes_the_lock(tmp_path, holder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    with output_lock(tmp_path / "run"):
        pass
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", "0")
    with pytest.raises(OutputLockedError):
        with output_lock(tmp_path / "run"):
            pass


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the lock is taken before any backend work: checked once, under the shortest suite",
)
@pytest.mark.parametrize(
    "program, flags",
    [
        (
            "tasks.classify",
            ["--task_name=SST-2", "--data_dir=d", "--init_checkpoint=c", "--do_train"],
        ),
        ("tasks.squad", ["--init_checkpoint=c", "--train_file=t", "--do_train"]),
        ("tasks.pretrain", ["--input_file=r", "--preset=bert_tiny"]),
        ("tasks.recommend", ["--input_file=r", "--input_format=csv", "--do_train"]),
        ("tasks.demo", []),
    ],
)
def test_every_program_refuses_an_output_directory_another_run_holds(
    tmp_path, holder, program, flags
):
    completed = subprocess.run(
        [sys.executable, "-m", program, f"--output_dir={tmp_path / 'run'}", *flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode != 0
    assert f"is in use by another run (process {holder.pid} on " in completed.stderr, (
        completed.stderr[-2000:]
    )
    assert os.listdir(tmp_path / "run") == [".bert_keras.lock"]


@pytest.mark.parametrize("where", ["notes.txt", "notes.txt/run"])
def test_a_file_in_the_directorys_place_is_named_and_left_alone(tmp_path, where):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(
        OutputDirectoryError, match=f"{tmp_path / where} cannot be made: .*notes.txt is"
    ):
        with output_lock(str(tmp_path / where)):
            pass
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_directory_that_cannot_be_written_in_is_named(tmp_path, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refused)
    with pytest.raises(OutputDirectoryError, match=f"{tmp_path} cannot be written in: Permission"):
        with output_lock(str(tmp_path)):
            pass
