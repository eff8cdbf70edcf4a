"""Masked-LM predictions on raw text: the tokens a checkpoint would put at each [MASK]."""

import numbers

import keras
import numpy as np
from keras import ops

from bert_keras.checkpoints import read_checkpoint
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.models.bert_backbone import INPUT_NAMES
from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import check_not_a_backbone_preset
from bert_keras.models.bert_task import checkpoint_backbone
from bert_keras.models.bert_task import checkpoint_preprocessor
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.input_checks import check_positive_count
from bert_keras.models.text_inputs import DEFAULT_BATCH_SIZE

# The checkpoint head (`Checkpoint.head_weights`) this model needs, and its layer.
MASKED_LM_HEAD = "masked_lm"
MASKED_LM_LAYER = "masked_lm_head"


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMaskedLM(BertTask):
    """Backbone + tied masked-LM head: token scores at masked positions (Devlin et al. §3.1).

    A Functional model. Inputs: the backbone's `token_ids`, `segment_ids`,
    `padding_mask` plus `masked_positions` `[batch, num_predictions]`.
    Output: float32 `masked_lm_logits` `[batch, num_predictions,
    vocabulary_size]`, computed by the same `MaskedLMHead` (dense +
    activation + layer norm, then the transposed word embeddings plus an
    output bias) as `BertPretrainer`'s, so the masked-LM head of a Hugging
    Face `BertForMaskedLM` or `BertForPreTraining` directory, or of a
    pretraining run's export, loads into it. The last encoder block
    computes only the masked rows.

    `fill_mask` is the text path, as transformers' `pipeline("fill-mask")`.
    Its preprocessor's tokenizer must keep "[MASK]" written in the text as
    one token (`BertTokenizer(..., special_tokens_in_strings=True)`, which
    `from_preset` builds); a plain tokenizer splits it into "[", "mask", "]".
    `fit` takes ids with labels `[batch, num_predictions]` (the original
    token ids) and sample weights (0 for padded predictions); its loss is
    the cross-entropy over the vocabulary.

    On raw text (with a preprocessor), `masked_positions` are each text's
    [MASK]s, in order, padded with 0 to the most [MASK]s of the texts.
    `predict(texts)` returns logits `[texts, most [MASK]s, vocabulary_size]`:
    row j of a text scores its j-th [MASK], and the rows past its own
    [MASK]s are padding, all 0 (`fill_mask` returns each text's [MASK]s
    alone). `fit(texts, labels)` and `evaluate` take labels `[texts, n]`:
    the token id each [MASK] stands for, in order, padded to at least the
    most [MASK]s of the texts (a text with fewer labels than [MASK]s is
    an error before training); without `sample_weight` each [MASK] weighs
    1 and the padding 0. A `tf.data.Dataset` of `(texts, labels)` pads each
    batch to its own most [MASK]s, so its labels must be as wide.

    Args:
        backbone: a `BertBackbone`.
        preprocessor: optional `BertPreprocessor` whose tokenizer keeps
            special tokens whole; needed by `fill_mask`.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertMaskedLM(backbone)
    >>> logits = model({"token_ids": np.array([[2, 4, 9, 3]]), "segment_ids": np.zeros((1, 4)),
    ...                 "padding_mask": np.ones((1, 4)), "masked_positions": np.array([[1]])})
    >>> tuple(logits.shape)
    (1, 1, 30)
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"],
    ...                           special_tokens_in_strings=True)
    >>> model = BertMaskedLM(BertBackbone(6, 1, 2, 8, 16),
    ...                      preprocessor=BertPreprocessor(tokenizer, 8))
    >>> logits = model.predict(["hi [MASK]", "[MASK] hi [MASK]"], verbose=0)
    >>> logits.shape, bool((logits[0, 1] == 0).all())  # one [MASK], then padding
    ((2, 2, 6), True)
    """

    checkpoint_head = MASKED_LM_HEAD
    output_layer_name = MASKED_LM_LAYER
    reads_pooled_output = False

    def __init__(self, backbone, **kwargs):
        # === Layers ===
        masked_lm_head = MaskedLMHead(
            token_embedding=backbone.token_embedding,
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            dtype=backbone.dtype_policy,
            name=MASKED_LM_LAYER,
        )

        # === Functional graph ===
        inputs = backbone_inputs("masked_positions")
        masked_outputs = backbone.sequence_output_at(
            {name: inputs[name] for name in INPUT_NAMES}, inputs["masked_positions"]
        )  # [batch, num_predictions, hidden]
        masked_lm_logits = masked_lm_head(masked_outputs)  # [batch, num_predictions, vocab]
        super().__init__(backbone, inputs=inputs, outputs=masked_lm_logits, **kwargs)

        # === Config ===
        self.masked_lm_head = masked_lm_head
        self.label_classes = backbone.vocabulary_size  # labels are token ids

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    @classmethod
    def from_preset(cls, preset, sequence_length=None, **kwargs):
        """The model on a checkpoint's backbone, masked-LM head and vocabulary.

        Unlike the other task models, the head is required: a directory
        without masked-LM weights (e.g. a plain `BertModel`) is refused,
        since a fresh head would predict noise. The preprocessor keeps
        "[MASK]" in the text whole and pads each batch to its longest text.

        Args:
            preset: a checkpoint directory with masked-LM head weights (a
                Hugging Face `BertForMaskedLM` or `BertForPreTraining`, the
                original release, a pretraining export).
            sequence_length: longest packed text (default: the one
                `save_to_preset` recorded, else the backbone's
                `max_sequence_length`); longer texts are cut, and `fill_mask`
                refuses one whose [MASK] is cut off.
            **kwargs: constructor arguments; `preprocessor=None` attaches
                none.

        Raises:
            ValueError: the checkpoint has no masked-LM head, or its head does
                not fit the backbone.

        Example:
        >>> import tempfile
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> directory = tempfile.mkdtemp() + "/plain"
        >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(directory)
        >>> BertMaskedLM.from_preset(directory)
        Traceback (most recent call last):
        ...
        ValueError: .../plain has no masked-LM head weights (it holds the heads [])....
        """
        check_not_a_backbone_preset(cls, preset)
        checkpoint = read_checkpoint(preset)
        if MASKED_LM_HEAD not in checkpoint.head_weights:
            # Of a keras-hub preset, only a BertTextClassifier's head is read.
            unread = (
                " (of a keras-hub preset, a masked-LM head is not read)"
                if checkpoint.format == "keras_hub"
                else ""
            )
            raise ValueError(
                f"{checkpoint.directory or preset} has no masked-LM head weights{unread} (it "
                f"holds the heads {sorted(checkpoint.head_weights)}); BertMaskedLM needs a "
                "checkpoint with one, e.g. a Hugging Face BertForMaskedLM or BertForPreTraining "
                "directory."
            )
        backbone = checkpoint_backbone(checkpoint, kwargs)
        if "preprocessor" not in kwargs:
            if sequence_length is None:
                sequence_length = checkpoint.task_config.get(
                    "max_seq_length", backbone.max_sequence_length
                )
            kwargs["preprocessor"] = checkpoint_preprocessor(
                checkpoint,
                sequence_length,
                by_length=True,
                special_tokens_in_strings=True,
            )
        model = cls(backbone, **kwargs)
        apply_checkpoint(model, checkpoint, heads={MASKED_LM_HEAD: MASKED_LM_LAYER})
        return model

    def preprocess_text(self, texts):
        """The preprocessor's inputs plus `masked_positions`: each text's [MASK]s, padded with 0.

        Example:
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> from bert_keras.text.preprocessor import BertPreprocessor
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"],
        ...                           special_tokens_in_strings=True)
        >>> backbone = BertBackbone(6, 1, 2, 8, 16)
        >>> model = BertMaskedLM(backbone, preprocessor=BertPreprocessor(tokenizer, 8))
        >>> model.preprocess_text(["hi [MASK]", "[MASK] hi [MASK]"])["masked_positions"].numpy()
        array([[2, 0],
               [1, 3]], dtype=int32)
        """
        import tensorflow as tf

        features = dict(self.preprocessor(texts))
        token_ids = features["token_ids"]  # [batch, seq]
        positions = tf.broadcast_to(tf.range(tf.shape(token_ids)[-1]), tf.shape(token_ids))
        is_mask = tf.equal(token_ids, self.preprocessor.tokenizer.mask_token_id)
        # [batch, most masks in a text]
        features["masked_positions"] = tf.ragged.boolean_mask(positions, is_mask).to_tensor()
        return features

    def _labelled_features(self, features, y, sample_weight):
        """Labels per [MASK] of texts packed into `features`, checked; weights 0 on the padding."""
        positions = features["masked_positions"]  # [texts, most masks], padded with 0
        if y is None or isinstance(y, dict):
            return features, y, sample_weight
        labels = np.asarray(y)
        most_masks = positions.shape[-1]
        if labels.ndim != 2 or labels.shape[1] < most_masks:
            index = int(np.argmax((positions != 0).sum(-1)))
            per_text = labels.shape[1] if labels.ndim == 2 else "not"
            raise ValueError(
                f"y has {per_text} labels per text (shape {labels.shape}), but text {index} "
                f"has {most_masks} [MASK] tokens: on texts, BertMaskedLM takes labels "
                "[texts, n], the token id each [MASK] stands for, in order, padded to the "
                "most [MASK]s of the texts."
            )
        if labels.shape[1] > most_masks:
            features = dict(
                features,
                masked_positions=np.pad(positions, [(0, 0), (0, labels.shape[1] - most_masks)]),
            )
        if sample_weight is None:
            # A [MASK] is never at position 0, which is [CLS].
            sample_weight = (features["masked_positions"] != 0).astype("float32")
        return features, labels, sample_weight

    def _text_predictions(self, features, predictions):
        """The logits of texts, 0 on the rows past each text's [MASK]s."""
        real = features["masked_positions"] != 0  # [texts, most masks]
        predictions = np.asarray(predictions)
        return np.where(real[..., None], predictions, 0).astype(predictions.dtype)

    def fill_mask(self, texts, top_k=5, batch_size=None):
        """The `top_k` likeliest tokens at each [MASK] of each text, best first.

        What transformers' `pipeline("fill-mask", top_k=top_k)` returns:
        each [MASK] is scored on its own (the other masks stay [MASK] in the
        input), with the softmax of its logits over the whole vocabulary.

        Args:
            texts: a string, or a list of strings, each with at least one
                "[MASK]".
            top_k: how many tokens to return per [MASK].
            batch_size: texts per forward pass, a positive whole number
                (default 32); each batch is padded to its longest text.

        Returns:
            For each text (for a single string, for it alone) a list with
            one entry per [MASK], in order, each a list of `top_k` dicts
            `{"token": str, "token_id": int, "score": float}`, highest score
            first.

        Raises:
            ValueError: `texts` is None, a text has no [MASK] (or its
                [MASK]s fall past the packed length), `top_k` is not a whole
                number from 1 to the vocabulary size, `batch_size` is not a
                positive whole number, there is no preprocessor, or its
                tokenizer splits "[MASK]".

        Example:
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> from bert_keras.text.preprocessor import BertPreprocessor
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
        >>> tokenizer = BertTokenizer(vocabulary, special_tokens_in_strings=True)
        >>> model = BertMaskedLM(BertBackbone(8, 1, 2, 8, 16),
        ...                      preprocessor=BertPreprocessor(tokenizer, 16))
        >>> [best] = model.fill_mask("the [MASK] sat", top_k=2)
        >>> len(best), sorted(best[0])
        (2, ['score', 'token', 'token_id'])
        >>> best[0]["score"] >= best[1]["score"]
        True
        >>> len(model.fill_mask(["[MASK] cat", "the [MASK] [MASK]"])[1])
        2
        >>> model.fill_mask(["the cat"])
        Traceback (most recent call last):
        ...
        ValueError: Text 0 ('the cat') has no [MASK] token to fill.
        >>> model.fill_mask(["the [MASK]"], top_k=2.0)
        Traceback (most recent call last):
        ...
        ValueError: top_k must be a whole number from 1 to 8, got 2.0.
        """
        if texts is None:
            raise ValueError("texts is None; give a text with [MASK], or a list of such texts.")
        check_positive_count("batch_size", batch_size)
        vocabulary_size = self.backbone.vocabulary_size
        if (
            not isinstance(top_k, numbers.Integral)
            or isinstance(top_k, bool)
            or not 1 <= top_k <= vocabulary_size
        ):
            raise ValueError(
                f"top_k must be a whole number from 1 to {vocabulary_size}, got {top_k!r}."
            )
        single = isinstance(texts, (str, bytes))
        texts = [texts] if single else list(texts)
        tokenizer = self._fill_mask_tokenizer()
        batch_size = batch_size or DEFAULT_BATCH_SIZE
        results = []
        for start in range(0, len(texts), batch_size):
            batch_texts = texts[start : start + batch_size]
            features = {
                name: value.numpy() for name, value in self.preprocess_text(batch_texts).items()
            }
            mask_counts = (features["token_ids"] == tokenizer.mask_token_id).sum(-1)
            self._check_masks(batch_texts, start, mask_counts, tokenizer)
            logits = self.predict_on_batch(features)  # [batch, most masks, vocabulary_size]
            scores, token_ids = ops.top_k(ops.softmax(logits, axis=-1), k=top_k)
            scores, token_ids = ops.convert_to_numpy(scores), ops.convert_to_numpy(token_ids)
            for text_scores, text_ids, count in zip(scores, token_ids, mask_counts):
                results.append(
                    [
                        [
                            {
                                "token": tokenizer.id_to_token(int(token_id)),
                                "token_id": int(token_id),
                                "score": float(score),
                            }
                            for score, token_id in zip(mask_scores, mask_ids)
                        ]
                        for mask_scores, mask_ids in zip(text_scores[:count], text_ids[:count])
                    ]
                )
        return results[0] if single else results

    def _fill_mask_tokenizer(self):
        if self.preprocessor is None:
            raise ValueError(
                "BertMaskedLM.fill_mask needs a preprocessor: build the model with "
                "BertMaskedLM.from_preset(directory), or pass preprocessor=BertPreprocessor("
                "BertTokenizer(vocabulary, special_tokens_in_strings=True), sequence_length)."
            )
        tokenizer = self.preprocessor.tokenizer
        if not getattr(tokenizer, "special_tokens_in_strings", False):
            raise ValueError(
                "The preprocessor's tokenizer splits [MASK] written in a text into ordinary "
                "pieces; build it with BertTokenizer(..., special_tokens_in_strings=True)."
            )
        return tokenizer

    def _check_masks(self, texts, start, packed_mask_counts, tokenizer):
        """Every text has a [MASK], and none was cut off by the packing."""
        import tensorflow as tf

        from bert_keras.text.tokenizer import MASK_TOKEN

        token_ids = tokenizer(texts)  # [batch, (tokens)], not truncated
        mask_counts = tf.reduce_sum(
            tf.cast(tf.equal(token_ids, tokenizer.mask_token_id), tf.int32), axis=-1
        ).numpy()
        for index, (text, count, packed) in enumerate(zip(texts, mask_counts, packed_mask_counts)):
            shown = text if len(text) <= 60 else text[:57] + "..."
            if not count:
                raise ValueError(
                    f"Text {start + index} ({shown!r}) has no {MASK_TOKEN} token to fill."
                )
            if packed < count:
                raise ValueError(
                    f"Text {start + index} ({shown!r}) has {count} {MASK_TOKEN} tokens but only "
                    f"{packed} fit in sequence_length {self.preprocessor.sequence_length}."
                )
