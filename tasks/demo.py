"""The end-to-end demo behind `make demo`.

Builds a bert_tiny backbone, puts a two-class head on its pooled output,
trains it for a few steps on a toy task (does a sequence contain token 7?),
saves the model as `.keras`, reloads it in safe mode and checks that the
reloaded model gives the same outputs.

    python -m tasks.demo --steps=30 --output_dir=/tmp/bert_keras_demo
"""

import os
import tempfile

from absl import app
from absl import flags
from absl import logging

_PRESET = flags.DEFINE_string("preset", "bert_tiny", "Backbone preset to build.")
_STEPS = flags.DEFINE_integer("steps", 20, "Training steps per epoch.")
_EPOCHS = flags.DEFINE_integer("epochs", 4, "Passes over the toy data.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 16, "Sequences per step.")
_SEQUENCE_LENGTH = flags.DEFINE_integer("sequence_length", 32, "Tokens per sequence.")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Where the .keras file goes; a temporary directory by default."
)

TARGET_TOKEN = 7


def toy_batches(num_batches, batch_size, sequence_length, seed=0):
    """Random sequences labelled 1 when they contain TARGET_TOKEN.

    Example:
    >>> inputs, labels = toy_batches(1, 4, 8)
    >>> inputs["token_ids"].shape, labels.shape
    ((4, 8), (4,))
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    size = (num_batches * batch_size, sequence_length)
    token_ids = rng.integers(1000, 1100, size=size).astype("int32")
    labels = rng.integers(0, 2, size=size[0]).astype("int32")
    where = rng.integers(1, sequence_length, size=size[0])
    token_ids[labels == 1, where[labels == 1]] = TARGET_TOKEN
    token_ids[:, 0] = 101  # [CLS]
    inputs = {
        "token_ids": token_ids,
        "segment_ids": np.zeros(size, "int32"),
        "padding_mask": np.ones(size, "int32"),
    }
    return inputs, labels


def build_classifier(preset):
    """bert_keras backbone + dense head on the pooled output, compiled."""
    import keras

    from bert_keras.models.bert_backbone import BertBackbone

    backbone = BertBackbone.from_preset(preset)
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in backbone.input}
    logits = keras.layers.Dense(2, name="logits")(backbone(inputs)["pooled_output"])
    model = keras.Model(inputs, logits, name=f"{preset}_classifier")
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3, weight_decay=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(argv):
    del argv
    import keras
    import numpy as np

    print(f"Keras {keras.__version__} on the {keras.backend.backend()} backend")
    model = build_classifier(_PRESET.value)
    print(f"{_PRESET.value}: {model.count_params():,} parameters")
    inputs, labels = toy_batches(_STEPS.value, _BATCH_SIZE.value, _SEQUENCE_LENGTH.value)
    history = model.fit(inputs, labels, batch_size=_BATCH_SIZE.value, epochs=_EPOCHS.value, verbose=2)
    print(
        f"trained {_EPOCHS.value * _STEPS.value} steps: loss "
        f"{history.history['loss'][0]:.3g} -> {history.history['loss'][-1]:.3g}, accuracy "
        f"{history.history['accuracy'][0]:.3f} -> {history.history['accuracy'][-1]:.3f}"
    )

    output_dir = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix="bert_keras_demo_")
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "classifier.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    probe = {name: value[:4] for name, value in inputs.items()}
    difference = np.abs(
        keras.ops.convert_to_numpy(model.predict_on_batch(probe))
        - keras.ops.convert_to_numpy(restored.predict_on_batch(probe))
    ).max()
    print(f"saved {path} ({os.path.getsize(path) / 1e6:.1f} MB), reloaded in safe mode")
    print(f"max |reloaded - original| logits: {difference:.2e}")
    if difference > 1e-5:
        logging.error("The reloaded model differs from the saved one.")
        raise SystemExit(1)


if __name__ == "__main__":
    app.run(main)
