"""`--compilation_cache_dir`: XLA's compiled programs kept on disk for later runs, on jax only.

JAX's cache directory is process-wide, so the runs that use one are child
processes.
"""

import json
import os
import subprocess
import sys

import keras
import pytest

from bert_keras.training.execution import Execution

BACKEND = keras.backend.backend()

# A tiny backbone predicts at two widths, each a program, with the cache in argv[1]; prints how
# many programs came from the cache and the predictions' sum.
_PREDICT_WITH_CACHE = """
import json, sys
import jax, keras, numpy as np
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.training.execution import Execution

hits = []
jax.monitoring.register_event_listener(
    lambda event, **kwargs: hits.append(event) if event.endswith("/cache_hits") else None
)
Execution(compilation_cache_dir=sys.argv[1]).use_compilation_cache()
keras.utils.set_random_seed(3)
backbone = BertBackbone(50, 2, 2, 16, 32)
total = 0.0
for width in (8, 24):
    mask = np.ones((4, width), "int32")
    outputs = backbone.predict_on_batch(
        {"token_ids": mask * 7, "segment_ids": mask * 0, "padding_mask": mask}
    )
    total += float(np.sum(outputs["pooled_output"]))
print(json.dumps({"hits": len(hits), "total": total}))
"""


def _predict_with_cache(directory):
    completed = subprocess.run(
        [sys.executable, "-c", _PREDICT_WITH_CACHE, str(directory)],
        capture_output=True,
        text=True,
        env={**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(BACKEND != "jax", reason="only jax keeps compiled programs on disk")
def test_a_later_run_loads_the_programs_an_earlier_run_compiled(tmp_path):
    first = _predict_with_cache(tmp_path)
    written = sorted(os.listdir(tmp_path))
    assert first["hits"] == 0 and len(written) >= 2  # at least the two widths' programs
    second = _predict_with_cache(tmp_path)
    assert second["hits"] >= 2
    assert sorted(os.listdir(tmp_path)) == written
    assert second["total"] == first["total"]


def test_no_directory_changes_nothing():
    Execution().use_compilation_cache()
    if BACKEND == "jax":
        import jax

        assert jax.config.jax_compilation_cache_dir is None


def test_only_jax_takes_a_compilation_cache_dir(tmp_path):
    execution = Execution(compilation_cache_dir=str(tmp_path))
    if BACKEND == "jax":
        execution.validate()
        return
    with pytest.raises(ValueError, match=f"compilation_cache_dir is '{tmp_path}' but only jax"):
        execution.validate()


@pytest.mark.skipif(BACKEND != "jax", reason="only jax keeps a compilation cache")
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_compilation_cache_dir_that_cannot_be_made_is_refused(tmp_path):
    # Nobody, root included, makes directories in /proc; JAX alone would only warn and keep nothing.
    unwritable = Execution(compilation_cache_dir="/proc/bert_keras_cache")
    with pytest.raises(
        ValueError,
        match="compilation_cache_dir is '/proc/bert_keras_cache' but it cannot be made or written",
    ):
        unwritable.validate()
    Execution(compilation_cache_dir=str(tmp_path / "new" / "jax")).validate()
    assert os.listdir(tmp_path / "new" / "jax") == []  # made, and the probe file gone
