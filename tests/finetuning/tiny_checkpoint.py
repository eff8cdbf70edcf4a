"""A one-layer checkpoint directory on a handful of words, for fine-tuning runs in tests."""

from bert_keras.models.bert_backbone import BertBackbone


def save_tiny_checkpoint(directory, words):
    """Saves a 1-layer, hidden-8 backbone of 16 positions with `words` as its vocabulary; returns the path."""
    vocabulary = directory / "vocab.txt"
    vocabulary.write_text("\n".join(words) + "\n")
    checkpoint = str(directory / "checkpoint")
    BertBackbone(len(words), 1, 2, 8, 16, max_sequence_length=16).save_to_preset(
        checkpoint, vocabulary_file=vocabulary
    )
    return checkpoint
