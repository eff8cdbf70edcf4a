"""Worker processes: their messages, their loop, and what they import."""

import io
import subprocess

import numpy as np
import pytest

from bert_keras.data import pretraining_worker
from bert_keras.data.example_encoding import encode_examples
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_instances import SpecialTokens
from bert_keras.data.pretraining_instances import create_instances
from tests.data.synthetic_documents import CLS
from tests.data.synthetic_documents import MASK
from tests.data.synthetic_documents import SEP
from tests.data.synthetic_documents import VOCABULARY_SIZE
from tests.data.synthetic_documents import random_documents
from tests.data.synthetic_documents import special_tokens


def _message_round_trip(header, arrays):
    stream = io.BytesIO()
    pretraining_worker.write_message(stream, header, arrays)
    stream.seek(0)
    return pretraining_worker.read_message(stream), stream


def test_messages_carry_arrays_of_every_kind_exactly():
    arrays = {
        "ids": np.arange(12, dtype=np.uint16).reshape(3, 4),
        "flags": np.array([True, False, True]),
        "weights": np.array([[0.5, 1.0]], np.float32),
        "empty": np.zeros((0, 5), np.int64),
        "strided": np.arange(10, dtype=np.int32)[::2],
    }
    (header, received), stream = _message_round_trip({"kind": "x", "n": 3}, arrays)
    assert header == {"kind": "x", "n": 3}
    assert list(received) == list(arrays)
    for name, array in arrays.items():
        assert received[name].dtype == array.dtype and received[name].shape == array.shape
        np.testing.assert_array_equal(received[name], array)
    assert stream.read() == b""  # exactly one message's bytes


def test_messages_refuse_objects_and_report_cut_streams():
    stream = io.BytesIO(b'{"kind": "records", "arrays": [["data", "|O", [1]]]}\n' + bytes(8))
    with pytest.raises(ValueError, match="'data' has dtype object; messages hold numbers only"):
        pretraining_worker.read_message(stream)
    (_, _), whole = _message_round_trip(
        {"kind": "records"}, {"data": np.arange(100, dtype=np.uint8)}
    )
    with pytest.raises(EOFError, match="inside message array 'data'"):
        pretraining_worker.read_message(io.BytesIO(whole.getvalue()[:-1]))
    with pytest.raises(EOFError, match="inside a message"):
        pretraining_worker.read_message(io.BytesIO(b'{"kind": '))


def _served(tasks):
    """Runs `serve` on the task messages in `tasks`; returns its replies."""
    requests, replies = io.BytesIO(), io.BytesIO()
    for documents, tokens, options, shard_index in tasks:
        pretraining_worker.write_shard_task(requests, documents, tokens, options, shard_index)
    requests.seek(0)
    pretraining_worker.serve(requests, replies)
    replies.seek(0)
    messages = []
    while True:
        try:
            messages.append(pretraining_worker.read_message(replies))
        except EOFError:
            return messages


def test_a_worker_serves_the_records_of_each_task_in_order():
    options = InstanceOptions(max_seq_length=32, dupe_factor=2, do_whole_word_mask=True)
    tasks = [(random_documents(30, seed), special_tokens(), options, seed) for seed in (4, 5)]
    messages = _served(tasks)
    for documents, tokens, _, shard_index in tasks:
        expected = create_instances(documents, tokens, options, shard_index)
        (statistics, _), *rest = messages
        assert statistics == {"kind": "statistics", "statistics": expected.statistics()}
        records = []
        while rest[0][0]["kind"] == "records":
            (_, arrays), *rest = rest
            data, ends = arrays["data"].tobytes(), np.cumsum(arrays["lengths"]).tolist()
            records += [data[begin:end] for begin, end in zip([0, *ends[:-1]], ends)]
        assert rest[0][0] == {"kind": "end"}
        assert records == encode_examples(expected)
        messages = rest[1:]
    assert messages == []


def test_a_worker_reports_a_failed_task_and_goes_on():
    documents = random_documents(10)
    broken = SpecialTokens(CLS, SEP, MASK, VOCABULARY_SIZE)  # whole words need is_continuation
    whole_words = InstanceOptions(max_seq_length=32, dupe_factor=1, do_whole_word_mask=True)
    plain = InstanceOptions(max_seq_length=32, dupe_factor=1)
    messages = _served([(documents, broken, whole_words, 0), (documents, broken, plain, 1)])
    assert messages[0][0]["kind"] == "error" and "Traceback" in messages[0][0]["traceback"]
    assert [header["kind"] for header, _ in messages[1:]] == ["statistics", "records", "end"]


def test_a_worker_process_imports_numpy_but_no_tensorflow(tmp_path):
    # Workers hold a shard's instances; TensorFlow or Keras would come on top in every one.
    python, *arguments = pretraining_worker.worker_command()
    result = subprocess.run(
        [python, "-X", "importtime", *arguments],
        input=b"",  # no task: the worker starts, imports, and ends
        cwd=tmp_path,  # finds bert_keras wherever it runs
        capture_output=True,
        check=True,
    )
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in result.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert {"numpy", "bert_keras"} <= imported
    assert not imported & {"tensorflow", "keras", "jax", "torch"}


def test_a_worker_whose_main_process_is_gone_exits_quietly(tmp_path):
    # A killed create_pretraining_data leaves its workers writing into a pipe no one reads.
    worker = subprocess.Popen(
        pretraining_worker.worker_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    worker.stdout.close()
    options = InstanceOptions(max_seq_length=32, dupe_factor=1)
    pretraining_worker.write_shard_task(
        worker.stdin, random_documents(10), special_tokens(), options, 0
    )
    # Its tasks' pipe stays open, so its reading thread still waits on it when the worker exits.
    assert worker.wait(timeout=120) == 0
    worker.stdin.close()
    assert worker.stderr.read().decode() == ""
