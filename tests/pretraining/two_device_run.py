"""Trains one tiny pretraining run on one CPU device and again data-parallel on two.

Run in a subprocess, because the second device must exist before the backend
starts: `python -m tests.pretraining.two_device_run WORK_DIR`. Prints one JSON
object: the replica count, both runs' histories and the largest difference
between their final weights.
"""

import json
import os
import sys


def make_two_cpu_devices(backend):
    if backend == "jax":
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    elif backend == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )


def train(distribution, work_dir):
    import keras
    import numpy as np

    from bert_keras.pretraining.pretraining_run import PretrainingConfig
    from bert_keras.pretraining.pretraining_run import PretrainingRun
    from tests.test_case import TRAINING_BACKBONE

    config = PretrainingConfig(
        input_file=os.path.join(work_dir, "*.tfrecord"),
        output_dir=os.path.join(work_dir, distribution),
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
        distribution=distribution,
    )
    run = PretrainingRun(config)
    if keras.backend.backend() == "tensorflow":
        # Keras clips each replica's gradient there, not their sum (see
        # DataParallel.clipnorm): the runs agree step for step only unclipped.
        run.model.optimizer.global_clipnorm = None
    history = run.train(verbose=0)
    weights = [keras.ops.convert_to_numpy(variable) for variable in run.model.weights]
    return run.replicas.num_replicas, history, [np.asarray(w, "float64") for w in weights]


def main(work_dir):
    make_two_cpu_devices(os.environ.get("KERAS_BACKEND", "tensorflow"))
    from tests.pretraining.synthetic_records import write_records

    write_records(os.path.join(work_dir, "records.tfrecord"), 48)
    _, single_history, single_weights = train("none", work_dir)
    replicas, parallel_history, parallel_weights = train("data_parallel", work_dir)
    print(
        json.dumps(
            {
                "replicas": replicas,
                "single": single_history,
                "data_parallel": parallel_history,
                "max_weight_difference": max(
                    float(abs(a - b).max()) for a, b in zip(single_weights, parallel_weights)
                ),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
