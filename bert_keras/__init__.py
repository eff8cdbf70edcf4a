"""bert_keras: BERT for Keras 3 on TensorFlow, JAX and PyTorch.

The public names are imported on first use (PEP 562), so importing a light
submodule (e.g. `bert_keras.finetuning.flags`) loads no Keras or TensorFlow.

Example:
>>> import bert_keras
>>> backbone = bert_keras.BertBackbone.from_preset("bert_tiny")
>>> backbone.num_layers
2
"""

import importlib

__version__ = "0.1.0"

# Public name -> the module that defines it.
_PUBLIC_NAMES = {
    "BertBackbone": "bert_keras.models.bert_backbone",
    "BertClassifier": "bert_keras.models.bert_classifier",
    "BertMaskedLM": "bert_keras.models.bert_masked_lm",
    "BertMultipleChoice": "bert_keras.models.bert_multiple_choice",
    "BertPretrainer": "bert_keras.models.bert_pretrainer",
    "BertQuestionAnswerer": "bert_keras.models.bert_question_answerer",
    "BertSentenceEncoder": "bert_keras.models.bert_sentence_encoder",
    "BertTokenClassifier": "bert_keras.models.bert_token_classifier",
    "BertPreprocessor": "bert_keras.text.preprocessor",
    "BertTokenizer": "bert_keras.text.tokenizer",
}

__all__ = sorted(_PUBLIC_NAMES)


def __getattr__(name):
    if name not in _PUBLIC_NAMES:
        raise AttributeError(f"module 'bert_keras' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC_NAMES[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC_NAMES))
