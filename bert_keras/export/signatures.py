"""The serving signatures of each task model: raw text in, answers out, and token ids in.

Every function here returns `{signature name: tf.function}`, traced on Keras'
TensorFlow backend with fixed input signatures (batch size dynamic) and no
autograph, ready for `keras.export.ExportArchive.add_endpoint`. They refuse
other backends (`export_saved_model` runs them in a TensorFlow process). Raw-text
signatures pad each batch to its longest text; `serve_ids` takes what a
client packed itself.

Example:
>>> import tensorflow as tf
>>> from bert_keras.models.bert_backbone import BertBackbone
>>> from bert_keras.text.preprocessor import BertPreprocessor
>>> from bert_keras.text.tokenizer import BertTokenizer
>>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
>>> preprocessor = BertPreprocessor(tokenizer, sequence_length=8, padding="longest")
>>> signatures = backbone_signatures(BertBackbone(6, 1, 2, 8, 16), preprocessor)
>>> outputs = signatures["serving_default"](tf.constant(["hi", "hi hi hi"]))
>>> outputs["sequence_output"].shape.as_list()
[2, 5, 8]
"""

import keras
import tensorflow as tf

# The Keras backend the models must run on to be traced into a TensorFlow graph.
REQUIRED_BACKEND = "tensorflow"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
# Rows per forward pass of `by_length`: enough for efficient matrix products
# on a CPU, few enough that lengths within a pass stay close.
PASS_ROWS = 8


def classifier_signatures(model, preprocessor, label_names, text_pair=False):
    """`serving_default`, `serve_ids` and `classify` of a `BertClassifier`.

    `serving_default` takes `text` (and `text_pair`) strings `[batch]` and
    gives `logits`, `probabilities` float32 `[batch, classes]`, `label_id`
    int64 `[batch]` and `label` string `[batch]`. `classify` (method
    `CLASSIFY_METHOD`) takes serialized `tf.Example`s with the bytes
    features "text" (and "text_pair") and gives `classes` string and
    `scores` float32 `[batch, classes]`. `serve_ids` gives `logits`.

    Example:
    >>> import tensorflow as tf
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.bert_classifier import BertClassifier
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=8, padding="longest")
    >>> model = BertClassifier(BertBackbone(6, 1, 2, 8, 16), num_classes=2)
    >>> signatures = classifier_signatures(model, preprocessor, ["no", "yes"])
    >>> signatures["serving_default"](tf.constant(["hi"]))["label"].shape.as_list()
    [1]
    """
    check_backend()
    names = tf.constant(label_names)
    feature_names = ("text", "text_pair") if text_pair else ("text",)

    def answers(logits):
        label_id = tf.argmax(logits, axis=-1)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits),
            "label_id": label_id,
            "label": tf.gather(names, label_id),
        }

    def logits_of(texts):
        return _text_logits(model, preprocessor, texts)

    @tf.function(input_signature=text_specs(*feature_names), autograph=False)
    def serve_text(*texts):
        texts = [checked_shape(text, [None]) for text in texts]
        with tf.control_dependencies(same_batch_size(**dict(zip(feature_names, texts)))):
            return answers(logits_of(texts))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(inputs):
        texts = _example_texts(checked_shape(inputs, [None]), feature_names)
        scores = tf.nn.softmax(logits_of(texts))
        classes = tf.tile(names[tf.newaxis], [tf.shape(scores)[0], 1])
        return {"classes": classes, "scores": scores}

    return {
        "serving_default": serve_text,
        "serve_ids": ids_signature(model, lambda logits: {"logits": logits}),
        "classify": classify,
    }


def regression_signatures(model, preprocessor, text_pair=False):
    """`serving_default`, `serve_ids` and `regress` of a `BertClassifier` with one output.

    A one-output classifier head is a regression (`tasks.classify`'s STS-B,
    say): its logit is the predicted value, so nothing is softmaxed.
    `serving_default` takes `text` (and `text_pair`) strings `[batch]` and
    gives `score` float32 `[batch]` and `logits` float32 `[batch, 1]`.
    `regress` (method `REGRESS_METHOD`, TF Serving's `:regress`) takes
    serialized `tf.Example`s with the bytes features "text" (and
    "text_pair") and gives `outputs` float32 `[batch]`. `serve_ids` gives
    `logits`.

    Example:
    >>> import tensorflow as tf
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.bert_classifier import BertClassifier
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=8, padding="longest")
    >>> model = BertClassifier(BertBackbone(6, 1, 2, 8, 16), num_classes=1)
    >>> signatures = regression_signatures(model, preprocessor)
    >>> signatures["serving_default"](tf.constant(["hi", "hi hi"]))["score"].shape.as_list()
    [2]
    """
    check_backend()
    feature_names = ("text", "text_pair") if text_pair else ("text",)

    def logits_of(texts):
        return _text_logits(model, preprocessor, texts)

    @tf.function(input_signature=text_specs(*feature_names), autograph=False)
    def serve_text(*texts):
        texts = [checked_shape(text, [None]) for text in texts]
        with tf.control_dependencies(same_batch_size(**dict(zip(feature_names, texts)))):
            logits = logits_of(texts)
        return {"score": logits[:, 0], "logits": logits}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(inputs):
        texts = _example_texts(checked_shape(inputs, [None]), feature_names)
        return {"outputs": logits_of(texts)[:, 0]}

    return {
        "serving_default": serve_text,
        "serve_ids": ids_signature(model, lambda logits: {"logits": logits}),
        "regress": regress,
    }


def _text_logits(model, preprocessor, texts):
    """`model`'s logits of texts (one tensor, or a pair's two), batched by length."""
    features = _packed(preprocessor, texts)
    return by_length(lambda features: model(features, training=False), features)


def _example_texts(serialized, feature_names):
    """The bytes features `feature_names` of serialized `tf.Example`s, each `[batch]`."""
    examples = tf.io.parse_example(
        serialized, {name: tf.io.FixedLenFeature([], tf.string) for name in feature_names}
    )
    return [examples[name] for name in feature_names]


def backbone_signatures(model, preprocessor):
    """`serving_default` and `serve_ids` of a `BertBackbone`: features of texts.

    `serving_default` takes `text` strings `[batch]` and gives
    `pooled_output` float32 `[batch, hidden]`, `sequence_output` float32
    `[batch, length, hidden]` and `padding_mask` int32 `[batch, length]`;
    `serve_ids` gives the first two. (Example: the module docstring.)
    """
    check_backend()

    def features_of(outputs):
        return {name: outputs[name] for name in ("pooled_output", "sequence_output")}

    @tf.function(input_signature=text_specs("text"), autograph=False)
    def serve_text(text):
        features = preprocessor(checked_shape(text, [None]))
        outputs = model(features, training=False)
        return {**features_of(outputs), "padding_mask": features["padding_mask"]}

    return {"serving_default": serve_text, "serve_ids": ids_signature(model, features_of)}


def multiple_choice_signatures(model, preprocessor):
    """`serving_default` and `serve_ids` of a `BertMultipleChoice`.

    `serving_default` takes `context` strings `[batch]` and `choices`
    strings `[batch, num_choices]`, packs `[CLS] context [SEP] choice [SEP]`
    for each choice, and gives `logits`, `probabilities` float32 `[batch,
    num_choices]` and `choice` int64 `[batch]`. `serve_ids` takes the three
    id tensors `[batch, num_choices, length]` and gives `logits`.

    Example:
    >>> import tensorflow as tf
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.bert_multiple_choice import BertMultipleChoice
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=8, padding="longest")
    >>> model = BertMultipleChoice(BertBackbone(6, 1, 2, 8, 16), num_choices=3)
    >>> serve = multiple_choice_signatures(model, preprocessor)["serving_default"]
    >>> serve(tf.constant(["hi"]), tf.constant([["hi", "", "hi hi"]]))["choice"].shape.as_list()
    [1]
    """
    check_backend()
    num_choices = model.num_choices

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="context"),
            tf.TensorSpec([None, num_choices], tf.string, name="choices"),
        ],
        autograph=False,
    )
    def serve_text(context, choices):
        context = checked_shape(context, [None])
        choices = checked_shape(choices, [None, num_choices])
        checked = same_batch_size(context=context, choices=choices)
        with tf.control_dependencies(checked):
            features = preprocessor((tf.repeat(context, num_choices), tf.reshape(choices, [-1])))
        features = {
            name: tf.reshape(feature, [-1, num_choices, tf.shape(feature)[-1]])
            for name, feature in features.items()
        }
        logits = model(features, training=False)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits),
            "choice": tf.argmax(logits, axis=-1),
        }

    return {
        "serving_default": serve_text,
        "serve_ids": ids_signature(
            model, lambda logits: {"logits": logits}, shape=[None, num_choices, None]
        ),
    }


def by_length(rows_of, features, rows_per_pass=PASS_ROWS, dtype=tf.float32):
    """`rows_of(features)` in passes over texts of similar length, each padded to its longest.

    The texts are sorted by length and cut into passes of at most
    `rows_per_pass` rows (fewer, when that evens them out), so a batch of
    mixed lengths costs little more than its tokens. The answers come back
    in the batch's order. A batch of at most `rows_per_pass` rows is one
    pass, run directly.

    Args:
        rows_of: features -> a `dtype` tensor `[rows, ...]` with no length
            axis (a classifier's logits, say).
        features: packed `token_ids`, `segment_ids`, `padding_mask` int32
            `[batch, length]`.
        rows_per_pass: the most rows one pass runs.
        dtype: the dtype `rows_of` returns.

    Returns:
        `rows_of` of the whole batch.

    Example:
    >>> import tensorflow as tf
    >>> mask = tf.constant([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
    >>> features = {"token_ids": mask, "segment_ids": mask * 0, "padding_mask": mask}
    >>> def lengths_seen(features):
    ...     return tf.fill(tf.shape(features["token_ids"])[:1], tf.shape(features["token_ids"])[1])
    >>> # Passes: the texts of lengths 1 and 2 (padded to 2), then that of length 3.
    >>> by_length(lengths_seen, features, rows_per_pass=2, dtype=tf.int32).numpy().tolist()
    [3, 2, 2]
    """
    lengths = tf.reduce_sum(features["padding_mask"], axis=1)
    batch_size, length = tf.shape(lengths)[0], tf.shape(features["padding_mask"])[1]
    passes = tf.maximum((batch_size + rows_per_pass - 1) // rows_per_pass, 1)
    rows = tf.maximum((batch_size + passes - 1) // passes, 1)
    # Sorted by length; the last pass is topped up with copies of the first row.
    order = tf.pad(tf.argsort(lengths, stable=True), [[0, passes * rows - batch_size]])

    def one_pass(pass_features):
        pass_length = tf.reduce_max(tf.reduce_sum(pass_features["padding_mask"], axis=1))
        return rows_of({name: feature[:, :pass_length] for name, feature in pass_features.items()})

    def in_passes():
        passes_features = {
            name: tf.reshape(tf.gather(feature, order), [passes, rows, length])
            for name, feature in features.items()
        }
        outputs = tf.map_fn(one_pass, passes_features, fn_output_signature=dtype)
        outputs = tf.reshape(outputs, tf.concat([[passes * rows], tf.shape(outputs)[2:]], 0))
        kept = outputs[:batch_size]
        return tf.scatter_nd(order[:batch_size, tf.newaxis], kept, tf.shape(kept))

    return tf.cond(batch_size > rows_per_pass, in_passes, lambda: rows_of(features))


def ids_signature(model, outputs_of, shape=(None, None)):
    """`serve_ids`: the model on `token_ids`, `segment_ids`, `padding_mask` int32 `shape`.

    Args:
        model: the Keras model.
        outputs_of: the model's outputs -> the signature's dict of tensors.
        shape: the id tensors' shape, `[batch, length]` for most models.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> serve = ids_signature(BertBackbone(6, 1, 2, 8, 16), lambda outputs: outputs)
    >>> ids = np.ones((1, 3), "int32")
    >>> serve(ids, ids * 0, ids)["sequence_output"].shape.as_list()
    [1, 3, 8]
    """
    check_backend()

    @tf.function(
        input_signature=[
            tf.TensorSpec(shape, tf.int32, name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        ],
        autograph=False,
    )
    def serve_ids(token_ids, segment_ids, padding_mask):
        features = {
            "token_ids": checked_shape(token_ids, shape),
            "segment_ids": checked_shape(segment_ids, shape),
            "padding_mask": checked_shape(padding_mask, shape),
        }
        checks = _ids_agree(features) + _ids_in_range(getattr(model, "backbone", model), features)
        with tf.control_dependencies(checks):
            return outputs_of(model(features, training=False))

    return serve_ids


def _ids_agree(features):
    """Assert ops naming the id inputs whose shapes differ, or a padding_mask not of 0s and 1s."""
    token_ids = features["token_ids"]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(features[name]),
            tf.shape(token_ids),
            message=f"token_ids and {name} must have the same shape (batch and length); "
            f"their shapes are (first {name}, then token_ids)",
        )
        for name in ("segment_ids", "padding_mask")
    ]
    mask = features["padding_mask"]
    checks.append(
        tf.debugging.assert_equal(
            tf.reduce_all((mask == 0) | (mask == 1)),
            True,
            message="padding_mask must hold only 0 (padding) and 1 (a token)",
        )
    )
    return checks


def _ids_in_range(backbone, features):
    """Assert ops naming the input whose ids or length the backbone has no embedding for."""
    limits = {
        "token_ids": ("vocabulary_size", backbone.vocabulary_size),
        "segment_ids": ("num_segments", backbone.num_segments),
    }
    checks = [
        tf.debugging.assert_less(
            tf.shape(features["token_ids"])[-1],
            backbone.max_sequence_length + 1,
            message=f"token_ids must be at most max_sequence_length "
            f"({backbone.max_sequence_length}) long",
        )
    ]
    for name, (limit_name, limit) in limits.items():
        if limit < 1:
            continue  # a backbone without segment embeddings ignores segment_ids
        ids = features[name]
        checks.append(
            tf.debugging.assert_equal(
                tf.reduce_all((ids >= 0) & (ids < limit)),
                True,
                message=f"{name} must lie in 0..{limit - 1} ({limit_name} {limit})",
            )
        )
    return checks


def check_backend():
    """Raises ValueError unless Keras runs on `REQUIRED_BACKEND`.

    Example:
    >>> check_backend()  # under KERAS_BACKEND=tensorflow
    """
    if keras.backend.backend() != REQUIRED_BACKEND:
        raise ValueError(
            f"Serving signatures trace the model on Keras' {REQUIRED_BACKEND} backend, not "
            f"{keras.backend.backend()!r}: export_saved_model runs them there for you."
        )


def text_specs(*names):
    """`[batch]` string input specs with these names.

    Example:
    >>> [spec.name for spec in text_specs("question", "context")]
    ['question', 'context']
    """
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def checked_shape(tensor, shape):
    """`tensor`, checked at run time to have `shape` (`None` for any size).

    A signature's input spec alone is not checked by TF Serving, which feeds
    whatever a request holds; a string op given the wrong rank can crash
    the server. `EnsureShape` fails the request instead, naming the shapes.

    Example:
    >>> import tensorflow as tf
    >>> checked_shape(tf.constant(["a", "b"]), [None]).shape.as_list()
    [2]
    """
    return tf.ensure_shape(tensor, shape)


def same_batch_size(**inputs):
    """Assert ops failing with a message naming the inputs when their batch sizes differ.

    Example:
    >>> import tensorflow as tf
    >>> same_batch_size(context=tf.constant(["a"]), choices=tf.constant([["a", "b"]] * 2))
    Traceback (most recent call last):
    ...
    tensorflow.python.framework.errors_impl.InvalidArgumentError: ...
    """
    (first, tensor), *others = inputs.items()
    return [
        tf.debugging.assert_equal(
            tf.shape(other)[0],
            tf.shape(tensor)[0],
            message=f"{first} and {name} must hold as many rows (the batch size)",
        )
        for name, other in others
    ]


def _packed(preprocessor, texts):
    return preprocessor(texts[0] if len(texts) == 1 else tuple(texts))
