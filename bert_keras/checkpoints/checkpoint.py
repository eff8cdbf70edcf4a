"""`Checkpoint`: what a checkpoint directory holds, as plain arrays and settings.

Readers (`bert_keras.checkpoints.reading`) fill one from any supported
format; writers (`bert_keras.checkpoints.writing`) write one back; models
(`bert_keras.models.checkpoint_weights`) take their weights from it. Nothing
here knows a Keras model.
"""

import dataclasses
import json

# The project's own format is a Hugging Face directory plus this file.
OWN_CONFIG_FILE = "bert_keras.json"
HEAD_NAMES = ("masked_lm", "next_sentence", "classifier", "token_classifier", "question_answering")
POOLER_PATHS = ("pooler_dense/kernel", "pooler_dense/bias")

# Words with more characters become [UNK]: the original tokenizer's limit, and
# the one transformers and every Hugging Face tokenizer.json use.
ORIGINAL_MAX_CHARS_PER_WORD = 200
HUGGING_FACE_MAX_CHARS_PER_WORD = 100


def read_json(path):
    """The JSON value in the file at `path`; a ValueError naming the file if it is not JSON.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "config.json")
    >>> _ = open(path, "w").write('{"vocab_size": 30,}')
    >>> read_json(path)
    Traceback (most recent call last):
    ...
    ValueError: .../config.json is not valid JSON: Expecting property name ... (char 18)
    """
    with open(path, encoding="utf-8") as file:
        try:
            return json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None


def tokenizer_settings(
    lowercase=True,
    strip_accents=None,
    tokenize_chinese_chars=True,
    max_input_chars_per_word=ORIGINAL_MAX_CHARS_PER_WORD,
):
    """The `BertTokenizer` arguments a checkpoint's tokenizer files set, as a dict.

    Example:
    >>> tokenizer_settings(lowercase=False, max_input_chars_per_word=100)["lowercase"]
    False
    """
    return {
        "lowercase": bool(lowercase),
        "strip_accents": strip_accents,
        "tokenize_chinese_chars": bool(tokenize_chinese_chars),
        "max_input_chars_per_word": int(max_input_chars_per_word),
    }


@dataclasses.dataclass
class Checkpoint:
    """Everything a checkpoint directory holds, in `bert_keras` terms.

    Attributes:
        backbone_config: `BertBackbone` constructor arguments.
        backbone_weights: dict `BertBackbone` weight path (e.g.
            "transformer_layer_0/intermediate_dense/kernel") -> numpy array.
            Lacks `POOLER_PATHS` only for classes built without a pooler
            (`BertForMaskedLM`, `BertForTokenClassification`, ...,
            `add_pooling_layer=False`).
        head_weights: dict head name -> dict weight path -> numpy array, for
            the heads the checkpoint holds: "masked_lm" (the `MaskedLMHead`
            paths `transform_dense/{kernel,bias}`,
            `transform_layer_norm/{gamma,beta}`, `output_bias` `[vocab]`; its
            output kernel is the tied token embedding), "next_sentence"
            (`kernel` `[hidden, 2]`, `bias` `[2]`), "classifier" and
            "token_classifier" (`kernel` `[hidden, labels]`, `bias`
            `[labels]`), "question_answering" (`kernel` `[hidden, 2]`,
            `bias` `[2]`, start then end logits). Kernels are `[in, out]`.
        vocabulary_file: path of the file holding the vocabulary (a vocab.txt,
            or a tokenizer.json: see `vocabulary.read_vocabulary`), or None.
        tokenizer_settings: the `BertTokenizer` arguments of the
            checkpoint's tokenizer (see `tokenizer_settings`): casing, accent
            stripping, and the word-length limit of its format.
        format: one of `bert_keras.checkpoints.FORMATS`, or None for a
            checkpoint made in memory.
        directory: where it was read from, or None.
        sources: dict weight path (backbone, or "head/path") -> the
            checkpoint tensor names it came from, for error messages.
        extra_config: the format's own config dict (e.g. config.json's
            id2label), untouched.
        label_names: the names of the classifier or token-classifier head's
            outputs, in order (config.json's id2label), or None.
        task_config: what a fine-tuning run recorded about its inputs, e.g.
            `{"text_pair": True}` for a classifier of sentence pairs
            (bert_keras.json's "task"); empty otherwise.

    Example:
    >>> import numpy as np
    >>> checkpoint = Checkpoint(
    ...     backbone_config={"num_layers": 1},
    ...     backbone_weights={"pooler_dense/bias": np.zeros(8)},
    ...     head_weights={"classifier": {"kernel": np.zeros((8, 3)), "bias": np.zeros(3)}})
    >>> checkpoint.num_labels(), checkpoint.tokenizer_settings["max_input_chars_per_word"]
    (3, 200)
    """

    backbone_config: dict
    backbone_weights: dict
    head_weights: dict = dataclasses.field(default_factory=dict)
    vocabulary_file: str = None
    tokenizer_settings: dict = dataclasses.field(default_factory=tokenizer_settings)
    format: str = None
    directory: str = None
    sources: dict = dataclasses.field(default_factory=dict)
    extra_config: dict = dataclasses.field(default_factory=dict)
    label_names: list = None
    task_config: dict = dataclasses.field(default_factory=dict)

    def without_heads(self, heads):
        """A copy without `heads` (names from `HEAD_NAMES`; ones it lacks are skipped).

        The label names and task settings go too once no fine-tuning head
        is left to describe.

        Raises:
            ValueError: a name that is not in `HEAD_NAMES`.

        Example:
        >>> import numpy as np
        >>> heads = {"next_sentence": {"bias": np.zeros(2)}, "classifier": {"bias": np.zeros(3)}}
        >>> sorted(Checkpoint({}, {}, heads).without_heads(["next_sentence"]).head_weights)
        ['classifier']
        >>> Checkpoint({}, {}).without_heads(["pooler"])
        Traceback (most recent call last):
        ...
        ValueError: 'pooler' is not a head; the heads are masked_lm, next_sentence, ...
        """
        for head in heads:
            if head not in HEAD_NAMES:
                raise ValueError(f"{head!r} is not a head; the heads are {', '.join(HEAD_NAMES)}.")
        kept = {name: weights for name, weights in self.head_weights.items() if name not in heads}
        sources = {
            path: names for path, names in self.sources.items() if path.split("/")[0] not in heads
        }
        copy = dataclasses.replace(self, head_weights=kept, sources=sources)
        if copy.num_labels() is None:
            copy.label_names, copy.task_config = None, {}
        return copy

    def num_labels(self, heads=("classifier", "token_classifier", "question_answering")):
        """Outputs of the first of `heads` the checkpoint holds, or None.

        Example:
        >>> Checkpoint({}, {}).num_labels() is None
        True
        """
        for head in heads:
            if head in self.head_weights:
                return int(self.head_weights[head]["bias"].shape[-1])
        return None

    def num_named_labels(self):
        """Outputs of the head whose labels have names (classifier or token_classifier).

        Example:
        >>> import numpy as np
        >>> Checkpoint({}, {}, {"question_answering": {"bias": np.zeros(2)}}).num_named_labels()
        """
        return self.num_labels(heads=("classifier", "token_classifier"))
