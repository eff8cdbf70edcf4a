"""The programs' flags are parsed and checked before TensorFlow or Keras is imported."""

import re
import subprocess
import sys

import pytest
from absl import app
from absl import flags

from bert_keras.finetuning.flags import CHECKPOINT_FLAGS
from bert_keras.finetuning.flags import check_flags
from bert_keras.finetuning.flags import define_flags
from bert_keras.finetuning.flags import run_steps
from tests.programs import run_module

REQUIRED = ["--data_dir=d", "--init_checkpoint=c", "--output_dir=o"]


@pytest.mark.parametrize(
    "program", ["tasks.classify", "tasks.tag", "tasks.multiple_choice", "tasks.squad"]
)
def test_programs_and_their_flags_import_no_tensorflow_or_keras(program):
    heavy = ("tensorflow", "keras", "jax", "torch", "tensorflow_text")
    code = (
        "import sys\n"
        f"import bert_keras.finetuning.flags, {program}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


FINE_TUNING_FLAGS = ["data_dir", "init_checkpoint", "do_train", "do_eval", "train_batch_size"]


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "program, shared",
    [
        ("tasks.classify", FINE_TUNING_FLAGS),
        ("tasks.tag", FINE_TUNING_FLAGS),
        ("tasks.multiple_choice", FINE_TUNING_FLAGS),
        ("tasks.squad", []),
        ("tasks.pretrain", []),
    ],
)
def test_a_programs_help_lists_the_flags_it_shares_with_other_programs(program, shared):
    # Defined for it by bert_keras.finetuning.flags and bert_keras.training.execution.
    completed = run_module(program, "--help")  # absl ends it with status 1
    assert "Traceback" not in completed.stderr, completed.stderr
    listed = set(re.findall(r"^ +--(?:\[no\])?(\w+)", completed.stdout, re.MULTILINE))
    expected = {"distribution", "jit_compile", "mixed_precision", *shared}
    assert expected <= listed, sorted(expected - listed)


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "program, argument",
    [
        ("tasks.classify", "--vocab_file=vocab.txt"),
        ("tasks.tag", "--bert_config_file=bert_config.json"),
        ("tasks.multiple_choice", "--nodo_lower_case"),
        ("tasks.squad", "--do_lower_case=False"),
    ],
)
def test_the_originals_checkpoint_flags_are_named_with_what_replaces_them(program, argument):
    completed = run_module(program, *REQUIRED, argument)
    name = argument.removeprefix("--").removeprefix("no").split("=")[0]
    assert completed.returncode == 1
    assert completed.stderr.splitlines()[-1] == (
        f"{program.split('.')[1]}: --{name} is a flag of the original program, not of this "
        f"one: {CHECKPOINT_FLAGS[name]}"
    )


def test_public_names_still_import_from_the_package():
    code = "from bert_keras import BertBackbone, BertClassifier; print(BertClassifier.__name__)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.stdout.strip() == "BertClassifier", completed.stderr


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--bogus"], "Unknown command line flag 'bogus'"),
        (
            ["--task_name=SST-2", "--do_train", *REQUIRED, "--warmup_proportion=2"],
            "--warmup_proportion must be in [0, 1], got 2.0",
        ),
        (
            ["--task_name=SST-2", "--do_train", "--data_dir=d", "--output_dir=o"],
            "--init_checkpoint is required",
        ),
        (
            [
                "--task_name=SST-2",
                "--do_train",
                *REQUIRED,
                "--mesh_shape=2,²",
            ],  # a digit to isdigit, not to int
            "--mesh_shape takes device counts such as 2,4.",
        ),
    ],
)
def test_bad_flags_fail_naming_the_flag(arguments, message):
    completed = subprocess.run(
        [sys.executable, "-m", "tasks.classify", *arguments],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert completed.returncode != 0 and message in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--do_eval", "--eval_batch_size=0"], "--eval_batch_size must be positive, got 0."),
        (["--do_train", "--num_train_epochs=0"], "--num_train_epochs must be positive, got 0.0."),
        (["--do_train", "--train_limit=0"], "--train_limit must be positive, got 0."),
        (["--do_train", "--max_seq_length=2"], "--max_seq_length must be at least 3, got 2."),
        (["--do_train", "--learning_rate=0"], "--learning_rate must be positive, got 0.0."),
        (["--do_train", "--learning_rate=-1e-5"], "--learning_rate must be positive, got -1e-05."),
        (["--do_train", "--learning_rate=nan"], "--learning_rate must be positive, got nan."),
    ],
)
def test_check_flags_names_the_value_out_of_range(arguments, message):
    flag_values = flags.FlagValues()
    program_flags = define_flags(flag_values)
    flag_values(["program", *REQUIRED, *arguments])
    with pytest.raises(app.UsageError, match=message.replace(".", r"\.").replace("[", r"\[")):
        check_flags(program_flags)


def test_an_output_dir_that_is_a_file_is_a_usage_error(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasks.classify",
            "--task_name=SST-2",
            "--do_train",
            "--data_dir=d",
            "--init_checkpoint=c",
            f"--output_dir={notes}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        completed.returncode != 0
        and f"{notes} cannot be made: {notes} is a file" in completed.stderr
    )
    assert "Traceback" not in completed.stderr and notes.read_text() == "mine"


def test_a_batch_the_devices_cannot_share_is_a_usage_error_before_training(tmp_path):
    from bert_keras.training.data_parallel import DataParallel

    class TwoDeviceRun:
        replicas = DataParallel("none")
        replicas.num_replicas = 2

        def __init__(self, **arguments):
            pass

        def train(self, **arguments):
            raise AssertionError("trained")

    flag_values = flags.FlagValues()
    program_flags = define_flags(flag_values)
    output_dir = f"--output_dir={tmp_path / 'out'}"
    flag_values(
        [
            "program",
            "--data_dir=d",
            "--init_checkpoint=c",
            output_dir,
            "--do_train",
            "--train_batch_size=3",
        ]
    )
    with pytest.raises(
        app.UsageError, match="train_batch_size is 3 but must be a multiple of the 2"
    ):
        run_steps(TwoDeviceRun, program_flags)
