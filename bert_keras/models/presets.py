"""The official BERT sizes (Devlin et al. 2019; Turc et al. 2019 for the small ones).

In this project a preset is one of these named sizes, built with fresh
weights; trained weights live in a checkpoint directory
(`bert_keras.checkpoints`). `from_preset` takes either, as in keras-hub.
Every preset uses the uncased English WordPiece vocabulary size (30,522),
512 positions, two segments and a feed-forward width of 4H.

`BERT4REC_PRESETS` are BERT4Rec's configurations (Sun et al. 2019).
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


def _bert4rec_config(max_sequence_length, mask_probability, dropout, attention_dropout):
    return {
        "num_layers": 2,
        "num_heads": 2,
        "hidden_dim": 64,
        "intermediate_dim": 256,
        "max_sequence_length": max_sequence_length,
        "dropout": dropout,
        "attention_dropout": attention_dropout,
        "mask_probability": mask_probability,
    }


# BERT4Rec (Sun et al. 2019) as its authors ran it: the sizes, lengths and mask
# proportions of the paper, the dropout rates of the original's bert_config_*_64.json.
# `mask_probability` is the share of items the training windows mask.
BERT4REC_PRESETS = {
    "bert4rec_ml1m": _bert4rec_config(200, 0.2, dropout=0.2, attention_dropout=0.2),
    "bert4rec_ml20m": _bert4rec_config(200, 0.2, dropout=0.1, attention_dropout=0.1),
    "bert4rec_beauty": _bert4rec_config(50, 0.6, dropout=0.5, attention_dropout=0.2),
    "bert4rec_steam": _bert4rec_config(50, 0.4, dropout=0.1, attention_dropout=0.1),
}


def bert4rec_preset_config(name):
    """Returns a copy of the BERT4Rec preset `name` (model sizes and `mask_probability`).

    Raises:
        ValueError: `name` is not a preset; the message lists the presets.

    Example:
    >>> bert4rec_preset_config("bert4rec_ml1m")["max_sequence_length"]
    200
    """
    if name not in BERT4REC_PRESETS:
        raise ValueError(f"Unknown BERT4Rec preset {name!r}. Known: {sorted(BERT4REC_PRESETS)}.")
    return dict(BERT4REC_PRESETS[name])
