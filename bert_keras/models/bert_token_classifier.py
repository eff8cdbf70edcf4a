"""Token tagging (NER) on every position's output."""

import keras
import numpy as np

from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import dropout_dense
from bert_keras.models.bert_task import float32_logits
from bert_keras.models.input_checks import check_a_label_per_token
from bert_keras.models.input_checks import check_positive_count
from bert_keras.models.text_inputs import holds_dataset
from bert_keras.models.text_inputs import holds_text
from bert_keras.models.text_inputs import holds_words
from bert_keras.models.text_inputs import split_for_validation
from bert_keras.models.text_inputs import text_dataset
from bert_keras.models.token_cross_entropy import IGNORED_LABEL
from bert_keras.models.token_cross_entropy import TokenCrossEntropy


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenClassifier(BertTask):
    """Sequence output → dropout → dense per token (Devlin et al. §5.3, CoNLL NER).

    Outputs float32 logits `[batch, seq, num_classes]`. As in the paper, each
    word is labelled on its first word piece; the other pieces, [CLS], [SEP]
    and padding carry the label `IGNORED_LABEL` (-100), which the default loss
    (`TokenCrossEntropy`) skips.

    With a preprocessor, `fit`, `evaluate` and `predict` take sentences split
    into words, `[batch, (words)]` strings (a list of lists, numpy's object
    array of them, a `tf.RaggedTensor`, or a batched `tf.data.Dataset` of
    them), with one label (and optionally one sample weight) per word,
    `[batch, (words)]` ints. In
    `tf.data`, each word is tokenized, its label goes on its first piece and
    `IGNORED_LABEL` everywhere else; sentences longer than the preprocessor's
    `sequence_length` lose their last tokens, and their labels with them.
    `predict` also takes plain strings, as every task model does.

    Args:
        backbone: a `BertBackbone`.
        num_classes: number of tags.
        dropout: dropout before the output layer.
        preprocessor: optional `BertPreprocessor`; give it a fixed
            `sequence_length`, so every batch of logits has the same length.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "##s", "rejects"])
    >>> backbone = BertBackbone(vocabulary_size=8, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> tagger = BertTokenClassifier(backbone, num_classes=3,
    ...                              preprocessor=BertPreprocessor(tokenizer, 6))
    >>> tagger.compile()
    >>> words, word_labels = [["EUs", "rejects"], ["EU"]], [[1, 0], [2]]
    >>> history = tagger.fit(words, word_labels, epochs=1, verbose=0)
    >>> tuple(tagger.predict(words, verbose=0).shape)
    (2, 6, 3)
    >>> tuple(tagger.predict(["EUs rejects"], verbose=0).shape)
    (1, 6, 3)
    """

    checkpoint_head = "token_classifier"
    pads_batches_by_length = False  # per-token logits
    reads_pooled_output = False

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        check_positive_count("num_classes", num_classes)
        if num_classes < 2:  # Keras' sparse loss would squeeze its logits' last axis of 1
            raise ValueError(
                f"BertTokenClassifier got num_classes {num_classes}; tagging needs two tags or "
                "more (with one, every token's tag is known)."
            )
        inputs = backbone_inputs()
        sequence_output = backbone(inputs)["sequence_output"]
        logits = float32_logits(
            dropout_dense(sequence_output, num_classes, backbone.dtype_policy, dropout, "logits")
        )  # [batch, seq, num_classes]
        super().__init__(backbone, inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = num_classes
        self.label_classes = num_classes
        self.dropout = dropout

    def default_loss(self):
        return TokenCrossEntropy()

    def preprocess_text(self, texts):
        """The model's inputs for a batch of texts, or of sentences split into words."""
        import tensorflow as tf

        if isinstance(texts, tf.RaggedTensor) or (
            isinstance(texts, tf.Tensor) and texts.shape.rank == 2
        ):
            features, _ = self.preprocessor.call_with_word_ids(texts)
            return features
        return self.preprocessor(texts)

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        *,
        sample_weight=None,
        validation_split=0.0,
        shuffle=True,
        **kwargs,
    ):
        """`keras.Model.fit`; with a preprocessor, `x` may be words (labels per word) or text."""
        if self._takes_words(x):  # else `BertTask.fit` checks the inputs
            self._check_array_inputs(x, y, sample_weight, batch_size)
            if validation_split and kwargs.get("validation_data") is None:  # else ignored
                (x, y, sample_weight), kwargs["validation_data"] = split_for_validation(
                    self._ragged_words_and_labels(x, y, sample_weight), validation_split
                )
            validation_split = 0.0
            x = self.tagged_words_dataset(x, y, sample_weight, batch_size, shuffle)
            kwargs.setdefault("validation_batch_size", batch_size)
            # The dataset reshuffles itself each epoch.
            y, sample_weight, batch_size, shuffle = None, None, None, False
        return super().fit(
            x,
            y,
            batch_size,
            sample_weight=sample_weight,
            validation_split=validation_split,
            shuffle=shuffle,
            **kwargs,
        )

    def evaluate(self, x=None, y=None, batch_size=None, *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`; with a preprocessor, `x` may be words (labels per word) or text."""
        if self._takes_words(x):  # else `BertTask.evaluate` checks the inputs
            self._check_array_inputs(x, y, sample_weight, batch_size)
            x = self.tagged_words_dataset(x, y, sample_weight, batch_size)
            y = sample_weight = batch_size = None
        return super().evaluate(x, y, batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict`; with a preprocessor, `x` may be words or text."""
        if self._takes_words(x):  # else `BertTask.predict` checks the inputs
            self._check_array_inputs(x, batch_size=batch_size)
            import tensorflow as tf

            from bert_keras.text.preprocessor import ragged_words

            if not isinstance(x, tf.data.Dataset):
                x = ragged_words(x)
        return super().predict(x, batch_size, **kwargs)

    def tagged_words_dataset(
        self, words, word_labels=None, word_weights=None, batch_size=None, shuffle=False
    ):
        """Batches of `(features, labels[, sample_weights])` from words and their labels.

        Args:
            words: `[batch, (words)]` strings, or a batched `tf.data.Dataset`
                of `words`, `(words, word_labels)` or `(words, word_labels,
                word_weights)`.
            word_labels: `[batch, (words)]` int labels, one per word.
            word_weights: optional `[batch, (words)]` sample weights.
            batch_size: sentences per batch for array-like `words` (default 32).
            shuffle: reshuffle array-like `words` every epoch.

        Returns:
            A `tf.data.Dataset`; labels `[batch, sequence]` hold each word's
            label on its first piece and `IGNORED_LABEL` elsewhere; sample
            weights likewise, with 0 elsewhere.
        """
        import tensorflow as tf

        from bert_keras.text.preprocessor import on_first_pieces

        if not isinstance(words, tf.data.Dataset):
            words, word_labels, word_weights = self._ragged_words_and_labels(
                words, word_labels, word_weights
            )

        @tf.autograph.experimental.do_not_convert
        def packed_with_word_ids(texts):
            features, word_ids = self.preprocessor.call_with_word_ids(texts)
            return {**features, "word_ids": word_ids}

        @tf.autograph.experimental.do_not_convert
        def on_tokens(features, *word_columns):
            features = dict(features)
            word_ids = features.pop("word_ids")  # [batch, sequence]
            token_columns = tuple(
                on_first_pieces(word_ids, column, fill)
                for column, fill in zip(word_columns, (IGNORED_LABEL, 0))
            )
            return (features, *token_columns) if token_columns else features

        dataset = text_dataset(
            packed_with_word_ids, words, word_labels, word_weights, batch_size, shuffle
        )
        return dataset.map(on_tokens, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE
        )

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """`BertTask`'s checks, and that labels go per word with words, per token with ids or texts."""
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
        if isinstance(x, dict) and y is not None:
            check_a_label_per_token(x, y, source)
        if y is None or holds_dataset(x) or holds_words(x) or not holds_text(x):
            return
        length = getattr(self.preprocessor, "sequence_length", None)
        try:
            shape = np.shape(y)
        except ValueError:  # ragged lists: labels per word
            shape = None
        if shape is None or len(shape) != 2 or shape[1] != length:
            raise ValueError(
                f"{source}x holds texts not split into words, with labels "
                f"{'in rows of many lengths' if shape is None else f'of the shape {shape}'}: "
                "fit and evaluate take sentences split "
                "into words, [batch, (words)] strings (such as [text.split() for text in "
                "texts]), with one label per word; labels for texts are per packed token, "
                f"[batch, {length}]."
            )

    def _takes_words(self, x):
        if not holds_words(x):
            return False
        self._check_preprocessor_for_text()
        return True

    def _validation_dataset(self, validation_data, batch_size):
        if isinstance(validation_data, tuple):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
            if self._takes_words(x):  # else `BertTask._validation_dataset` checks them
                self._check_array_inputs(x, y, sample_weight, batch_size, "validation_data: ")
                return self.tagged_words_dataset(x, y, sample_weight, batch_size)
        elif self._takes_words(validation_data):
            return self.tagged_words_dataset(validation_data)
        return super()._validation_dataset(validation_data, batch_size)

    @staticmethod
    def _ragged_words_and_labels(words, word_labels, word_weights):
        """Words and per-word columns as ragged tensors, checked to have one value per word."""
        from bert_keras.text.preprocessor import ragged_rows
        from bert_keras.text.preprocessor import ragged_words

        words = ragged_words(words)
        columns = []
        for name, column in (("word_labels", word_labels), ("sample_weight", word_weights)):
            if column is None:
                columns.append(None)
                continue
            column = ragged_rows(column)
            counts, word_counts = column.row_lengths().numpy(), words.row_lengths().numpy()
            if counts.shape != word_counts.shape or (counts != word_counts).any():
                raise ValueError(
                    f"{name} must give one value per word; words per sentence are "
                    f"{word_counts.tolist()[:10]}, {name} per sentence {counts.tolist()[:10]} "
                    "(first 10 sentences)."
                )
            columns.append(column)
        return (words, *columns)

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "dropout": self.dropout}
