"""Data-parallel pretraining on two CPU devices matches one device, step for step."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from bert_keras.training.data_parallel import DataParallel

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKEND = keras.backend.backend()
COMPARED = ("loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
            "next_sentence_accuracy", "learning_rate")


@pytest.mark.skipif(BACKEND == "torch", reason="Keras' torch backend has no distribution API")
def test_two_replicas_train_as_one_device_does(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "tests.pretraining.two_device_run", str(tmp_path)],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=600,
        env={**os.environ, "KERAS_BACKEND": BACKEND},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2
    single, parallel = result["single"], result["data_parallel"]
    assert [record["step"] for record in parallel] == [record["step"] for record in single] == [3, 6]
    for one, two in zip(single, parallel):
        for name in COMPARED:
            np.testing.assert_allclose(two[name], one[name], rtol=1e-4, err_msg=name)
    assert result["max_weight_difference"] < 1e-4


@pytest.mark.skipif(BACKEND != "torch", reason="only Keras' torch backend lacks distribution")
def test_data_parallel_on_torch_is_refused():
    with pytest.raises(ValueError, match="needs the jax or tensorflow backend"):
        DataParallel("data_parallel")


def test_a_batch_that_does_not_split_among_the_devices_is_refused():
    replicas = DataParallel("none")
    replicas.num_replicas = 4  # as on a machine with four accelerators
    with pytest.raises(ValueError, match="train_batch_size is 6 but must be a multiple of the 4"):
        replicas.check_batch_size(6)


def test_tensorflow_replicas_clip_their_own_gradient_at_the_global_norm():
    replicas = DataParallel("none")
    replicas.num_replicas = 4
    # Keras' TF optimizer clips each replica's quarter-weighted gradient.
    expected = 0.25 if BACKEND == "tensorflow" else 1.0
    assert replicas.clipnorm(1.0) == expected
    assert replicas.clipnorm(None) is None


def test_an_unknown_distribution_is_refused():
    with pytest.raises(ValueError, match="distribution is 'mirrored' but must be one of"):
        DataParallel("mirrored")
