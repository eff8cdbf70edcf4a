"""Text processing: the WordPiece tokenizer and input packing."""

from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import BertTokenizer
