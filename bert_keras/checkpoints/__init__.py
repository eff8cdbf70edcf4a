"""Reading and writing BERT checkpoints of other tools, and the project's own.

One module per outside format (`huggingface`, `original`) holds that format's
name tables; `preset` detects a directory's format, maps its tensors onto
`BertBackbone` weights strictly, and saves.

Example:
>>> import tempfile
>>> from bert_keras.models.bert_backbone import BertBackbone
>>> directory = tempfile.mkdtemp() + "/tiny"
>>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
>>> checkpoint = load_checkpoint(directory)
>>> checkpoint.backbone_config["num_layers"], checkpoint.head_weights
(2, {})
"""

from bert_keras.checkpoints.preset import FORMATS
from bert_keras.checkpoints.preset import HEAD_NAMES
from bert_keras.checkpoints.preset import Checkpoint
from bert_keras.checkpoints.preset import convert_checkpoint
from bert_keras.checkpoints.preset import detect_format
from bert_keras.checkpoints.preset import load_backbone
from bert_keras.checkpoints.preset import load_checkpoint
from bert_keras.checkpoints.preset import save_backbone
from bert_keras.checkpoints.preset import save_checkpoint
from bert_keras.checkpoints.preset import set_backbone_weights
