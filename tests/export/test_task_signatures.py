"""What the fine-tuning programs write exports to signatures that answer as the programs predict."""

import os
import subprocess
import sys
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data.conll import read_conll
from bert_keras.export.saved_model import export_saved_model
from bert_keras.export.signatures import ids_signature
from bert_keras.finetuning.classification import ClassificationRun
from bert_keras.finetuning.multiple_choice import MultipleChoiceRun
from bert_keras.finetuning.run import EXPORT_DIR
from bert_keras.finetuning.tagging import HEAD_NAME
from bert_keras.finetuning.tagging import TaggingRun
from bert_keras.finetuning.word_windows import tokenize_words
from bert_keras.finetuning.word_windows import window_bounds
from bert_keras.models.bert_backbone import BertBackbone
from tests.export import CONFIG
from tests.export import ROOT
from tests.export import serve
from tests.export import transported
from tests.export import write_vocabulary
from tests.export.servable import inputs_without_a_shape_check
from tests.export.servable import unservable_ops

SEQUENCE_LENGTH = 12
CONLL = """the O\nfilm B-X\nwas O\ngood B-Y\n\nA O\nplot B-X\n!\tO\n"""
SWAG_HEADER = "sent1,sent2,ending0,ending1,ending2,label\n"
SWAG_ROWS = [
    "the film,was,good .,bad .,dull !,0",
    "a plot,is,great,the films,,2",
    "who saw the film ?,,a plot .,the plot .,great !,1",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny backbone's checkpoint directory, with the shared vocabulary."""
    directory = tmp_path_factory.mktemp("checkpoint")
    vocabulary = write_vocabulary(directory)
    BertBackbone(**CONFIG).save_to_preset(str(directory / "tiny"), vocabulary_file=vocabulary)
    return str(directory / "tiny")


@pytest.mark.slow  # `make test` keeps test_saved_model's export of a pair classifier
def test_a_classifier_of_pairs_labels_as_the_classification_program(checkpoint, tmp_path):
    data = tmp_path / "pairs"
    data.mkdir()
    rows = [
        ("the film was good", "a great plot", "yes"),
        ("a dull plot", "the film was bad !", "no"),
        ("good films", "", "yes"),
        ("who saw the film ?", "what a plot , what a film", "maybe"),
    ]
    for split in ("train", "dev"):
        lines = ["text\ttext_pair\tlabel"] + ["\t".join(row) for row in rows]
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), SEQUENCE_LENGTH)
    run.train(batch_size=2, learning_rate=1e-2, num_epochs=1, verbose=0)
    run.evaluate("dev", batch_size=3)
    predictions = (tmp_path / "out" / "predictions_dev.tsv").read_text().splitlines()[1:]
    written = [line.split("\t")[1] for line in predictions]
    exported = export_saved_model(tmp_path / "out" / "export", tmp_path / "base")
    request = {"text": [row[0] for row in rows], "text_pair": [row[1] for row in rows]}
    answers = serve(exported, {"serving_default": request})
    for path in ("eager", "session"):
        assert answers[path]["serving_default"]["label"] == written, path


@pytest.fixture(scope="module")
def exported_tagger(checkpoint, tmp_path_factory):
    """A tagging run and its export, shared by the tagger tests."""
    keras.utils.set_random_seed(1234)  # module fixtures start before tests/conftest.py seeds
    tmp_path = tmp_path_factory.mktemp("tagger")
    data = tmp_path / "conll"
    data.mkdir()
    (data / "train.txt").write_text(CONLL)
    run = TaggingRun(str(data), checkpoint, str(tmp_path / "out"), max_seq_length=SEQUENCE_LENGTH)
    run.train(batch_size=2, learning_rate=1e-2, num_epochs=1, verbose=0)
    # A step of training on four sentences may tag every word "O"; random
    # output weights without a bias make the tags differ from word to word.
    logits = run.model.get_layer("logits")
    logits.kernel.assign(np.random.default_rng(0).normal(size=logits.kernel.shape) * 3)
    logits.bias.assign(np.zeros(logits.bias.shape))
    run.export(run.model, HEAD_NAME, label_names=run.label_names)
    return run, export_saved_model(tmp_path / "out" / "export", tmp_path / "base")


def test_a_tagger_export_tags_each_word_as_the_tagging_program(exported_tagger):
    run, exported = exported_tagger
    assert not unservable_ops(exported)
    sentences = [["the", "film", "was", "good"], ["Plot", "!"], ["a"], ["été", "films", "\x00"]]
    # Words apart at multi-byte spaces (no-break, em, ideographic) too, as str.split() splits.
    spaced = "the\u00a0film\u2003was\u3000good\x1cPlot".encode()
    texts = [" ".join(words).encode() for words in sentences] + [b"  the \t film\n", spaced, b""]
    sentences += [["the", "film"], ["the", "film", "was", "good", "Plot"]]
    expected = run._predict_tags([SimpleNamespace(words=words) for words in sentences], 8)
    assert len({tag for tags in expected for tag in tags}) > 1  # the comparison can tell tags apart
    answers = serve(exported, {"serving_default": {"text": transported(texts)}})
    for path in ("eager", "session"):
        served = answers[path]["serving_default"]
        for row, (text, tags) in enumerate(zip(texts, expected)):
            count = sum(served["mask"][row])
            assert served["tags"][row][:count] == tags, (path, text)
            words = [
                text[start:end].decode()
                for start, end in zip(served["start"][row][:count], served["end"][row][:count])
            ]
            assert words == served["words"][row][:count] == text.decode().split()
        assert sum(served["mask"][-1]) == 0  # the empty text has no words
    assert inputs_without_a_shape_check(exported) == set()


def test_a_text_several_windows_long_is_tagged_on_every_word_as_the_tagging_program(
    exported_tagger, tmp_path
):
    run, exported = exported_tagger
    sentences = [
        # "films" takes two pieces, the long word more than a window holds,
        # "\x00" none (so [UNK]).
        ["the", "films", "was", "dull", "!"] * 6 + ["films" + "s" * 12, "a", "\x00", "été"] * 3,
        ["who", "saw", "the", "great", "plot", "?"] * 3,
        ["a", "film"],
    ]
    budget = SEQUENCE_LENGTH - 2
    pieces = tokenize_words(run.tokenizer, sentences)
    assert len(window_bounds([len(word) for word in pieces[0]], budget)[0]) > 5
    assert max(len(word) for word in pieces[0]) > budget
    expected = _tagging_program_tags(run, sentences, tmp_path)
    assert len({tag for tags in expected for tag in tags}) > 1
    texts = [" ".join(words).encode() for words in sentences] + [b""]
    answers = serve(exported, {"serving_default": {"text": transported(texts)}})
    for path in ("eager", "session"):
        served = answers[path]["serving_default"]
        for row, (words, tags) in enumerate(zip(sentences, expected)):
            assert sum(served["mask"][row]) == len(words), path
            assert served["words"][row][: len(words)] == words, path
            assert served["tags"][row][: len(words)] == tags, (path, row)
        assert sum(served["mask"][-1]) == 0


def _tagging_program_tags(run, sentences, tmp_path):
    """The tags `tasks.tag --do_predict` writes for these sentences with the run's export."""
    data, output = tmp_path / "conll", tmp_path / "predicted"
    data.mkdir()
    blocks = ["".join(f"{word} O\n" for word in words) for words in sentences]
    (data / "test.txt").write_text("\n".join(blocks), encoding="utf-8")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasks.tag",
            f"--data_dir={data}",
            f"--init_checkpoint={os.path.join(run.output_dir, EXPORT_DIR)}",
            f"--output_dir={output}",
            "--do_predict",
            f"--max_seq_length={SEQUENCE_LENGTH}",
            "--eval_batch_size=2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    predicted = read_conll(str(output / "predictions_test.txt"))
    assert [list(sentence.words) for sentence in predicted] == sentences
    return [list(sentence.tags) for sentence in predicted]


def test_a_multiple_choice_export_chooses_as_the_program(checkpoint, tmp_path):
    data = tmp_path / "swag"
    data.mkdir()
    (data / "train.csv").write_text(SWAG_HEADER + "\n".join(SWAG_ROWS) + "\n")
    run = MultipleChoiceRun(str(data), checkpoint, str(tmp_path / "out"), SEQUENCE_LENGTH)
    run.train(batch_size=2, learning_rate=1e-2, num_epochs=1, verbose=0)
    exported = export_saved_model(tmp_path / "out" / "export", tmp_path / "base")
    assert not unservable_ops(exported)
    assert inputs_without_a_shape_check(exported) == set()
    examples = run._read("train")
    logits = run.model.predict(run._features(examples), verbose=0)
    request = {
        "context": list(examples.contexts),
        "choices": [list(choices) for choices in examples.choices],
    }
    answers = serve(exported, {"serving_default": request})
    for path in ("eager", "session"):
        served = answers[path]["serving_default"]
        np.testing.assert_allclose(served["logits"], logits, atol=1e-5, err_msg=path)
        assert served["choice"] == np.argmax(logits, axis=-1).tolist()
    loaded = tf.saved_model.load(exported).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="context and choices must hold"):
        loaded(context=tf.constant(["a", "b"]), choices=tf.constant([["a", "b", "c"]]))


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="refused on other backends")
def test_signatures_are_refused_outside_the_tensorflow_backend():
    with pytest.raises(ValueError, match="trace the model on Keras' tensorflow backend"):
        ids_signature(BertBackbone(**CONFIG), lambda outputs: outputs)


@pytest.mark.parametrize(
    "token_id, segment_id, length, message",
    [
        (6, 0, 3, r"token_ids must lie in 0..5 \(vocabulary_size 6\)"),
        (-1, 0, 3, r"token_ids must lie in 0..5"),
        (1, 2, 3, r"segment_ids must lie in 0..1 \(num_segments 2\)"),
        (1, 0, 5, r"token_ids must be at most max_sequence_length \(4\) long"),
    ],
)
def test_serve_ids_names_ids_and_lengths_the_backbone_has_no_embedding_for(
    token_id, segment_id, length, message
):
    serve = ids_signature(BertBackbone(6, 1, 2, 8, 16, max_sequence_length=4), lambda out: out)
    ones = np.ones((1, length), "int32")
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        serve(ones * token_id, ones * segment_id, ones)


@pytest.mark.parametrize(
    "segment_shape, mask_shape, mask_value, message",
    [
        ((2, 3), (1, 3), 1, r"token_ids and segment_ids must have the same shape"),  # batch
        ((1, 2), (1, 3), 1, r"token_ids and segment_ids must have the same shape"),  # length
        ((1, 3), (2, 3), 1, r"token_ids and padding_mask must have the same shape"),
        ((1, 3), (1, 3), 2, r"padding_mask must hold only 0 \(padding\) and 1"),
    ],
)
def test_serve_ids_names_inputs_that_disagree(segment_shape, mask_shape, mask_value, message):
    serve = ids_signature(BertBackbone(6, 1, 2, 8, 16), lambda outputs: outputs)
    token_ids = np.ones((1, 3), "int32")
    segment_ids, padding_mask = np.zeros(segment_shape, "int32"), np.full(mask_shape, mask_value)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        serve(token_ids, segment_ids, padding_mask.astype("int32"))
