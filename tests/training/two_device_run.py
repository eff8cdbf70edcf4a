"""Trains a tiny pretraining or fine-tuning run on one CPU device, and again on several.

Run in a subprocess, because the devices must exist before the backend
starts: `python -m tests.training.two_device_run WORK_DIR pretraining|finetuning
[data_parallel | model_parallel:BATCH,MODEL]` (data_parallel on two devices by
default; model_parallel on BATCH x MODEL devices, jax only). Prints one JSON
object: the replica count, both runs' histories, the largest difference
between their final weights and, for fine-tuning, both runs' predictions on a
dev split whose last batch is smaller than the others, and their scoring of a
model whose rows differ (`_scored_row_sums`). For pretraining, each
run's first checkpoint is also resumed under the other's distribution, and
the largest difference between those runs' final weights and the
single-device run's is printed too.
"""

import glob
import json
import os
import shutil
import sys


def make_cpu_devices(backend, count):
    if backend == "jax":
        flags = os.environ.get("XLA_FLAGS", "")  # the suite's compiler options stay
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}"
    elif backend == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count
        )


def execution(spec):
    """ "none", "data_parallel" or "model_parallel:B,M" as an `Execution`."""
    from bert_keras.training.execution import Execution

    distribution, _, mesh = spec.partition(":")
    mesh_shape = tuple(int(count) for count in mesh.split(",")) if mesh else None
    return Execution(distribution=distribution, mesh_shape=mesh_shape)


def pretrain(spec, work_dir, output_name=None):
    """Six steps of pretraining under `spec` into WORK_DIR/`output_name` (default: `spec`)."""
    import keras

    from bert_keras.pretraining.pretraining_run import PretrainingConfig
    from bert_keras.pretraining.pretraining_run import PretrainingRun
    from tests.test_case import TRAINING_BACKBONE

    config = PretrainingConfig(
        input_file=os.path.join(work_dir, "*.tfrecord"),
        output_dir=os.path.join(work_dir, output_name or spec),
        backbone_config={
            **TRAINING_BACKBONE,
            "dropout": 0.0,
        },  # the replicas would draw other masks
        max_seq_length=16,
        max_predictions_per_seq=3,
        train_batch_size=8,
        num_train_steps=6,
        num_warmup_steps=2,
        learning_rate=1e-3,
        save_checkpoints_steps=3,
        distribution=execution(spec).distribution,
        mesh_shape=execution(spec).mesh_shape,
    )
    run = PretrainingRun(config)
    if keras.backend.backend() == "tensorflow":
        # Keras clips each replica's gradient there, not their sum (see
        # DataParallel.clipnorm): the runs agree step for step only unclipped.
        run.model.optimizer.global_clipnorm = None
    history = run.train(verbose=0)
    return {
        "replicas": run.replicas.num_replicas,
        "history": history,
        "weights": _weights(run),
        "feed_forward_split": _feed_forward_split(run.model),
    }


def copy_first_checkpoint(work_dir, source_name, target_name):
    """Starts WORK_DIR/`target_name` with the step-3 checkpoint of WORK_DIR/`source_name`."""
    from bert_keras.pretraining.pretraining_run import CHECKPOINT_DIR

    target = os.path.join(work_dir, target_name, CHECKPOINT_DIR)
    os.makedirs(target)
    for path in glob.glob(os.path.join(work_dir, source_name, CHECKPOINT_DIR, "ckpt-00000003.*")):
        shutil.copy(path, target)


def resume_pretraining(spec, work_dir, source_name):
    """Continues `source_name`'s run from its step-3 checkpoint under `spec`."""
    target_name = f"{source_name}-then-{spec}"
    copy_first_checkpoint(work_dir, source_name, target_name)
    return pretrain(spec, work_dir, target_name)


def largest_difference(weights, others):
    """The largest absolute difference between two lists of arrays."""
    return float(max(abs(a - b).max() for a, b in zip(weights, others)))


def fine_tune(spec, work_dir):
    import keras

    import bert_keras.finetuning.classification
    import bert_keras.finetuning.run
    from bert_keras.finetuning.classification import ClassificationRun

    if keras.backend.backend() == "tensorflow":
        bert_keras.finetuning.run.GLOBAL_CLIPNORM = None  # as in `pretrain`
        # tf.distribute rewrites the input pipeline, which draws another
        # shuffle order from the same seed: both runs read the data in order.
        shuffled = bert_keras.finetuning.classification.classification_dataset
        bert_keras.finetuning.classification.classification_dataset = lambda *args, **kwargs: (
            shuffled(*args, **{**kwargs, "shuffle": False})
        )
    run = ClassificationRun(
        "csv",
        os.path.join(work_dir, "data"),
        os.path.join(work_dir, "checkpoint"),
        os.path.join(work_dir, spec),
        max_seq_length=12,
        execution=execution(spec),
    )
    run.model.get_layer("logits_dropout").rate = 0.0  # as the backbone's, in the checkpoint
    history = run.train(batch_size=4, learning_rate=1e-3, num_epochs=2, verbose=0)
    run.evaluate("dev", batch_size=2)
    predictions = None
    if run.replicas.is_chief:  # which alone writes them
        with open(os.path.join(work_dir, spec, "predictions_dev.tsv")) as file:
            predictions = file.read()
    return {
        "replicas": run.replicas.num_replicas,
        "history": [dict(zip(history, values)) for values in zip(*history.values())],
        "weights": _weights(run),
        "predictions": predictions,
        "feed_forward_split": _feed_forward_split(run.model),
        "scored_row_sums": _scored_row_sums(run),
    }


def _scored_row_sums(run):
    """Each row's token id sum as the run's scoring answers it and as it is; the task model's rows.

    The summing model is made under the run's replicas; its 5 rows have
    several lengths, in batches of 2 and a short last one. A scoring that
    gave every replica the whole batch would answer some rows with others'
    sums, and the task model's `predict_on_batch` more than 5 rows.
    """
    import keras
    import numpy as np

    class RowSums(keras.Model):
        def compiled_widths(self, step):
            return None

    mask = (np.arange(4) < np.array([[3], [1], [4], [2], [4]])).astype("int32")
    features = {"token_ids": mask * np.arange(1, 6)[:, None], "segment_ids": 0 * mask}
    features["padding_mask"] = mask
    with run.replicas.scope():
        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in features}
        token_ids = keras.ops.cast(inputs["token_ids"], "float32")
        model = RowSums(inputs, keras.ops.sum(token_ids, axis=-1, keepdims=True))
    scored = run.predict_features(model, features, batch_size=2)
    return {
        "scored": scored[:, 0].tolist(),
        "sums": features["token_ids"].sum(-1).tolist(),
        "task_model_rows_on_batch": len(run.model.predict_on_batch(features)),
    }


def write_classification_task(work_dir):
    """A checkpoint without dropout, 16 training sentences, 5 dev sentences."""
    from bert_keras.models.bert_backbone import BertBackbone

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "dull"]
    with open(os.path.join(work_dir, "vocab.txt"), "w") as file:
        file.write("\n".join(words) + "\n")
    BertBackbone(len(words), 1, 2, 8, 16, max_sequence_length=16, dropout=0.0).save_to_preset(
        os.path.join(work_dir, "checkpoint"), vocabulary_file=os.path.join(work_dir, "vocab.txt")
    )
    texts = ["good film", "bad plot", "dull dull film", "good good plot film", "bad", "film"]
    os.makedirs(os.path.join(work_dir, "data"))
    for split, count in (("train", 16), ("dev", 5)):
        rows = [
            f"{texts[i % 6]}\t{'yes' if 'good' in texts[i % 6] else 'no'}" for i in range(count)
        ]
        with open(os.path.join(work_dir, "data", f"{split}.tsv"), "w") as file:
            file.write("text\tlabel\n" + "\n".join(rows) + "\n")


def _feed_forward_split(model):
    """The mesh axes the first feed-forward kernel is split along, on jax; else None."""
    import keras

    if keras.backend.backend() != "jax":
        return None
    kernel = next(v for v in model.weights if v.path.endswith("intermediate_dense/kernel"))
    return list(getattr(kernel.value.sharding, "spec", [None, None]))


def _weights(run):
    import keras
    import numpy as np

    return [np.asarray(keras.ops.convert_to_numpy(v), "float64") for v in run.model.weights]


JOBS = {"pretraining": pretrain, "finetuning": fine_tune}


def write_job_data(work_dir, job):
    """Writes what `job` reads into `work_dir`."""
    if job == "pretraining":
        from tests.pretraining.synthetic_records import write_records

        write_records(os.path.join(work_dir, "records.tfrecord"), 48)
    else:
        write_classification_task(work_dir)


def main(work_dir, job, spec="data_parallel"):
    mesh_shape = execution(spec).mesh_shape
    devices = mesh_shape[0] * mesh_shape[1] if mesh_shape else 2
    make_cpu_devices(os.environ.get("KERAS_BACKEND", "tensorflow"), devices)
    write_job_data(work_dir, job)
    single, parallel = JOBS[job]("none", work_dir), JOBS[job](spec, work_dir)
    result = {"replicas": parallel.pop("replicas"), "resumed_weight_differences": {}}
    if job == "pretraining":
        for source, resumed_spec in (("none", spec), (spec, "none")):
            resumed = resume_pretraining(resumed_spec, work_dir, source)
            difference = largest_difference(resumed["weights"], single["weights"])
            result["resumed_weight_differences"][f"{source}-then-{resumed_spec}"] = difference
    result["max_weight_difference"] = largest_difference(
        single.pop("weights"), parallel.pop("weights")
    )
    print(json.dumps({**result, "single": single, "parallel": parallel}))


if __name__ == "__main__":
    main(*sys.argv[1:])
