"""tools/create_pretraining_data.py on a real corpus (installed docstrings)."""

import gzip
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_keras.data import pretraining_corpus
from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.data.pretraining_corpus import progress_path
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_instances import num_predictions
from bert_keras.data.pretraining_records import original_feature_spec
from bert_keras.data.pretraining_records import pretraining_dataset
from bert_keras.training.output_lock import output_file_lock
from tests.programs import program
from tools import create_pretraining_data

# Runs once (tests/conftest.py), under the TensorFlow suite: evens out the suites' ends.
pytestmark = pytest.mark.one_backend("tensorflow")

create_pretraining_data_program = program("tools.create_pretraining_data")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ_LENGTH, PREDICTIONS = 128, 20


def run_tool(*arguments):
    """Parses `arguments` as the program's flags, runs main; returns its exit message."""
    flags.FLAGS.unparse_flags()
    argv = flags.FLAGS(["create_pretraining_data", *arguments])
    try:
        create_pretraining_data.main(argv)
    except SystemExit as exit:
        return str(exit.code)
    finally:
        flags.FLAGS.unparse_flags()
    return None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("corpus") / "docstrings.txt")
    docstring_corpus(path, 300_000)
    return path


def tool_flags(corpus, output, *extra):
    return [
        f"--input_file={corpus}",
        f"--output_file={output}",
        f"--vocab_file={vocab_file()}",
        "--dupe_factor=2",
        "--input_mb_per_shard=0.05",
        *extra,
    ]


@pytest.fixture(scope="module")
def one_worker_output(corpus, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("one_worker") / "examples.tfrecord")
    assert run_tool(*tool_flags(corpus, output, "--num_workers=1")) is None
    return output


def shard_files(output):
    return sorted(tf.io.gfile.glob(output + "-*"))


def parsed_records(output, compression=""):
    spec = original_feature_spec(SEQ_LENGTH, PREDICTIONS)
    dataset = tf.data.TFRecordDataset(shard_files(output), compression_type=compression)
    batches = [tf.io.parse_example(batch, spec) for batch in dataset.batch(4096)]
    return {name: np.concatenate([batch[name].numpy() for batch in batches]) for name in spec}


def test_records_parse_with_the_original_spec(one_worker_output):
    records = parsed_records(one_worker_output)
    assert len(shard_files(one_worker_output)) >= 4
    lengths = records["input_mask"].sum(axis=1)
    assert records["input_ids"].shape == (len(lengths), SEQ_LENGTH)
    assert (records["input_ids"][records["input_mask"] == 0] == 0).all()
    assert (records["segment_ids"][records["input_mask"] == 0] == 0).all()
    assert set(np.unique(records["next_sentence_labels"])) == {0, 1}


def test_statistics_follow_the_original(one_worker_output):
    records = parsed_records(one_worker_output)
    lengths = records["input_mask"].sum(axis=1)
    weights = records["masked_lm_weights"]
    # Exactly the original's count per example; about 0.15 of the non-special tokens.
    expected = num_predictions(lengths, InstanceOptions())
    np.testing.assert_array_equal(weights.sum(axis=1), expected)
    assert 0.148 < weights.sum() / (lengths - 3).sum() < 0.16
    real = weights > 0
    rows = np.nonzero(real)[0]
    shown = records["input_ids"][rows, records["masked_lm_positions"][real]]
    labels = records["masked_lm_ids"][real]
    mask_id = 103
    assert abs((shown == mask_id).mean() - 0.8) < 0.01
    assert abs((shown == labels).mean() - 0.1) < 0.01
    assert abs(((shown != mask_id) & (shown != labels)).mean() - 0.1) < 0.01
    assert not np.isin(labels, [101, 102]).any()  # never [CLS] or [SEP]
    # Half the pairs are random, more where chunks are single sentences.
    assert 0.5 < records["next_sentence_labels"].mean() < 0.6


def test_same_bytes_with_one_or_two_workers(corpus, one_worker_output, tmp_path):
    output = str(tmp_path / "examples.tfrecord")
    assert run_tool(*tool_flags(corpus, output, "--num_workers=2")) is None
    ours, reference = shard_files(output), shard_files(one_worker_output)
    assert [os.path.basename(path) for path in ours] == [
        os.path.basename(path) for path in reference
    ]
    for path, reference_path in zip(ours, reference):
        with open(path, "rb") as file, open(reference_path, "rb") as reference_file:
            assert file.read() == reference_file.read(), path


def test_gzip_output_reads_back(corpus, tmp_path):
    output = str(tmp_path / "examples.tfrecord")
    assert run_tool(*tool_flags(corpus, output, "--compression=gzip", "--dupe_factor=1")) is None
    records = parsed_records(output, compression="GZIP")
    assert len(records["input_ids"]) > 100


def recorded_shards(progress):
    """Shard indexes a progress log records (its last line may be cut by a kill)."""
    indexes = []
    for line in open(progress).read().splitlines()[1:]:
        try:
            indexes.append(json.loads(line)["shard"])
        except json.JSONDecodeError:
            pass
    return indexes


@pytest.mark.large
def test_a_killed_run_resumes_where_it_stopped(corpus, one_worker_output, tmp_path):
    output = str(tmp_path / "examples.tfrecord")
    command = [
        sys.executable,
        "-m",
        "tools.create_pretraining_data",
        *tool_flags(corpus, output, "--num_workers=1", "--input_mb_per_shard=0.01"),
    ]
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(
        command,
        cwd=REPOSITORY,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    progress = progress_path(output)
    while process.poll() is None:
        if os.path.exists(progress) and len(open(progress).read().splitlines()) >= 3:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    assert process.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    # Shards the log records as finished; one renamed just before the kill but
    # not yet logged may be written again, with the same bytes (checked below).
    finished = {
        f"{output}-{index:05d}": os.stat(f"{output}-{index:05d}").st_mtime_ns
        for index in recorded_shards(progress)
    }
    assert finished
    subprocess.run(command, cwd=REPOSITORY, env=environment, check=True, capture_output=True)
    for path, modified in finished.items():
        assert os.stat(path).st_mtime_ns == modified, f"{path} was written again"
    uninterrupted = str(tmp_path / "uninterrupted.tfrecord")
    assert (
        run_tool(*tool_flags(corpus, uninterrupted, "--num_workers=1", "--input_mb_per_shard=0.01"))
        is None
    )
    ours, reference = shard_files(output), shard_files(uninterrupted)
    assert len(ours) == len(reference) > len(finished)
    for path, reference_path in zip(ours, reference):
        with open(path, "rb") as file, open(reference_path, "rb") as reference_file:
            assert file.read() == reference_file.read(), path
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".incomplete")]
    assert sorted(tf.io.gfile.glob(output + "*")) == ours


class _Interrupted(Exception):
    pass


def run_interrupted(monkeypatch, *arguments, finished_shards=2):
    """Runs the tool in this process and stops it once `finished_shards` are logged."""
    add = pretraining_corpus.ProgressLog.add

    def add_then_interrupt(log, index, statistics):
        add(log, index, statistics)
        if len(log.finished) == finished_shards:
            raise _Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(pretraining_corpus.ProgressLog, "add", add_then_interrupt)
        with pytest.raises(_Interrupted):
            run_tool(*arguments)


def test_the_output_glob_reads_only_shards_after_an_interrupted_run_resumes(
    corpus, tmp_path, monkeypatch
):
    # Readers take the output as OUTPUT_FILE* (the original's README, Model
    # Garden's readers): whatever else matches that glob breaks them.
    output = str(tmp_path / "examples.tfrecord")
    arguments = tool_flags(corpus, output, "--num_workers=1", "--dupe_factor=1")
    run_interrupted(monkeypatch, *arguments)
    assert len(recorded_shards(progress_path(output))) == 2
    assert sorted(tf.io.gfile.glob(output + "*")) == shard_files(output)
    # The shards written so far look whole, but are not all of the output.
    with pytest.raises(InputFileError, match="belongs to records that create_pretraining_data"):
        pretraining_dataset(output + "*", SEQ_LENGTH, PREDICTIONS, batch_size=256)

    assert run_tool(*arguments) is None
    shards = shard_files(output)
    assert len(shards) >= 4
    assert sorted(tf.io.gfile.glob(output + "*")) == shards
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path) for path in shards]
    batches = pretraining_dataset(
        output + "*", SEQ_LENGTH, PREDICTIONS, batch_size=256, drop_remainder=False
    )
    examples = sum(int(labels["next_sentence_labels"].shape[0]) for _, labels in batches)
    assert examples == len(parsed_records(output)["input_ids"])


def test_a_second_run_on_the_same_output_is_refused(corpus, tmp_path):
    output = str(tmp_path / "examples.tfrecord")
    arguments = tool_flags(corpus, output, "--num_workers=1", "--dupe_factor=1")
    with output_file_lock(output):  # as a run writing it holds it
        message = run_tool(*arguments)
        assert "is in use by another run (process" in message
        assert os.listdir(tmp_path) == [".examples.tfrecord.lock"]
        # As a later name of several, too.
        both = f"{tmp_path / 'another.tfrecord'},{output}"
        message = run_tool(*tool_flags(corpus, both, "--num_workers=1", "--dupe_factor=1"))
        assert "is in use by another run (process" in message
        assert os.listdir(tmp_path) == [".examples.tfrecord.lock"]
    other = str(tmp_path / "other.tfrecord")  # another name in the directory is free
    assert run_tool(*tool_flags(corpus, other, "--num_workers=1", "--dupe_factor=1")) is None
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]


def test_missing_output_directories_are_created(tmp_path):
    corpus = write(tmp_path / "corpus.txt", b"One sentence.\nTwo sentences.\n\nThree.\nFour.\n")
    output = tmp_path / "new" / "deeper" / "examples.tfrecord"
    arguments = tool_flags(corpus, output, "--num_workers=1", "--max_seq_length=16")
    assert run_tool(*arguments, "--max_predictions_per_seq=2") is None
    assert os.listdir(output.parent) == ["examples.tfrecord-00000"]


@pytest.mark.large
def test_the_program_imports_neither_jax_nor_torch(corpus, tmp_path):
    # Its main process runs TensorFlow ops only: JAX (imported by TensorFlow
    # Lite where installed) would add 110 MB, a Keras backend's torch more.
    output = str(tmp_path / "examples.tfrecord")
    argv = [
        "create_pretraining_data",
        *tool_flags(corpus, output, "--num_workers=1", "--dupe_factor=1"),
    ]
    script = (
        f"import runpy, sys\nsys.argv = {argv!r}\n"
        "try:\n    runpy.run_module('tools.create_pretraining_data', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print(sorted(name for name in ('jax', 'torch') if sys.modules.get(name) is not None))\n"
    )
    environment = {**os.environ, "KERAS_BACKEND": "torch", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines()[-1] == "[]"
    assert shard_files(output)


def test_other_flags_do_not_mix_with_finished_shards(corpus, tmp_path, monkeypatch):
    output = str(tmp_path / "examples.tfrecord")
    # An unfinished run: a finished one leaves no progress log to resume.
    run_interrupted(monkeypatch, *tool_flags(corpus, output, "--dupe_factor=1", "--num_workers=1"))
    message = run_tool(*tool_flags(corpus, output, "--dupe_factor=1", "--masked_lm_prob=0.2"))
    assert "other settings (masked_lm_prob: 0.15 then, 0.2 now)" in message


def test_an_input_edited_since_the_interrupted_run_is_not_resumed(corpus, tmp_path, monkeypatch):
    edited = tmp_path / "corpus.txt"
    text = open(corpus, encoding="utf-8").read()
    edited.write_text(text, encoding="utf-8")
    output = str(tmp_path / "out" / "examples.tfrecord")
    arguments = tool_flags(str(edited), output, "--dupe_factor=1", "--num_workers=1")
    run_interrupted(monkeypatch, *arguments)
    edited.write_text(text.replace("the", "tha"), encoding="utf-8")  # the same size
    assert "other settings (input_files: " in run_tool(*arguments)


def test_a_finished_output_is_replaced_whole_by_the_next_run(corpus, tmp_path, caplog):
    output = str(tmp_path / "examples.tfrecord")
    arguments = tool_flags(corpus, output, "--dupe_factor=1", "--num_workers=1")
    assert run_tool(*arguments) is None
    shards = shard_files(output)
    assert len(shards) >= 4
    # Fewer, larger shards: the earlier run's other shards must not stay beside them.
    with caplog.at_level(logging.WARNING):
        assert run_tool(*arguments, "--input_mb_per_shard=1") is None
    assert os.listdir(tmp_path) == ["examples.tfrecord-00000"]
    assert (
        f"Deleted {len(shards) - 1} shards an earlier run left under these names: "
        f"{shards[1]}, {shards[2]}, {shards[3]}"
    ) in caplog.text


def write(path, data):
    with open(path, "wb") as file:
        file.write(data)
    return str(path)


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--max_seq_length=3"], "--max_seq_length is 3 but must be at least 5"),
        (["--masked_lm_prob=-0.1"], "--masked_lm_prob is -0.1 but must be in [0, 1]"),
        (["--masked_lm_prob=1.5"], "--masked_lm_prob is 1.5 but must be in [0, 1]"),
        (["--vocab_file=/no/vocab.txt"], "--vocab_file: '/no/vocab.txt' does not exist"),
        (["--input_file=/no/corpus.txt"], "--input_file: no file matches '/no/corpus.txt'"),
        (["--num_workers=0"], "--num_workers is 0 but must be at least 1"),
    ],
)
def test_bad_flags_fail_clearly_and_write_nothing(extra, expected, tmp_path):
    corpus = write(tmp_path / "corpus.txt", b"One sentence.\nTwo sentences.\n\nThree.\nFour.\n")
    output = tmp_path / "out" / "examples.tfrecord"
    output.parent.mkdir()
    message = run_tool(*tool_flags(corpus, output), *extra)
    assert expected in message
    assert os.listdir(output.parent) == []


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        (
            "--vocab_file",
            "{tmp}",
            "--vocab_file: {tmp} is a directory; give the vocabulary file in it, "
            "e.g. '{tmp}/vocab.txt'.",
        ),
        (
            "--input_file",
            "{tmp}",
            "--input_file: {tmp} is a directory; give its files, e.g. '{tmp}/*.txt'.",
        ),
        (
            "--input_file",
            "{tmp}/c*",
            "--input_file: {tmp}/corpora is a directory; give its files, e.g. '{tmp}/corpora/*.txt'.",
        ),
    ],
    ids=["vocab directory", "input directory", "input glob matching a directory"],
)
def test_a_directory_for_a_file_is_a_one_line_error_and_writes_nothing(
    flag, value, expected, tmp_path
):
    corpus = write(tmp_path / "corpus.txt", b"One sentence.\nTwo sentences.\n\nThree.\nFour.\n")
    (tmp_path / "corpora").mkdir()
    output = tmp_path / "out" / "examples.tfrecord"
    # The flag given last overrides tool_flags' value.
    completed = create_pretraining_data_program(
        *tool_flags(corpus, output), f"{flag}={value.format(tmp=tmp_path)}"
    )
    assert completed.returncode == 1
    last_line = completed.stderr.strip().splitlines()[-1]
    assert last_line == f"create_pretraining_data: {expected.format(tmp=tmp_path)}"
    assert "Traceback" not in completed.stderr
    assert sorted(os.listdir(tmp_path)) == ["corpora", "corpus.txt"]


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            "{tmp}/out/",
            "'{tmp}/out/' names a directory; give a file name in it, "
            "e.g. '{tmp}/out/examples.tfrecord'.",
        ),
        (
            "{tmp}/corpus.txt/examples.tfrecord",
            "{tmp}/corpus.txt is a file, so '{tmp}/corpus.txt/examples.tfrecord' cannot be "
            "written; give a path in a directory.",
        ),
        (
            "{tmp}/corpus.txt/new/examples.tfrecord",
            "{tmp}/corpus.txt is a file, so '{tmp}/corpus.txt/new/examples.tfrecord' cannot be "
            "written; give a path in a directory.",
        ),
        # Not writable, or (root) no directory can be made there.
        ("/proc/no_such_process/examples.tfrecord", "/proc"),
    ],
    ids=["directory", "file as parent", "file as grandparent", "proc"],
)
def test_an_unusable_output_file_is_a_one_line_error_before_any_work(output, expected, tmp_path):
    corpus = write(tmp_path / "corpus.txt", b"One sentence.\nTwo sentences.\n\nThree.\nFour.\n")
    (tmp_path / "out").mkdir()
    output, expected = output.format(tmp=tmp_path), expected.format(tmp=tmp_path)
    message = run_tool(*tool_flags(corpus, output))
    assert message.startswith("create_pretraining_data: --output_file: ")
    assert expected in message
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "out"]
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize(
    "pattern, output, matched, what",
    [
        ("*", "examples.tfrecord", "examples.tfrecord-00000", "its records"),
        ("*.tfrecord*", "examples.tfrecord", "examples.tfrecord-00000", "its records"),
        ("*.lock", "examples.tfrecord", ".examples.tfrecord.lock", "its bookkeeping"),
        ("examples.tfrecord-00000", "examples.tfrecord", "examples.tfrecord-00000", "its records"),
    ],
    ids=["directory glob", "shards glob", "lock glob", "a shard"],
)
def test_an_input_pattern_that_reads_the_runs_own_files_is_refused(
    pattern, output, matched, what, tmp_path
):
    # Corpus and records in one directory: a glob of it would read the run's
    # lock (made before the inputs are read), and the next run its shards.
    write(tmp_path / "corpus.txt", b"One sentence.\nTwo sentences.\n\nThree.\nFour.\n")
    write(tmp_path / "examples.tfrecord-00000", b"an earlier run's records")
    message = run_tool(*tool_flags(tmp_path / pattern, tmp_path / output))
    assert message == (
        f"create_pretraining_data: --input_file's '{tmp_path / pattern}' matches "
        f"{tmp_path / matched}, a file of --output_file's run ({what}), which would be read as "
        "text: write the records outside the pattern, or narrow the pattern (e.g. to *.txt)."
    )
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "examples.tfrecord-00000"]


@pytest.mark.parametrize(
    "text, documents",
    [
        (b"", "0 documents that give"),
        (b"\n\n  \n", "0 documents that give"),
        (b"One document.\nOf two sentences.\n", "1 document that gives"),
        # Lines of control characters or a lone byte-order mark give no tokens.
        (b"\x01\x02\n\n\x03\n\n\xef\xbb\xbf\n", "0 documents that give"),
        (b"One document.\nOf two sentences.\n\n\x01\n", "1 document that gives"),
    ],
    ids=["empty", "blank lines", "one document", "no tokens", "one document with tokens"],
)
def test_too_small_corpora_fail_clearly_and_write_nothing(text, documents, tmp_path):
    corpus = write(tmp_path / "corpus.txt", text)
    output = tmp_path / "out" / "examples.tfrecord"
    output.parent.mkdir()
    assert run_tool(*tool_flags(corpus, output, "--num_workers=1")) == (
        f"create_pretraining_data: --input_file {corpus!r} holds {documents} tokens; "
        "next-sentence pairs need at least 2."
    )
    assert os.listdir(output.parent) == []


def test_a_corpus_too_small_for_its_lines_that_are_not_utf8_says_so(tmp_path):
    # A compressed corpus: its bytes are mostly not UTF-8, so its lines are skipped.
    corpus = write(
        tmp_path / "corpus.txt.gz", gzip.compress(b"One.\nTwo.\n\nThree.\nFour.\n" * 50, mtime=0)
    )
    output = tmp_path / "out" / "examples.tfrecord"
    message = run_tool(*tool_flags(corpus, output, "--num_workers=1"))
    assert message.startswith(f"create_pretraining_data: --input_file {corpus!r} holds ")
    assert re.search(
        r"next-sentence pairs need at least 2\. \d+ of its lines are not valid UTF-8, so were "
        rf"skipped \(the first at {re.escape(corpus)}:\d+\): is the text compressed, or in "
        r"another encoding\?$",
        message,
    )


def original_token_ids(records):
    """The records' input ids with the masked positions' original ids put back."""
    ids = records["input_ids"].copy()
    rows, columns = np.nonzero(records["masked_lm_weights"] > 0)
    ids[rows, records["masked_lm_positions"][rows, columns]] = records["masked_lm_ids"][
        rows, columns
    ]
    return ids


def test_random_next_segments_come_from_another_document_that_gives_tokens(tmp_path, capsys):
    # Each document repeats one word. The second gives no tokens: were it
    # counted, the first shard would hold a single real document, paired
    # with itself as "random next".
    corpus = write(
        tmp_path / "corpus.txt",
        b"apple apple apple apple\n" * 5
        + b"\n\x01\n\n"
        + b"banana banana banana\n" * 5
        + b"\n"
        + b"cherry cherry cherry\n" * 5,
    )
    output = str(tmp_path / "examples.tfrecord")
    arguments = tool_flags(corpus, output, "--num_workers=1", "--input_mb_per_shard=0.0001")
    assert run_tool(*arguments, "--max_seq_length=16", "--max_predictions_per_seq=2") is None
    spec = original_feature_spec(16, 2)
    dataset = tf.data.TFRecordDataset(shard_files(output))
    records = {
        name: values.numpy() for name, values in tf.io.parse_example(list(dataset), spec).items()
    }
    ids, segments = original_token_ids(records), records["segment_ids"]
    words = {6207, 9115, 15212}  # apple, cherry, banana in vocab.txt (0-based)
    random_next = records["next_sentence_labels"][:, 0] == 1
    assert 0 < random_next.sum() < len(random_next)
    for row in range(len(ids)):
        first = set(ids[row][(segments[row] == 0) & np.isin(ids[row], list(words))])
        second = set(ids[row][(segments[row] == 1) & np.isin(ids[row], list(words))])
        assert len(first) == len(second) == 1
        assert (first != second) == random_next[row], row
    assert f"Dropped 1 documents that give no tokens (the first at {corpus}:7)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("do_lower_case, warned", [("true", False), ("false", True)])
def test_a_text_mostly_unknown_to_the_vocabulary_is_warned_about(
    do_lower_case, warned, tmp_path, capsys
):
    corpus = write(
        tmp_path / "corpus.txt", b"Apple Banana Cherry.\nCherry Apple.\n\nBanana Apple.\nApple.\n"
    )
    output = str(tmp_path / "examples.tfrecord")
    arguments = tool_flags(corpus, output, "--num_workers=1", "--max_seq_length=16")
    assert run_tool(*arguments, f"--do_lower_case={do_lower_case}") is None
    printed = capsys.readouterr().out
    assert (
        "of the 12 tokens of the text are [UNK]: does --do_lower_case suit" in printed
    ) == warned


@pytest.mark.parametrize("do_lower_case, warned", [(True, True), (False, False)])
def test_a_cased_vocabulary_read_with_lower_casing_is_warned_about(
    do_lower_case, warned, tmp_path, caplog
):
    # Lower-cased text never gives "Apple", so the [UNK] share alone cannot tell.
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "apple", "Apple", "Pie"]
    vocab = write(tmp_path / "vocab.txt", "\n".join(vocabulary).encode())
    corpus = write(tmp_path / "corpus.txt", b"Apple.\napple.\n\nApple.\napple.\n")
    arguments = tool_flags(corpus, tmp_path / "examples.tfrecord", "--max_seq_length=16")
    with caplog.at_level(logging.WARNING):
        assert (
            run_tool(*arguments, f"--vocab_file={vocab}", f"--do_lower_case={do_lower_case}")
            is None
        )
    expected = (
        f"--do_lower_case is true, but 2 of the 9 tokens of --vocab_file {vocab} hold upper-case "
        "letters ('Apple', 'Pie'), which lower-cased text never gives: for a cased vocabulary, "
        "pass --do_lower_case=false."
    )
    assert (expected in caplog.messages) == warned


def test_invalid_utf8_and_single_sentence_documents_are_reported(tmp_path, capsys):
    corpus = write(
        tmp_path / "corpus.txt",
        b"A first sentence.\nA second one.\n\nAlone here.\n\n"
        b"Good line.\n\xff\xfe broken line.\nAnother good line.\n",
    )
    output = str(tmp_path / "examples.tfrecord")
    assert run_tool(*tool_flags(corpus, output, "--num_workers=1", "--max_seq_length=16")) is None
    printed = capsys.readouterr().out
    assert f"Skipped 1 lines that are not valid UTF-8 (the first at {corpus}:7)" in printed
    assert f"1 documents have a single sentence (the first at {corpus}:4)" in printed
    assert "Random next segments:" in printed
