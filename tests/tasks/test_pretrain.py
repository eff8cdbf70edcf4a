"""python -m tasks.pretrain: killed with SIGKILL and started again, it continues where it was."""

import os
import signal
import subprocess
import sys
import time

import pytest
from absl import app
from absl import flags

from bert_keras.pretraining.pretraining_run import PretrainingConfig
from bert_keras.pretraining.pretraining_run import PretrainingRun
from bert_keras.pretraining.pretraining_run import resolve_backbone_config
from bert_keras.training.history_records import read_history
from tasks import pretrain
from tests.pretraining.synthetic_records import write_bert_config
from tests.pretraining.synthetic_records import write_records

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_TRAIN_STEPS, INTERVAL = 240, 20


def run_main(*arguments):
    """Parses `arguments` as the program's flags and runs main in this process."""
    flags.FLAGS.unparse_flags()
    argv = flags.FLAGS(["pretrain", *arguments])
    try:
        pretrain.main(argv)
    finally:
        flags.FLAGS.unparse_flags()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    write_records(directory / "records.tfrecord", 64)
    return str(directory / "*.tfrecord")


@pytest.fixture(scope="module")
def bert_config_file(tmp_path_factory):
    return write_bert_config(tmp_path_factory.mktemp("config") / "bert_config.json")


def program_flags(records, bert_config_file, output_dir):
    return [
        f"--input_file={records}",
        f"--output_dir={output_dir}",
        f"--bert_config_file={bert_config_file}",
        "--max_seq_length=16",
        "--max_predictions_per_seq=3",
        "--train_batch_size=4",
        f"--num_train_steps={NUM_TRAIN_STEPS}",
        "--num_warmup_steps=10",
        "--learning_rate=1e-3",
        f"--save_checkpoints_steps={INTERVAL}",
        "--keep_checkpoint_max=3",
    ]


def checkpoint_steps(output_dir):
    directory = os.path.join(output_dir, "checkpoints")
    if not os.path.isdir(directory):
        return []
    return sorted(
        int(name[5:13])
        for name in os.listdir(directory)
        if name.startswith("ckpt-") and name.endswith(".json") and ".partial" not in name
    )


@pytest.mark.large
def test_a_killed_run_continues_from_its_last_checkpoint(records, bert_config_file, tmp_path):
    output_dir = str(tmp_path / "run")
    command = [
        sys.executable,
        "-m",
        "tasks.pretrain",
        *program_flags(records, bert_config_file, output_dir),
    ]
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(
        command,
        cwd=REPOSITORY,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while process.poll() is None and not checkpoint_steps(output_dir):
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    killed_at = checkpoint_steps(output_dir)[-1]
    assert killed_at < NUM_TRAIN_STEPS
    written_before = read_history(os.path.join(output_dir, "history.jsonl"))
    with open(os.path.join(output_dir, "history.jsonl"), "a") as file:
        file.write('{"step": 9999, "lo')  # as if killed halfway through a line

    resumed = subprocess.run(
        command, cwd=REPOSITORY, env=environment, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"(step {killed_at})" in resumed.stderr  # "Restored .../ckpt-....weights.h5 (step N)."

    history = read_history(os.path.join(output_dir, "history.jsonl"))
    assert history[: len(written_before)] == written_before  # appended, never rewritten
    assert [record["step"] for record in history] == list(
        range(INTERVAL, NUM_TRAIN_STEPS + 1, INTERVAL)
    )
    assert checkpoint_steps(output_dir) == [
        NUM_TRAIN_STEPS - 2 * INTERVAL,
        NUM_TRAIN_STEPS - INTERVAL,
        NUM_TRAIN_STEPS,
    ]
    final = PretrainingRun(
        PretrainingConfig(
            input_file=records,
            output_dir=output_dir,
            backbone_config=resolve_backbone_config(bert_config_file=bert_config_file),
            max_seq_length=16,
            max_predictions_per_seq=3,
            train_batch_size=4,
            num_train_steps=NUM_TRAIN_STEPS,
            num_warmup_steps=10,
            learning_rate=1e-3,
            save_checkpoints_steps=INTERVAL,
            keep_checkpoint_max=3,
        )
    )
    assert final.initial_step == NUM_TRAIN_STEPS
    assert int(final.model.optimizer.iterations) == NUM_TRAIN_STEPS
    assert os.path.isfile(os.path.join(output_dir, "export", "model.safetensors"))


@pytest.mark.parametrize(
    "dropped, message",
    [
        ("--input_file", "--input_file is required"),
        ("--output_dir", "--output_dir is required"),
        (
            "--bert_config_file",
            "One of --preset, --bert_config_file or --init_checkpoint is required",
        ),
    ],
)
def test_missing_flags_are_usage_errors(dropped, message, records, bert_config_file, tmp_path):
    arguments = [
        argument
        for argument in program_flags(records, bert_config_file, tmp_path / "run")
        if not argument.startswith(dropped + "=")
    ]
    with pytest.raises(app.UsageError, match=message):
        run_main(*arguments)


def test_bad_records_are_usage_errors_naming_the_file(records, bert_config_file, tmp_path):
    arguments = program_flags(records, bert_config_file, tmp_path / "run") + ["--max_seq_length=32"]
    with pytest.raises(
        app.UsageError, match="records.tfrecord: records have max_seq_length 16 but 32"
    ):
        run_main(*arguments)
    assert not os.path.exists(tmp_path / "run" / "history.jsonl")


def test_records_past_the_vocab_file_are_a_usage_error_naming_an_id(
    records, bert_config_file, tmp_path
):
    vocabulary = tmp_path / "vocab.txt"  # fits the embeddings; the records' ids reach past 8
    vocabulary.write_text("".join(f"token{index}\n" for index in range(8)))
    arguments = program_flags(records, bert_config_file, tmp_path / "run")
    with pytest.raises(
        app.UsageError,
        match=r"past the 8 tokens of vocab_file .*: they were made with a larger vocab.txt "
        r"\(one holds the id \d+\)\.$",
    ):
        run_main(
            *arguments, f"--vocab_file={vocabulary}", "--num_train_steps=2", "--num_warmup_steps=1"
        )
