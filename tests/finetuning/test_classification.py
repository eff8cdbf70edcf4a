"""The classification program's flags.

The real MiniLM checkpoint fine-tuned on SST-2 (../shared/data) is checked by
tests/tasks/test_demo.py, whose fine-tuning step is that run.
"""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--data_dir=x", "--init_checkpoint=y", "--output_dir=z", "--do_train"],
            "--task_name is required",
        ),
        (
            ["--task_name=SST-2", "--data_dir=x", "--init_checkpoint=y", "--output_dir=z"],
            "At least one of --do_train, --do_eval, --do_predict",
        ),
    ],
)
def test_program_flags_are_checked(flags, message):
    completed = subprocess.run(
        [sys.executable, "-m", "tasks.classify", *flags], capture_output=True, text=True
    )
    assert completed.returncode != 0 and message in completed.stderr
