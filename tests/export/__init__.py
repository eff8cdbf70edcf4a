"""Tests of bert_keras.export, and what they share: a tiny vocabulary and model, a fresh-process server.

Imports nothing heavy: `tests.export.serve_export` runs below this package in
a process that must not have imported Keras.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
    "the a film plot is was good bad dull great ##s ##ly , . ! who what saw".split()
)
# A backbone small enough to train and export in seconds.
CONFIG = dict(
    vocabulary_size=len(VOCABULARY),
    num_layers=1,
    num_heads=2,
    hidden_dim=8,
    intermediate_dim=16,
    max_sequence_length=32,
)


def transported(texts):
    """Bytes as `tests.export.serve_export` takes them in JSON."""
    return [text.decode("utf-8", "surrogateescape") for text in texts]


def serve(directory, requests):
    """What `tests.export.serve_export` answers: {"eager": ..., "session": ..., "methods": ...}."""
    completed = subprocess.run(
        [sys.executable, "-m", "tests.export.serve_export", os.fspath(directory)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def write_vocabulary(directory):
    """VOCABULARY as directory/vocab.txt; returns its path."""
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(VOCABULARY) + "\n")
    return path
