"""Sentence embeddings: the mean of a text's token vectors, as sentence-transformers' models use."""

import json
import os

import keras
import numpy as np

from bert_keras.checkpoints.writing import SENTENCE_TRANSFORMERS_CONFIG
from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs

# torch.nn.functional.normalize's floor on the norm, so a zero vector stays zero.
_NORM_EPSILON = 1e-12
# sentence-transformers' floor on the count of tokens, so a text of none pools to zeros.
_TOKEN_COUNT_EPSILON = 1e-9


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedMeanPooling(keras.layers.GlobalAveragePooling1D):
    """Keras' `GlobalAveragePooling1D` whose mean over no tokens is 0, not NaN.

    sentence-transformers' mean pooling divides by the number of real
    tokens clamped at 1e-9: an input whose `padding_mask` is all 0 (only
    arrays can be: a text has [CLS] and [SEP]) pools to a zero vector.

    Example:
    >>> import numpy as np
    >>> pooling = MaskedMeanPooling()
    >>> vectors = np.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    >>> keras.ops.convert_to_numpy(pooling(vectors, mask=np.array([[1, 1], [0, 0]]))).tolist()
    [[2.0, 3.0], [0.0, 0.0]]
    """

    def call(self, inputs, mask=None):
        if mask is None or self.data_format != "channels_last":
            return super().call(inputs, mask=mask)
        mask = keras.ops.expand_dims(keras.ops.cast(mask, inputs.dtype), -1)  # [batch, seq, 1]
        totals = keras.ops.sum(inputs * mask, axis=1, keepdims=self.keepdims)
        counts = keras.ops.sum(mask, axis=1, keepdims=self.keepdims)
        return totals / keras.ops.maximum(counts, _TOKEN_COUNT_EPSILON)


@keras.saving.register_keras_serializable(package="bert_keras")
class BertSentenceEncoder(BertTask):
    """Backbone → mean of the sequence output over real tokens: one vector per text.

    How sentence-transformers' BERT models (all-MiniLM-L6-v2 and its kind)
    are meant to be used: the average of the last layer's vectors over the
    tokens, [CLS] and [SEP] included, padding excluded (`padding_mask`), then
    (in `encode`) scaled to unit length, so a dot product is a cosine
    similarity. The pooling is Keras' `GlobalAveragePooling1D` with the
    padding mask (`MaskedMeanPooling`: no real tokens pool to zeros), in
    float32 under any dtype policy.

    A Functional model: inputs the backbone's, output float32
    `[batch, hidden_dim]` (not normalised). With a preprocessor
    (`from_preset` attaches one) `predict` and `encode` take raw text;
    texts are cut at the preprocessor's `sequence_length` (`from_preset`'s
    default: the directory's sentence-transformers `max_seq_length`, 256
    for all-MiniLM-L6-v2, else as `BertTask.from_preset`).

    Args:
        backbone: a `BertBackbone`.
        preprocessor: optional `BertPreprocessor`; needed for text.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    >>> encoder = BertSentenceEncoder(BertBackbone(7, 1, 2, 8, 16),
    ...                               preprocessor=BertPreprocessor(tokenizer, 16))
    >>> embeddings = encoder.encode(["a b", "a", "b b b"])
    >>> embeddings.shape, bool(np.allclose(np.linalg.norm(embeddings, axis=-1), 1.0))
    ((3, 8), True)
    """

    reads_pooled_output = False

    def __init__(self, backbone, **kwargs):
        # === Layers ===
        mean_pooling = MaskedMeanPooling(dtype="float32", name="mean_pooling")

        # === Functional graph ===
        inputs = backbone_inputs()
        sequence_output = backbone(inputs)["sequence_output"]  # [batch, seq, hidden]
        # The masked mean: sum over real tokens / their number.
        embeddings = mean_pooling(sequence_output, mask=inputs["padding_mask"])  # [batch, hidden]
        super().__init__(backbone, inputs=inputs, outputs=embeddings, **kwargs)

        # === Config ===
        self.mean_pooling = mean_pooling

    @classmethod
    def from_preset(cls, preset, sequence_length=None, **kwargs):
        """`BertTask.from_preset`, cutting texts where sentence-transformers cuts them.

        Without `sequence_length`, a directory's sentence_bert_config.json
        `max_seq_length` is the packed length, so that long texts embed as
        sentence-transformers embeds them.
        """
        if sequence_length is None and isinstance(preset, (str, os.PathLike)):
            sequence_length = sentence_transformers_length(preset)
        return super().from_preset(preset, sequence_length=sequence_length, **kwargs)

    def encode(self, texts, normalize=True, batch_size=None):
        """One embedding per text, as a numpy array.

        Args:
            texts: a string or a list (or array) of strings.
            normalize: scale each embedding to unit L2 norm (as
                `torch.nn.functional.normalize`), so dot products are cosine
                similarities.
            batch_size: texts per forward pass (default 32); each batch is
                padded to its longest text only.

        Returns:
            float32 numpy array `[len(texts), hidden_dim]` (`[hidden_dim]`
            for a single string).

        Example:
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> from bert_keras.text.preprocessor import BertPreprocessor
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
        >>> encoder = BertSentenceEncoder(BertBackbone(6, 1, 2, 8, 16),
        ...                               preprocessor=BertPreprocessor(tokenizer, 16))
        >>> encoder.encode("a a", normalize=False).shape
        (8,)
        """
        if self.preprocessor is None:
            raise ValueError(
                "BertSentenceEncoder.encode needs a preprocessor: build the encoder with "
                "BertSentenceEncoder.from_preset(directory) from a directory with a vocabulary, "
                "or pass preprocessor=BertPreprocessor(tokenizer, sequence_length)."
            )
        single = isinstance(texts, (str, bytes))
        embeddings = self.predict(
            [texts] if single else texts, batch_size=batch_size, verbose=0
        )  # [num_texts, hidden]
        embeddings = np.asarray(embeddings, "float32")
        if normalize:
            norms = np.linalg.norm(embeddings, axis=-1, keepdims=True)
            embeddings = embeddings / np.maximum(norms, _NORM_EPSILON)
        return embeddings[0] if single else embeddings


def sentence_transformers_length(directory):
    """The `max_seq_length` of `directory`'s sentence_bert_config.json, or None without one.

    Example:
    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> sentence_transformers_length(directory) is None
    True
    >>> with open(os.path.join(directory, "sentence_bert_config.json"), "w") as file:
    ...     json.dump({"max_seq_length": 256, "do_lower_case": False}, file)
    >>> sentence_transformers_length(directory)
    256
    """
    path = os.path.join(directory, SENTENCE_TRANSFORMERS_CONFIG)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            length = json.load(file).get("max_seq_length")
    except (ValueError, AttributeError) as error:
        raise ValueError(f"{path} is not a JSON object of settings: {error}") from None
    if length is None:
        return None
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(
            f"{path}: max_seq_length is {length!r} but must be a whole number, at least 1."
        )
    return length
