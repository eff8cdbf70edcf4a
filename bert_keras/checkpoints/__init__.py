"""BERT checkpoint formats, read into and written from plain arrays: no model here.

`reading` recognises a directory's format and reads it into a `Checkpoint`
(config, arrays by weight path, heads, vocabulary, tokenizer settings, label
names); `writing` writes one back; `huggingface`, `original` and `keras_hub` hold
each format's name tables and files, `name_tables` runs those tables both
ways, and `vocabulary` reads vocab.txt and tokenizer.json and writes vocab.txt.
`bert_keras.models.checkpoint_weights` puts a `Checkpoint` onto a model.

Example:
>>> FORMATS, OUTPUT_FORMATS
(('bert_keras', 'huggingface', 'original', 'keras_hub', 'keras'), ('bert_keras', 'original', 'keras_hub'))
"""

from bert_keras.checkpoints.checkpoint import HEAD_NAMES
from bert_keras.checkpoints.checkpoint import Checkpoint
from bert_keras.checkpoints.checkpoint import tokenizer_settings
from bert_keras.checkpoints.reading import FORMATS
from bert_keras.checkpoints.reading import detect_format
from bert_keras.checkpoints.reading import keras_file_checkpoint
from bert_keras.checkpoints.reading import load_keras_file
from bert_keras.checkpoints.reading import read_checkpoint
from bert_keras.checkpoints.reading import read_tokenizer_settings
from bert_keras.checkpoints.reading import vocabulary_file
from bert_keras.checkpoints.writing import OUTPUT_FORMATS
from bert_keras.checkpoints.writing import write_checkpoint
