"""Models fed token ids run where TensorFlow is not installed (jax and torch).

A GPU machine's image may hold jax or torch and no TensorFlow. Each test
runs a child process in which importing TensorFlow fails, as it would there.
"""

import os
import subprocess
import sys
import textwrap

import pytest

# Run in the child: everything on ids a user does with a task model, then a
# check that no TensorFlow module was loaded.
CHILD = textwrap.dedent(
    """
    import sys

    for name in ("tensorflow", "tensorflow_text"):
        sys.modules[name] = None  # importing it now fails, as when it is not installed

    import os
    import tempfile

    import keras
    import numpy as np

    from bert_keras.models import BertBackbone, BertClassifier, BertPretrainer
    from bert_keras.models import BertMaskedLM, BertMultipleChoice, BertTokenClassifier

    rng = np.random.default_rng(0)
    ids = {
        "token_ids": rng.integers(5, 30, (8, 6)).astype("int32"),
        "segment_ids": np.zeros((8, 6), "int32"),
        "padding_mask": np.ones((8, 6), "int32"),
    }
    labels = rng.integers(0, 2, 8)

    directory = os.path.join(tempfile.mkdtemp(), "tiny")
    vocabulary = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    with open(vocabulary, "w") as file:
        file.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok"]))
    BertBackbone(30, 1, 2, 8, 16).save_to_preset(directory, vocabulary_file=vocabulary)
    try:
        BertClassifier.from_preset(directory, num_classes=2)
        raise AssertionError("a preprocessor was built without TensorFlow")
    except ModuleNotFoundError as error:
        assert "preprocessor=None" in str(error) and error.name == "tensorflow", error
    classifier = BertClassifier.from_preset(directory, num_classes=2, preprocessor=None)
    classifier.compile(num_train_steps=4)
    history = classifier.fit(ids, labels, batch_size=4, epochs=2, validation_split=0.5, verbose=0)
    assert np.isfinite(history.history["val_loss"]).all(), history.history
    assert classifier.predict(ids, batch_size=4, verbose=0).shape == (8, 2)
    try:
        classifier.predict(["raw text"], verbose=0)
        raise AssertionError("raw text without a preprocessor was accepted")
    except ValueError as error:
        assert "has no preprocessor" in str(error), error

    path = os.path.join(tempfile.mkdtemp(), "classifier.keras")
    classifier.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        restored.predict(ids, verbose=0), classifier.predict(ids, verbose=0), atol=1e-6
    )

    pretrainer = BertPretrainer(BertBackbone(30, 1, 2, 8, 16))
    pretrainer.compile(num_train_steps=2)
    features = dict(ids, masked_positions=np.tile([[1, 2]], (8, 1)).astype("int32"))
    targets = {
        "masked_lm_ids": rng.integers(5, 30, (8, 2)).astype("int32"),
        "masked_lm_weights": np.ones((8, 2), "float32"),
        "next_sentence_labels": labels[:, None].astype("int32"),
    }
    losses = [pretrainer.train_on_batch(features, targets, return_dict=True)["loss"]
              for _ in range(2)]
    assert np.isfinite(losses).all(), losses

    for model in (
        BertMaskedLM(BertBackbone(30, 1, 2, 8, 16)),
        BertTokenClassifier(BertBackbone(30, 1, 2, 8, 16), num_classes=3),
        BertMultipleChoice(BertBackbone(30, 1, 2, 8, 16), num_choices=2),
    ):
        assert model.count_params() > 0

    loaded = sorted(name for name, module in sys.modules.items()
                    if name.split(".")[0] in ("tensorflow", "tensorflow_text") and module)
    assert not loaded, loaded
    print("ok", keras.backend.backend())
    """
)


@pytest.mark.one_backend
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_task_models_on_token_ids_need_no_tensorflow(backend):
    result = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, "KERAS_BACKEND": backend},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.split()[-2:] == ["ok", backend]
