"""`make demo` (tasks.demo): the toy task it fine-tunes on, and the whole run on the default backend."""

import doctest
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from tasks import demo

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_docstring_examples_run():
    result = doctest.testmod(demo, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_toy_labels_name_the_majority_word_group():
    inputs, labels = demo.toy_batches(num_batches=8, batch_size=32, sequence_length=64)
    words = inputs["token_ids"][:, 1:]
    assert (inputs["token_ids"][:, 0] == 101).all()
    assert np.isin(words, list(demo.GROUP_A) + list(demo.GROUP_B)).all()
    share_a = np.isin(words, list(demo.GROUP_A)).mean(axis=1)
    assert 0.4 < labels.mean() < 0.6
    # 63 words drawn 70:30: the drawn majority agrees with the label for almost every sequence.
    assert ((share_a > 0.5) == (labels == 1)).mean() > 0.97
    assert abs(share_a[labels == 1].mean() - demo.MAJORITY_SHARE) < 0.03


@pytest.mark.large
@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the whole demo (about 70 s) runs once, in a subprocess on the tensorflow backend that "
    "`make demo` uses; it is started from the torch suite, the shortest of the three",
)
def test_demo_pretrains_then_fine_tunes_then_reloads(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": REPOSITORY}
    run = subprocess.run(
        [sys.executable, "-m", "tasks.demo", f"--output_dir={tmp_path}"],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    pretrained = re.search(r"masked-LM loss ([\d.]+) -> ([\d.]+)", run.stdout)
    assert float(pretrained.group(2)) < float(pretrained.group(1)) - 1.0
    fine_tuned = re.search(r"fine-tuned \d+ steps: .* accuracy ([\d.]+) -> ([\d.]+)", run.stdout)
    assert float(fine_tuned.group(2)) >= demo.MIN_ACCURACY
    assert "max |reloaded - original| logits: 0.00e+00" in run.stdout
    assert (tmp_path / "classifier.keras").is_file()
