"""`make demo` (tasks.demo): the derived task, and the whole lifecycle on the default backend."""

import doctest
import os
import re
import subprocess
import sys

import keras
import pytest

from tasks import demo
from tests.programs import program

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

run_program = program("tasks.demo")


def test_docstring_examples_run():
    result = doctest.testmod(demo, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_the_derived_task_reverses_the_words_of_the_sentences_labelled_0(tmp_path):
    sentences = [f"word{i} and then some more words number {i}" for i in range(40)]
    (tmp_path / "corpus.txt").write_text("\n".join(sentences) + "\n")
    directory = demo.derive_task(str(tmp_path / "corpus.txt"), str(tmp_path / "task"), 24)
    rows = {}
    for split in ("train", "dev"):
        lines = (tmp_path / "task" / f"{split}.tsv").read_text().splitlines()
        assert lines[0] == "sentence\tlabel"
        rows[split] = [line.split("\t") for line in lines[1:]]
    assert (len(rows["train"]), len(rows["dev"])) == (24, 6)
    for text, label in rows["train"] + rows["dev"]:
        assert (text in sentences) == (label == "1")
        assert " ".join(reversed(text.split())) in sentences or text in sentences
    labels = [label for _, label in rows["train"]]
    assert 0 < labels.count("1") < len(labels)
    assert directory == str(tmp_path / "task")


@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the whole demo (minutes) runs once, in a subprocess on the tensorflow backend that "
    "`make demo` uses; it is started from the torch suite, the shortest of the three",
)
def test_the_demo_goes_from_raw_text_to_a_served_answer_and_recommendations(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": REPOSITORY}
    run = subprocess.run(
        # Half the corpus and one BERT4Rec epoch: the test checks the steps, not the
        # ranking. Fine-tuning keeps the demo's size, the suite's check of real learning.
        [
            sys.executable,
            "-m",
            "tasks.demo",
            f"--output_dir={tmp_path}",
            "--corpus_megabytes=0.5",
            "--recommendation_epochs=1",
        ],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,  # the other two suites share the cores
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    steps = [line for line in lines if re.match(r"\[\d/8\] ", line)]
    assert [line.split(":")[0] for line in steps] == [
        f"[{number}/8] {name}" for number, (name, _) in enumerate(demo.STEPS, start=1)
    ]
    assert lines[-1].endswith(f"Full log: {tmp_path / 'demo.log'}")
    assert run.stderr == ""  # framework chatter and warnings went to the log
    assert "UserWarning" not in (tmp_path / "demo.log").read_text()
    text = run.stdout
    first, last = map(float, re.search(r"masked-LM loss ([\d.]+) -> ([\d.]+)", text).groups())
    assert last < first - 1.0
    accuracy = float(re.search(r"dev accuracy ([\d.]+)", text).group(1))
    assert accuracy >= demo.MIN_ACCURACY
    if "sentences of SST-2" in text:
        # MiniLM, 1,000 sentences, two epochs: 0.79 to 0.80 measured on each backend;
        # chance is 0.51 +- 0.017 on the 872 dev sentences.
        assert accuracy > 0.72, text
    served = re.search(r'"a gripping, funny film" -> (\S+) \(([\d.]+)\)', text)
    assert served and 0.5 <= float(served.group(2)) <= 1.0
    ours, popular = map(
        float, re.search(r"NDCG@10 ([\d.]+) \(most popular: ([\d.]+)\)", text).groups()
    )
    assert ours > 0 and popular > 0
    for name in ("pretraining", "fine_tuning"):
        assert (tmp_path / name / "history.png").is_file()
    assert (tmp_path / "served_model" / "1" / "saved_model.pb").is_file()
    assert (tmp_path / "recommendation" / "predictions.tsv").is_file()


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--fine_tuning_examples=0"], "--fine_tuning_examples=0: 0 is not a positive integer"),
        (["--fine_tuning_epochs=0"], "--fine_tuning_epochs=0: 0 is not a positive integer"),
        (["--recommendation_epochs=0"], "--recommendation_epochs=0: 0 is not a positive integer"),
        (["--pretraining_steps=0"], "--pretraining_steps=0: 0 is not a positive integer"),
        (["--vocabulary_size=5"], "--vocabulary_size=5: 5 is not integer >= 6"),
        (["--corpus_megabytes=0"], "--corpus_megabytes=0.0: must be a finite number of at"),
        (["--corpus_megabytes=0.001"], "--corpus_megabytes=0.001: must be a finite number"),
        (["--corpus_megabytes=inf"], "--corpus_megabytes=inf: must be a finite number"),
        (["--corpus=/nonexistent.txt"], "--corpus=/nonexistent.txt: no such file"),
        (["--corpus={tmp}"], "--corpus={tmp}: is a directory"),
        (["--corpus={tmp}/empty.txt"], "--corpus={tmp}/empty.txt: the file holds no words"),
        (["--corpus={tmp}/blank.txt"], "--corpus={tmp}/blank.txt: the file holds no words"),
        (
            ["--corpus={tmp}/latin1.txt"],
            "--corpus={tmp}/latin1.txt: line 2 (b'caf\\xe9\\n') is not UTF-8",
        ),
        (
            ["--output_dir={tmp}/empty.txt/demo"],
            "--output_dir={tmp}/empty.txt/demo: {tmp}/empty.txt is a file",
        ),
        (
            ["--output_dir={tmp}/earlier"],
            "--output_dir={tmp}/earlier holds an earlier demo's files (vocab.txt, pretraining)",
        ),
        (["--init_checkpoint=/nonexistent"], "--init_checkpoint=/nonexistent: no such"),
        (
            ["--init_checkpoint={tmp}/earlier"],
            "--init_checkpoint={tmp}/earlier: No checkpoint recognised in {tmp}/earlier",
        ),
        (["--min_accuracy=1.5"], "--min_accuracy=1.5: 1.5 is not a number in the range [0.0, 1.0]"),
        (["--classification_data={tmp}"], "--classification_data={tmp}: no train.tsv or dev.tsv"),
        (["--interactions=/nonexistent.inter"], "--interactions=/nonexistent.inter: no such file"),
        (["--interactions_format=csv"], "--interactions_format=csv needs --interactions"),
        (["surplus"], "Unexpected arguments: ['surplus']"),
    ],
)
def test_bad_flags_are_named_before_any_step(tmp_path, arguments, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    (tmp_path / "latin1.txt").write_bytes(b"tea\ncaf\xe9\n")
    (tmp_path / "earlier" / "pretraining").mkdir(parents=True)
    (tmp_path / "earlier" / "vocab.txt").write_text("[PAD]\n")
    # --output_dir first, so that a bad one in `arguments` replaces it.
    arguments = [f"--output_dir={tmp_path}/demo", *arguments]
    completed = run_program(*(argument.format(tmp=tmp_path) for argument in arguments))
    assert completed.returncode != 0
    assert message.format(tmp=tmp_path) in completed.stderr, completed.stderr[-3000:]
    assert "[1/8]" not in completed.stdout
