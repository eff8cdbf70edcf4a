"""Dynamic masking from raw text: fresh masks each pass, the records' layout."""

import numpy as np
import pytest

from bert_keras.data.dynamic_masking import dynamic_masking_dataset
from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.text.tokenizer import BertTokenizer

SEQ_LENGTH, PREDICTIONS = 32, 5
WORDS_30 = [f"word{index}" for index in range(30)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    corpus = str(tmp_path_factory.mktemp("text") / "corpus.txt")
    docstring_corpus(corpus, 15_000)
    tokenizer = BertTokenizer(vocab_file(), lowercase=True)
    return dynamic_masking_dataset(
        corpus,
        tokenizer,
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=PREDICTIONS,
        batch_size=16,
    )


def test_masks_are_drawn_afresh_each_pass(dataset):
    # Two epochs from one iterator, as model.fit(dataset.repeat()) sees them.
    batches = [features["masked_positions"].numpy() for features, _ in dataset.repeat(2)]
    first, second = batches[: len(batches) // 2], batches[len(batches) // 2 :]
    assert len(first) > 3
    assert not any(np.array_equal(a, b) for a, b in zip(first, second))


def test_layout_and_rates(dataset):
    batches = list(dataset)
    features, labels = batches[0]
    assert {name: tuple(t.shape) for name, t in features.items()} == {
        "token_ids": (16, SEQ_LENGTH),
        "segment_ids": (16, SEQ_LENGTH),
        "padding_mask": (16, SEQ_LENGTH),
        "masked_positions": (16, PREDICTIONS),
    }
    assert tuple(labels["next_sentence_labels"].shape) == (16,)
    weights = np.concatenate([labels["masked_lm_weights"].numpy() for _, labels in batches])
    token_ids = np.concatenate([features["token_ids"].numpy() for features, _ in batches])
    positions = np.concatenate([features["masked_positions"].numpy() for features, _ in batches])
    shown = token_ids[np.nonzero(weights)[0], positions[weights > 0]]
    assert 0.7 < (shown == 103).mean() < 0.9
    assert not np.isin(token_ids[:, 0], [103]).any()  # [CLS] is never masked
    next_labels = np.concatenate([labels["next_sentence_labels"].numpy() for _, labels in batches])
    assert 0.3 < next_labels.mean() < 0.7


def test_a_random_next_comes_from_another_document(tmp_path):
    # 30 documents of 6 lines; each line of document d is its word d, 3 times.
    tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS_30)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join([f"{word} " * 3] * 6) for word in WORDS_30))
    batches = dynamic_masking_dataset(
        str(corpus), tokenizer, max_seq_length=16, max_predictions_per_seq=1, batch_size=10
    )
    same_document = []
    for features, labels in batches.repeat(5):
        token_ids, segment_ids = features["token_ids"].numpy(), features["segment_ids"].numpy()
        for row in np.nonzero(labels["next_sentence_labels"].numpy())[0]:
            words = token_ids[row] > 4  # a masked word may be [MASK] or another: take the most
            a, b = (np.bincount(token_ids[row][words & (segment_ids[row] == s)]) for s in (0, 1))
            same_document.append(a.argmax() == b.argmax())
    assert len(same_document) > 30
    assert np.mean(same_document) < 0.2


@pytest.mark.parametrize("blank", ["\u00a0", "\u3000\u3000", " \t", "\u200b", ""])
def test_a_line_that_only_looks_blank_separates_documents_and_is_no_segment(tmp_path, blank):
    tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS_30)
    corpus = tmp_path / "corpus.txt"
    documents = ["\n".join([f"{word} " * 3] * 2) for word in WORDS_30]
    corpus.write_text(f"\n{blank}\n".join(documents), encoding="utf-8")
    batches = dynamic_masking_dataset(
        str(corpus), tokenizer, max_seq_length=16, max_predictions_per_seq=1, batch_size=10
    )
    examples = 0
    for features, labels in batches:
        token_ids, segment_ids = features["token_ids"].numpy(), features["segment_ids"].numpy()
        for row, is_random in enumerate(labels["next_sentence_labels"].numpy()):
            words = [token_ids[row][(token_ids[row] > 4) & (segment_ids[row] == s)] for s in (0, 1)]
            assert all(len(segment) for segment in words), token_ids[row]
            if not is_random:  # the line after A, in its own document: the same word
                assert words[0][0] == words[1][0] or 4 in token_ids[row]
            examples += 1
    assert examples == 30  # one pair a document: the blank lines pair with nothing


def test_one_line_documents_give_no_pairs_and_are_named_before_training(tmp_path):
    # Titles or queries a line each: no two consecutive lines share a document.
    tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS_30)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(WORDS_30) + "\n\nfirst line\nsecond line\n")
    with pytest.raises(ValueError) as error:
        dynamic_masking_dataset(str(corpus), tokenizer, max_seq_length=16, batch_size=2)
    assert str(error.value).startswith(
        f"{str(corpus)!r} gives 1 sentence pairs, fewer than batch_size=2: a pair is two "
        "consecutive non-blank lines of one document"
    )


def test_a_pretrainer_fits_on_it(dataset):
    backbone = BertBackbone(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=SEQ_LENGTH,
    )
    pretrainer = BertPretrainer(backbone)
    pretrainer.compile(optimizer="adam")
    history = pretrainer.fit(dataset.take(2), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
