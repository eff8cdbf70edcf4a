"""The official BERT sizes (Devlin et al. 2019; Turc et al. 2019 for the small ones).

In this project a preset is one of these named sizes, built with fresh
weights; trained weights live in a checkpoint directory
(`bert_keras.checkpoints`). `from_preset` takes either, as in keras-hub.
Every preset uses the uncased English WordPiece vocabulary size (30,522),
512 positions, two segments and a feed-forward width of 4H.
"""

BERT_VOCABULARY_SIZE = 30522


def _bert_config(num_layers, hidden_dim, num_heads):
    return {
        "vocabulary_size": BERT_VOCABULARY_SIZE,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "max_sequence_length": 512,
        "num_segments": 2,
    }


BACKBONE_PRESETS = {
    "bert_tiny": _bert_config(num_layers=2, hidden_dim=128, num_heads=2),
    "bert_mini": _bert_config(num_layers=4, hidden_dim=256, num_heads=4),
    "bert_small": _bert_config(num_layers=4, hidden_dim=512, num_heads=8),
    "bert_medium": _bert_config(num_layers=8, hidden_dim=512, num_heads=8),
    "bert_base": _bert_config(num_layers=12, hidden_dim=768, num_heads=12),
    "bert_large": _bert_config(num_layers=24, hidden_dim=1024, num_heads=16),
}


def backbone_preset_config(name):
    """Returns a copy of the backbone config of the preset `name`.

    Raises:
        ValueError: `name` is not a preset; the message lists the presets.

    Example:
    >>> backbone_preset_config("bert_tiny")["hidden_dim"]
    128
    """
    if name not in BACKBONE_PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}. Known presets: {sorted(BACKBONE_PRESETS)}, "
            "or a path to a checkpoint directory."
        )
    return dict(BACKBONE_PRESETS[name])
