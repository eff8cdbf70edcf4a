"""Every task's export answers the same under TensorFlow 2.17 and its tensorflow-text as here.

TF Serving 2.17 to 2.19 are built on TensorFlow 2.17. `make serving-compat`
runs this in the project's environment with `--side_python` naming a Python
that has only tensorflow 2.17 and tensorflow-text 2.17 (`.venv-tf217`): it
exports a small random model of each task, answers the same requests with
`tests.export.serve_export` (TF2 loader and v1 session) under both Pythons,
and fails naming the task, signature and output that differ (floats by more
than 1e-5, anything else at all).

    python -m tests.export.compat_exports --side_python=.venv-tf217/bin/python
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_keras.checkpoints import write_checkpoint
from bert_keras.export.saved_model import export_saved_model
from bert_keras.models.bert4rec import Bert4Rec
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.models.checkpoint_weights import model_checkpoint
from tests.export import CONFIG
from tests.export import ROOT
from tests.export import transported
from tests.export import write_vocabulary

TEXTS = [
    b"the film was good",
    b"",
    b"a dull , dull plot . " * 6,
    b"great films \xff\xfe!",
    "Caf\u00e9 \u6620\u753b \U0001f3ac".encode(),
]
TOLERANCE = 1e-5


def _models():
    """{task: (model, heads, task_config, label_names, requests)} of small random models."""
    keras.utils.set_random_seed(0)
    ids = {
        name: np.ones((2, 5), "int32") * value
        for name, value in (("token_ids", 6), ("segment_ids", 0), ("padding_mask", 1))
    }
    texts = transported(TEXTS)
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a good plot"]))
                for name in ("text", "text_pair")
            }
        )
    )
    return {
        "classifier": (
            BertClassifier(BertBackbone(**CONFIG), num_classes=3),
            {"classifier": "logits"},
            {"text_pair": True, "max_seq_length": 12},
            ["negative", "neutral", "positive"],
            {
                "serving_default": {"text": texts, "text_pair": texts[::-1]},
                "classify": {"inputs": transported([example.SerializeToString()])},
                "serve_ids": {name: value.tolist() for name, value in ids.items()},
            },
        ),
        "tagger": (
            BertTokenClassifier(BertBackbone(**CONFIG), num_classes=3),
            {"token_classifier": "logits"},
            {"max_seq_length": 12},
            ["O", "B-X", "I-X"],
            {"serving_default": {"text": texts}},
        ),
        "question_answering": (
            BertQuestionAnswerer(BertBackbone(**CONFIG)),
            {"question_answering": "span_logits"},
            {"max_seq_length": 24, "doc_stride": 5, "max_query_length": 6},
            None,
            {"serving_default": {"question": texts[::-1], "context": texts}},
        ),
        "multiple_choice": (
            BertMultipleChoice(BertBackbone(**CONFIG), num_choices=2),
            {"classifier": "choice_score"},
            {"task": "multiple_choice", "num_choices": 2, "max_seq_length": 12},
            None,
            {"serving_default": {"context": texts, "choices": [[t, "a plot"] for t in texts]}},
        ),
        "backbone": (
            BertBackbone(**CONFIG),
            {},
            {},
            None,
            {
                "serving_default": {"text": texts},
                "serve_ids": {name: value.tolist() for name, value in ids.items()},
            },
        ),
    }


def _answers(python, directory, requests):
    completed = subprocess.run(
        [python, "-m", "tests.export.serve_export", directory],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if completed.returncode != 0:
        sys.exit(f"{python} could not serve {directory}:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _differences(here, there, where):
    if isinstance(here, dict):
        return [
            difference
            for key in sorted(set(here) | set(there))
            for difference in _differences(here.get(key), there.get(key), f"{where}/{key}")
        ]
    if isinstance(here, float) or (isinstance(here, list) and _holds_floats(here)):
        close = np.shape(here) == np.shape(there) and np.allclose(here, there, atol=TOLERANCE)
        return [] if close else [f"{where}: {here} here, {there} under the side Python"]
    return [] if here == there else [f"{where}: {here} here, {there} under the side Python"]


def _holds_floats(values):
    flat = np.asarray(values, dtype=object).ravel()
    return len(flat) > 0 and isinstance(flat[0], float)


def _recommender_export(work):
    """A small random Bert4Rec as tasks.recommend leaves it, exported; and its requests."""
    run_directory = os.path.join(work, "recommender")
    os.makedirs(run_directory)
    Bert4Rec(num_items=6, max_sequence_length=5, hidden_dim=8, intermediate_dim=16).save(
        os.path.join(run_directory, "model.keras")
    )
    items = ["a", "b", "c", "d", "e", "f"]
    with open(os.path.join(run_directory, "item_ids.json"), "w") as file:
        json.dump({"item_ids": items}, file)
    exported = export_saved_model(
        run_directory, os.path.join(work, "served", "recommender"), top_k=3
    )
    requests = {
        "serving_default": {"items": [["a", "b", ""], ["f", "new", ""], items[:3]]},
        "serve_ids": {"item_ids": [[1, 2, 0], [6, 0, 0]]},
    }
    return exported, requests


def _compare(task, exported, requests, side_python):
    here = _answers(sys.executable, exported, requests)
    there = _answers(side_python, exported, requests)
    print(f"{task}: {', '.join(sorted(requests))} answered under both", flush=True)
    return _differences(here, there, task)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side_python", required=True, help="Python with TensorFlow 2.17.")
    arguments = parser.parse_args(argv)
    differences = []
    with tempfile.TemporaryDirectory(prefix="serving_compat_") as work:
        vocabulary = write_vocabulary(work)
        for task, (model, heads, task_config, labels, requests) in _models().items():
            checkpoint = model_checkpoint(
                model,
                heads=heads or None,
                vocabulary_file=vocabulary,
                label_names=labels,
                task_config=task_config,
            )
            write_checkpoint(checkpoint, os.path.join(work, task))
            exported = export_saved_model(
                os.path.join(work, task), os.path.join(work, "served", task)
            )
            differences += _compare(task, exported, requests, arguments.side_python)
        exported, requests = _recommender_export(work)
        differences += _compare("recommender", exported, requests, arguments.side_python)
    if differences:
        sys.exit("The side Python answers differently:\n" + "\n".join(differences[:20]))
    print("Every export answers the same under the side Python.")


if __name__ == "__main__":
    main()
