import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import classification_dataset
from bert_keras.data.classification_dataset import classification_features
from bert_keras.data.glue import ClassificationExamples
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import BertTokenizer

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s"]
TEXTS_A = ["the cat sat", "cats", "the mat sat on the cat", "on", "mats sat"]
TEXTS_B = ["the mats", "cat cat cat", "on", "the the", "sat on the mat"]


@pytest.mark.parametrize("texts_b", [None, TEXTS_B], ids=["single", "pairs"])
def test_features_tokenized_in_chunks_equal_each_example_on_its_own(monkeypatch, texts_b):
    monkeypatch.setattr(classification_dataset, "FEATURE_CHUNK", 2)  # chunks of 2, 2 and 1
    preprocessor = BertPreprocessor(BertTokenizer(VOCABULARY), sequence_length=8)
    examples = ClassificationExamples(TEXTS_A, texts_b, [0, 1, 0, 1, 0], ("a", "b"))

    features = classification_features(preprocessor, examples)

    for index, text_a in enumerate(TEXTS_A):
        texts = (tf.constant([text_a]),) + ((tf.constant([texts_b[index]]),) if texts_b else ())
        alone = preprocessor(texts if texts_b else texts[0])
        for name, array in features.items():
            np.testing.assert_array_equal(array[index], alone[name].numpy()[0], err_msg=name)
    assert features["token_ids"].shape == (5, 8)
    assert set(features) == {"token_ids", "segment_ids", "padding_mask"}


def test_features_of_no_examples_is_an_error():
    preprocessor = BertPreprocessor(BertTokenizer(VOCABULARY), sequence_length=8)
    with pytest.raises(ValueError, match="no examples"):
        classification_features(preprocessor, ClassificationExamples([], None, [], ("a", "b")))
