"""Pretraining and fine-tuning on several CPU devices or processes match one device."""

import contextlib
import importlib.machinery
import json
import os
import signal
import socket
import subprocess
import sys
import types

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.layout_map import bert_layout_map
from bert_keras.training import execution as execution_module
from bert_keras.training.data_parallel import DataParallel
from bert_keras.training.execution import Execution
from bert_keras.training.history_records import read_history
from tests.pretraining.synthetic_records import write_bert_config
from tests.pretraining.synthetic_records import write_records
from tests.programs import json_printed_by
from tests.test_case import TRAINING_BACKBONE
from tests.training.two_device_run import JOBS
from tests.training.two_device_run import copy_first_checkpoint
from tests.training.two_device_run import resume_pretraining
from tests.training.two_device_run import write_job_data

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKEND = keras.backend.backend()
COMPARED = (
    "loss",
    "masked_lm_loss",
    "masked_lm_accuracy",
    "next_sentence_loss",
    "next_sentence_accuracy",
    "learning_rate",
)


def _two_device_run(work_dir, job, spec="data_parallel", replicas=2):
    result = json_printed_by(["-m", "tests.training.two_device_run", str(work_dir), job, spec])
    assert result["replicas"] == replicas
    assert result["max_weight_difference"] < 1e-4
    if job == "pretraining":  # each run's step-3 checkpoint resumed under the other's
        resumed = result["resumed_weight_differences"]
        assert sorted(resumed) == sorted([f"none-then-{spec}", f"{spec}-then-none"])
        assert max(resumed.values()) < 1e-4, resumed
    return result["single"], result["parallel"]


def _assert_same_pretraining(single, parallel):
    assert (
        [record["step"] for record in parallel] == [record["step"] for record in single] == [3, 6]
    )
    for one, two in zip(single, parallel):
        for name in COMPARED:
            np.testing.assert_allclose(two[name], one[name], rtol=1e-4, err_msg=name)


def _assert_same_fine_tuning(single, parallel):
    # 16 examples in batches of 4, 2 passes: a history interval per step.
    steps = [record["step"] for record in single["history"]]
    assert [record["step"] for record in parallel["history"]] == steps == list(range(1, 9))
    for one, two in zip(single["history"], parallel["history"]):
        for name in ("loss", "accuracy"):
            np.testing.assert_allclose(two[name], one[name], rtol=1e-4, err_msg=name)
    # Predicted outside the replicas' scope, in batches of 2, 2 and 1.
    assert parallel["predictions"] == single["predictions"]
    for run in (single, parallel):  # a model whose rows differ, made under the replicas
        assert run["scored_row_sums"]["scored"] == run["scored_row_sums"]["sums"]
        assert run["scored_row_sums"]["task_model_rows_on_batch"] == 5


@pytest.mark.slow  # `make test` keeps the fine-tuning run of the same engine
@pytest.mark.large
@pytest.mark.skipif(BACKEND == "torch", reason="Keras' torch backend has no distribution API")
def test_two_replicas_pretrain_as_one_device_does(tmp_path):
    single, parallel = _two_device_run(tmp_path, "pretraining")
    _assert_same_pretraining(single["history"], parallel["history"])


@pytest.mark.large
@pytest.mark.skipif(BACKEND == "torch", reason="Keras' torch backend has no distribution API")
def test_two_replicas_fine_tune_as_one_device_does(tmp_path):
    _assert_same_fine_tuning(*_two_device_run(tmp_path, "finetuning"))


@pytest.mark.slow  # `make test` keeps the fine-tuning run of the same engine
@pytest.mark.large
@pytest.mark.skipif(BACKEND != "jax", reason="model parallelism runs on jax only")
def test_model_parallel_pretraining_on_a_2_by_2_mesh_trains_as_one_device_does(tmp_path):
    single, parallel = _two_device_run(tmp_path, "pretraining", "model_parallel:2,2", replicas=2)
    assert parallel["feed_forward_split"] == [None, "model"]
    _assert_same_pretraining(single["history"], parallel["history"])


@pytest.mark.large
@pytest.mark.skipif(BACKEND != "jax", reason="model parallelism runs on jax only")
def test_model_parallel_fine_tuning_on_a_1_by_2_mesh_trains_as_one_device_does(tmp_path):
    single, parallel = _two_device_run(tmp_path, "finetuning", "model_parallel:1,2", replicas=1)
    assert parallel["feed_forward_split"] == [None, "model"]
    _assert_same_fine_tuning(single, parallel)


@pytest.mark.large
@pytest.mark.skipif(BACKEND != "jax", reason="data_parallel spans processes on jax only")
def test_two_processes_of_the_program_train_as_one_does(tmp_path):
    write_records(tmp_path / "records.tfrecord", 48)
    config_file = write_bert_config(tmp_path / "bert_config.json")

    def program(output_dir, **environment):
        command = [
            sys.executable,
            "-m",
            "tasks.pretrain",
            f"--input_file={tmp_path}/*.tfrecord",
            f"--output_dir={tmp_path / output_dir}",
            f"--bert_config_file={config_file}",
            "--max_seq_length=16",
            "--max_predictions_per_seq=3",
            "--train_batch_size=8",
            "--num_train_steps=6",
            "--num_warmup_steps=2",
            "--learning_rate=1e-3",
            "--save_checkpoints_steps=3",
            "--distribution=data_parallel",
        ]
        return subprocess.Popen(
            command,
            cwd=REPOSITORY,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **environment},
        )

    with socket.socket() as free:
        free.bind(("localhost", 0))
        port = free.getsockname()[1]
    processes = [
        program(
            "two",
            KERAS_DISTRIBUTION_JOB_ADDRESSES=f"localhost:{port}",
            KERAS_DISTRIBUTION_NUM_PROCESSES="2",
            KERAS_DISTRIBUTION_PROCESS_ID=str(index),
        )
        for index in range(2)
    ]
    processes.append(program("one"))
    for process in processes:
        _, errors = process.communicate(timeout=600)
        assert process.returncode == 0, errors[-3000:]
    one, two = (read_history(tmp_path / name / "history.jsonl") for name in ("one", "two"))
    assert [record["step"] for record in two] == [record["step"] for record in one] == [3, 6]
    for single, parallel in zip(one, two):
        for name in COMPARED:
            np.testing.assert_allclose(parallel[name], single[name], rtol=1e-4, err_msg=name)
    one, two = (read_checkpoint(str(tmp_path / name / "export")) for name in ("one", "two"))
    for path, weights in one.backbone_weights.items():
        np.testing.assert_allclose(two.backbone_weights[path], weights, atol=1e-5, err_msg=path)


@pytest.mark.large
@pytest.mark.skipif(BACKEND != "torch", reason="torchrun's processes are torch's engine")
@pytest.mark.parametrize("job", ["pretraining", "finetuning"])
def test_two_torchrun_processes_train_as_one_process_does(tmp_path, job):
    write_job_data(str(tmp_path), job)
    single = JOBS[job]("none", str(tmp_path))
    if job == "pretraining":  # torchrun's processes resume its step-3 checkpoint too
        copy_first_checkpoint(str(tmp_path), "none", "none-then-data_parallel")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    command += ["-m", "tests.training.torch_ranks_run", str(tmp_path), job]
    with subprocess.Popen(
        command, cwd=REPOSITORY, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as processes:
        try:
            _, errors = processes.communicate(timeout=600)
        finally:  # torchrun and both of its workers, whatever happened
            with contextlib.suppress(ProcessLookupError):
                os.killpg(processes.pid, signal.SIGKILL)
    assert processes.returncode == 0, errors[-3000:]
    parallel = json.loads((tmp_path / "ranks.json").read_text())
    assert parallel["replicas"] == 2
    # The logged losses are each process's half of the batch; the weights
    # show that the two halves' gradients were averaged at every step.
    for one, two in zip(single["weights"], parallel["weights"]):
        np.testing.assert_allclose(two, one, atol=1e-5)
    if job == "finetuning":
        assert parallel["predictions"] == single["predictions"]
        assert parallel["scored_row_sums"]["scored"] == parallel["scored_row_sums"]["sums"]
    else:  # a checkpoint crosses from one process to torchrun's two and back
        for one, two in zip(single["weights"], parallel["resumed_weights"]):
            np.testing.assert_allclose(two, one, atol=1e-5)
        resumed = resume_pretraining("none", str(tmp_path), "data_parallel")
        for one, two in zip(single["weights"], resumed["weights"]):
            np.testing.assert_allclose(two, one, atol=1e-5)


@pytest.mark.skipif(BACKEND != "torch", reason="only Keras' torch backend lacks distribution")
def test_data_parallel_on_torch_without_torchrun_is_refused(monkeypatch):
    program = types.ModuleType("__main__")
    program.__spec__ = importlib.machinery.ModuleSpec("tasks.pretrain", None)
    monkeypatch.setitem(sys.modules, "__main__", program)
    with pytest.raises(
        ValueError, match="on Keras' torch backend needs processes started by"
    ) as raised:
        DataParallel("data_parallel")
    assert "torchrun --nproc_per_node=2 -m tasks.pretrain ..." in str(raised.value)


@pytest.mark.skipif(BACKEND != "torch", reason="torchrun's processes are torch's engine")
def test_one_torchrun_process_trains_as_data_parallel_of_one(monkeypatch, caplog):
    import torch.distributed as dist

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    environment = {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    for name, value in {**environment, "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(name, value)
    try:
        replicas = DataParallel("data_parallel")
        assert (replicas.num_replicas, replicas.num_processes, replicas.is_chief) == (1, 1, True)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert "found one device" in caplog.text


@pytest.mark.skipif(BACKEND == "jax", reason="jax has model parallelism")
def test_model_parallel_off_jax_is_refused():
    with pytest.raises(ValueError, match="'model_parallel' needs the jax backend"):
        DataParallel("model_parallel", layout_map=bert_layout_map)


@pytest.mark.skipif(BACKEND != "jax", reason="model parallelism runs on jax only")
def test_a_mesh_that_does_not_fit_the_devices_is_refused():
    devices = len(keras.distribution.list_devices())
    with pytest.raises(ValueError, match=rf"mesh_shape is \(2, 2\) .* the {devices} devices"):
        DataParallel("model_parallel", (2, 2), bert_layout_map)


def test_a_mesh_is_refused_without_model_parallel():
    with pytest.raises(ValueError, match="only model_parallel takes a mesh"):
        Execution(distribution="data_parallel", mesh_shape=(1, 2)).validate()
    with pytest.raises(ValueError, match="only model_parallel takes a mesh"):
        DataParallel("none", (1, 2))


@pytest.mark.parametrize("mesh_shape", [(-1, -4), ("2", ",", "2"), (2.0, 2.0)])
def test_a_mesh_of_anything_but_two_positive_counts_is_refused(mesh_shape):
    with pytest.raises(ValueError, match="must be two positive device counts, \\(batch, model\\)"):
        DataParallel("model_parallel", mesh_shape, bert_layout_map)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="only tensorflow refuses several processes")
def test_several_tensorflow_processes_are_refused(monkeypatch):
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    with pytest.raises(
        ValueError, match="KERAS_DISTRIBUTION_NUM_PROCESSES asks for several processes"
    ):
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


@pytest.mark.skipif(BACKEND == "torch", reason="Keras' torch backend has no distribution API")
def test_xla_compiles_on_jax_and_on_one_tensorflow_device_but_not_under_a_strategy(monkeypatch):
    assert DataParallel("none").jit_compile() is True
    assert DataParallel("data_parallel").jit_compile() is True  # one CPU device here
    assert DataParallel("data_parallel").jit_compile(requested=False) is False
    # On two devices TensorFlow trains under a MirroredStrategy, which leaves XLA off.
    monkeypatch.setattr(execution_module, "tensorflow_devices", lambda: ["GPU:0", "GPU:1"])
    assert DataParallel("none").jit_compile() is True
    left_off = execution_module.xla_left_off(BACKEND, "data_parallel")
    assert (left_off is None) is (BACKEND == "jax")


def test_an_explicit_jit_compile_that_cannot_run_is_warned_about(caplog, monkeypatch):
    # Two devices, as on a machine of two GPUs: TensorFlow's MirroredStrategy leaves XLA off.
    monkeypatch.setattr(execution_module, "tensorflow_devices", lambda: ["GPU:0", "GPU:1"])
    ignored = {
        "jax": [],
        "tensorflow": ["jit_compile is True but Keras runs TensorFlow's MirroredStrategy"],
        "torch": ["jit_compile is True but Keras' torch backend runs the training step eagerly"],
    }[BACKEND]
    with caplog.at_level("WARNING", logger="absl"):
        Execution(distribution="data_parallel", jit_compile=True).validate()
        Execution(distribution="data_parallel").validate()  # unset: nothing was asked for
        Execution(jit_compile=False).validate()
    warned = [
        record.getMessage() for record in caplog.records if "jit_compile" in record.getMessage()
    ]
    assert len(warned) == len(ignored)
    for message, start in zip(warned, ignored):
        assert message.startswith(start) and message.endswith("the flag is ignored.")


def test_an_unknown_distribution_is_refused():
    with pytest.raises(ValueError, match="distribution is 'mirrored' but must be one of"):
        DataParallel("mirrored")


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "KERAS_DISTRIBUTION_NUM_PROCESSES"])
def test_several_processes_that_do_not_share_the_work_are_refused(monkeypatch, variable):
    monkeypatch.setenv(variable, "2")
    with pytest.raises(ValueError, match=f"{variable} is 2: several processes .* distribution is"):
        DataParallel("none")


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow sees one CPU device here")
def test_data_parallel_on_one_device_says_so(caplog):
    with caplog.at_level("WARNING"):
        replicas = DataParallel("data_parallel")
    assert replicas.num_replicas == 1
    assert "distribution='data_parallel' found one device" in caplog.text
    assert "MirroredStrategy is left off" in caplog.text


def _batch_losses(distribution):
    """Per-batch losses of 2 epochs of `fit` on a dataset that reshuffles each epoch."""
    import tensorflow as tf

    replicas = DataParallel(distribution)
    keras.utils.set_random_seed(3)
    features = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((features, features[:, :1] * 2.0))
    dataset = dataset.shuffle(16, seed=1, reshuffle_each_iteration=True).batch(4)
    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"]))
    )
    with replicas.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.fit(dataset, epochs=2, verbose=0, shuffle=False, callbacks=[record])
    return losses


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow sees one CPU device here")
def test_data_parallel_on_one_tensorflow_device_trains_as_without_it():
    # A MirroredStrategy of one device reshuffled the dataset with other seeds.
    np.testing.assert_array_equal(_batch_losses("data_parallel"), _batch_losses("none"))


@pytest.mark.skipif(BACKEND != "jax", reason="only jax keeps a compilation cache")
def test_a_compilation_cache_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "cache").write_text("")
    execution = Execution(compilation_cache_dir=str(tmp_path / "cache" / "jax"))
    with pytest.raises(ValueError, match=f"but {tmp_path / 'cache'} is a file: name a directory"):
        execution.validate()


@pytest.mark.one_backend  # tf.data slicing, whatever the backend
def test_a_batch_the_processes_do_not_divide_is_refused_not_cut_short():
    import tensorflow as tf

    from bert_keras.training.torch_processes import TorchProcesses

    second = TorchProcesses.__new__(TorchProcesses)  # its place only, joining no process group
    second.rank, second.world_size = 1, 2
    batches = iter(second.local_share(tf.data.Dataset.range(5).batch(4)))
    assert next(batches).numpy().tolist() == [2, 3]
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not split among the 2 process"):
        next(batches)  # [4] would give no process anything


@pytest.mark.skipif(BACKEND != "jax", reason="model parallelism runs on jax only")
def test_a_backbone_under_a_model_axis_that_does_not_divide_its_widths_is_named():
    mesh = keras.distribution.DeviceMesh(  # as the default mesh of three devices
        (1, 3), ("batch", "model"), ["cpu:0", "cpu:1", "cpu:2"]
    )
    distribution = keras.distribution.ModelParallel(
        layout_map=bert_layout_map(mesh), batch_dim_name="batch"
    )
    with (
        distribution.scope(),
        pytest.raises(
            ValueError, match="among 3 devices, which must divide the widths hidden_dim=16"
        ),
    ):
        BertBackbone(**TRAINING_BACKBONE)
