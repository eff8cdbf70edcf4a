"""Text classification examples → packed BERT inputs: a tf.data pipeline, or arrays."""

import functools

import numpy as np
import tensorflow as tf

from bert_keras.data.length_batching import batch_by_length

# Texts tokenized per eager call of the preprocessor in `classification_features`.
FEATURE_CHUNK = 4096


def classification_dataset(
    preprocessor, examples, batch_size, shuffle=False, seed=0, with_labels=True, **batching
):
    """Batches of `(features, labels)` for `model.fit`, tokenized in-graph and cached.

    Texts are tokenized and packed once, by the in-graph `preprocessor`
    (a `BertPreprocessor`), and cached, so later epochs pay no tokenization;
    the dataset feeds `model.fit` on every Keras backend. Each batch is as
    long as its longest text, rounded up (see `batch_by_length`).

    Args:
        preprocessor: a `BertPreprocessor` with a fixed `sequence_length`.
        examples: `ClassificationExamples` (see `bert_keras.data.glue`).
        batch_size: examples per batch.
        shuffle: reshuffle the examples every epoch.
        seed: shuffle seed.
        with_labels: yield `(features, labels)`; otherwise features only.
        **batching: `batch_by_length`'s options (`pad_to_multiple_of`,
            `bucket`, `bucket_width`).

    Example:
    >>> from bert_keras.data.glue import ClassificationExamples
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> examples = ClassificationExamples(["hi", "hi hi"], None, [0, 1], ("a", "b"))
    >>> dataset = classification_dataset(BertPreprocessor(tokenizer, 8), examples, 2)
    >>> features, labels = next(iter(dataset))
    >>> features["token_ids"].numpy().tolist(), labels.numpy().tolist()
    ([[2, 5, 3, 0, 0, 0, 0, 0], [2, 5, 5, 3, 0, 0, 0, 0]], [0, 1])
    >>> long = BertPreprocessor(tokenizer, 128)  # batches 16 wide, not 128
    >>> next(iter(classification_dataset(long, examples, 2)))[0]["token_ids"].shape.as_list()
    [2, 16]
    """
    dataset = _packed(preprocessor, examples)
    if with_labels:
        label_dtype = tf.float32 if not examples.label_names else tf.int32
        labels = tf.data.Dataset.from_tensor_slices(tf.constant(examples.labels, label_dtype))
        dataset = tf.data.Dataset.zip((dataset, labels))
    dataset = dataset.cache()
    if shuffle:
        dataset = dataset.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
    return batch_by_length(dataset, batch_size, **batching).prefetch(tf.data.AUTOTUNE)


def classification_features(preprocessor, examples):
    """Every example's packed inputs, as arrays `[examples, sequence_length]`.

    For `predict_by_length`, which sorts the examples by length first. The
    texts are tokenized eagerly, `FEATURE_CHUNK` at a time: a tf.data
    pipeline would trace the preprocessor first, which takes longer than
    tokenizing a dev set.

    Raises:
        ValueError: `examples` is empty.

    Example:
    >>> from bert_keras.data.glue import ClassificationExamples
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> examples = ClassificationExamples(["hi", "hi hi"], None, [0, 1], ("a", "b"))
    >>> classification_features(BertPreprocessor(tokenizer, 5), examples)["token_ids"].tolist()
    [[2, 5, 3, 0, 0], [2, 5, 5, 3, 0]]
    """
    if not len(examples):
        raise ValueError("classification_features got no examples.")
    texts = _texts(examples)
    chunks = [
        _preprocessed(preprocessor, *(column[start : start + FEATURE_CHUNK] for column in texts))
        for start in range(0, len(examples), FEATURE_CHUNK)
    ]
    return {name: np.concatenate([chunk[name].numpy() for chunk in chunks]) for name in chunks[0]}


def _texts(examples):
    """The examples' text columns: `(texts_a,)` or `(texts_a, texts_b)`."""
    if examples.texts_b is None:
        return (examples.texts_a,)
    return (examples.texts_a, examples.texts_b)


def _preprocessed(preprocessor, *texts):
    """`preprocessor` on one batch of texts, or of text pairs."""
    return preprocessor(texts if len(texts) > 1 else texts[0])


def _packed(preprocessor, examples):
    """The examples' packed inputs, one element each, tokenized 256 texts at a time."""
    return (
        tf.data.Dataset.from_tensor_slices(_texts(examples))
        .batch(256)
        .map(functools.partial(_preprocessed, preprocessor), num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )
