"""PretrainingRun: training, resuming, exporting, phase 2, mixed precision and bad input."""

import dataclasses
import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.data.input_file_error import InputFileError
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.pretraining import pretraining_run
from bert_keras.pretraining.pretraining_run import PretrainingConfig
from bert_keras.pretraining.pretraining_run import PretrainingRun
from bert_keras.pretraining.pretraining_run import fit_plan
from bert_keras.pretraining.pretraining_run import resolve_backbone_config
from bert_keras.training.checkpoint_manager import random_states
from bert_keras.training.data_parallel import DataParallel
from tests.pretraining.synthetic_records import write_records
from tests.test_case import TRAINING_BACKBONE

ON_TORCH = keras.backend.backend() == "torch"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    write_records(directory / "a.tfrecord", 24, seed=1)
    write_records(directory / "b.tfrecord", 24, seed=2)
    return str(directory / "*.tfrecord")


def tiny_config(records, output_dir, **overrides):
    settings = dict(
        input_file=records,
        output_dir=str(output_dir),
        backbone_config=TRAINING_BACKBONE,
        max_seq_length=16,
        max_predictions_per_seq=3,
        train_batch_size=4,
        num_train_steps=6,
        num_warmup_steps=2,
        learning_rate=1e-3,
        save_checkpoints_steps=2,
        keep_checkpoint_max=2,
    )
    settings.update(overrides)
    return PretrainingConfig(**settings)


def numpy_weights(model):
    return [keras.ops.convert_to_numpy(variable) for variable in model.weights]


def optimizer_state(model):
    return [keras.ops.convert_to_numpy(variable) for variable in model.optimizer.variables]


@pytest.fixture(scope="module")
def finished_run(records, tmp_path_factory):
    """A float32 run of 5 steps, checkpoints every 2: the one most tests look at."""
    run = PretrainingRun(
        tiny_config(records, tmp_path_factory.mktemp("finished"), num_train_steps=5)
    )
    run.history = run.train(verbose=0)
    return run


def test_a_run_writes_history_checkpoints_and_an_export(finished_run):
    history, output_dir = finished_run.history, finished_run.config.output_dir
    assert [record["step"] for record in history] == [2, 4, 5]
    assert set(history[0]) == {
        "step",
        "loss",
        "masked_lm_loss",
        "masked_lm_accuracy",
        "next_sentence_loss",
        "next_sentence_accuracy",
        "learning_rate",
        "examples_per_second",
        "seconds",
    }
    assert all(record["examples_per_second"] > 0 for record in history)
    # Linear decay to 0 at step 5 from the peak reached at step 2.
    np.testing.assert_allclose(
        [record["learning_rate"] for record in history], [1e-3, 1e-3 / 3, 0.0], rtol=1e-5
    )
    assert int(finished_run.model.optimizer.iterations) == 5
    assert sorted(os.listdir(os.path.join(output_dir, "checkpoints"))) == [
        "ckpt-00000004.json",
        "ckpt-00000004.weights.h5",
        "ckpt-00000005.json",
        "ckpt-00000005.weights.h5",
    ]
    with open(os.path.join(output_dir, "history.png"), "rb") as plot:
        assert plot.read(4) == b"\x89PNG"
    exported = read_checkpoint(os.path.join(output_dir, "export"))
    assert sorted(exported.head_weights) == ["masked_lm", "next_sentence"]
    backbone = BertBackbone.from_preset(os.path.join(output_dir, "export"))
    for ours, theirs in zip(numpy_weights(backbone), numpy_weights(finished_run.model.backbone)):
        np.testing.assert_array_equal(ours, theirs)


def test_tensorboard_has_the_masked_lm_accuracy_at_each_checkpoint_step(finished_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(
        os.path.join(finished_run.config.output_dir, "tensorboard", "train"),
        size_guidance={"tensors": 0},
    )
    events.Reload()
    assert [event.step for event in events.Tensors("epoch_masked_lm_accuracy")] == [2, 4, 5]


def test_a_new_run_in_the_same_directory_restores_weights_optimizer_and_step(finished_run):
    resumed = PretrainingRun(dataclasses.replace(finished_run.config, num_train_steps=8))
    assert resumed.initial_step == 5
    assert int(resumed.model.optimizer.iterations) == 5
    for ours, saved in zip(optimizer_state(resumed.model), optimizer_state(finished_run.model)):
        np.testing.assert_array_equal(ours, saved)
    for ours, saved in zip(numpy_weights(resumed.model), numpy_weights(finished_run.model)):
        np.testing.assert_array_equal(ours, saved)
    # Dropout's random streams too: a fresh model's start where the first run's did.
    states = random_states(finished_run.model)
    assert len(states) == 3 and random_states(resumed.model) == states
    # It continues with a 1-step epoch to the next checkpoint boundary, then whole intervals.
    assert fit_plan(resumed.initial_step, 2, 8) == [(5, 2, 3, 1), (6, 3, 4, 2)]


def test_the_step_is_xla_compiled_unless_the_backend_is_torch_or_the_config_says_no(
    finished_run, records, tmp_path
):
    assert finished_run.model.jit_compile is not ON_TORCH
    assert (
        PretrainingRun(tiny_config(records, tmp_path, jit_compile=False)).model.jit_compile is False
    )


def test_resumed_batches_are_those_an_uninterrupted_run_sees_next(finished_run):
    uninterrupted = [
        features["token_ids"].numpy() for features, _ in finished_run.dataset(0).take(20)
    ]
    resumed = [features["token_ids"].numpy() for features, _ in finished_run.dataset(13).take(7)]
    # 20 batches of 4 from 48 examples: the resumed part crosses an epoch boundary.
    for ours, expected in zip(resumed, uninterrupted[13:]):
        np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize(
    "mixed_precision, extra, iterations",
    [
        # Each precision also exercises one of the step-counting settings.
        # bfloat16 and accumulation take no backend-specific path: one suite runs them.
        pytest.param(
            "bfloat16",
            {"gradient_accumulation_steps": 2},
            4,
            marks=pytest.mark.one_backend,
        ),
        ("float16", {"steps_per_execution": 1 if ON_TORCH else 2}, 4),
    ],
)
def test_mixed_precision_trains_without_nan(mixed_precision, extra, iterations, records, tmp_path):
    run = PretrainingRun(
        tiny_config(records, tmp_path, num_train_steps=4, mixed_precision=mixed_precision, **extra)
    )
    assert run.model.backbone.compute_dtype == mixed_precision
    history = run.train(verbose=0)
    assert [record["step"] for record in history] == [2, 4]
    assert int(run.model.optimizer.iterations) == iterations
    assert history[-1]["learning_rate"] == 0.0
    assert all(np.isfinite(record["loss"]) for record in history)
    assert all(np.isfinite(weight).all() for weight in numpy_weights(run.model))
    # The export is float32 whatever the training precision.
    config = json.load(open(tmp_path / "export" / "bert_keras.json"))["config"]
    assert config["dtype"] == "float32"


@pytest.mark.one_backend  # a pipeline of two runs; each run is checked on every backend
def test_phase_two_starts_from_phase_one_export_with_longer_sequences(finished_run, tmp_path):
    write_records(
        tmp_path / "long" / "records.tfrecord", 16, max_seq_length=32, max_predictions_per_seq=5
    )
    phase_two = PretrainingRun(
        tiny_config(
            str(tmp_path / "long" / "*"),
            tmp_path / "phase2",
            backbone_config=None,
            init_checkpoint=os.path.join(finished_run.config.output_dir, "export"),
            max_seq_length=32,
            max_predictions_per_seq=5,
            num_train_steps=2,
        )
    )
    # Every weight, the heads included, starts where phase one ended; the optimizer starts afresh.
    for ours, theirs in zip(numpy_weights(phase_two.model), numpy_weights(finished_run.model)):
        np.testing.assert_array_equal(ours, theirs)
    assert int(phase_two.model.optimizer.iterations) == 0
    history = phase_two.train(verbose=0)
    assert [record["step"] for record in history] == [2]
    assert np.isfinite(history[0]["loss"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"max_seq_length": 32}, "records have max_seq_length 16 but 32 was expected"),
        (
            {"max_predictions_per_seq": 4},
            "records have max_predictions_per_seq 3 but 4 was expected",
        ),
        ({"input_file": "/no/such/records-*"}, "input_file: no file matches '/no/such/records-*'"),
        ({"num_warmup_steps": 7}, "num_warmup_steps is 7 but must be in [0, num_train_steps=6]"),
        (
            {"steps_per_execution": 4},
            "steps_per_execution is 4 but Keras' torch backend"
            if ON_TORCH
            else "save_checkpoints_steps x gradient_accumulation_steps is 2 batches",
        ),
        (
            {"backbone_config": {**TRAINING_BACKBONE, "max_sequence_length": 8}},
            "max_seq_length is 16 but the backbone has only 8 position embeddings",
        ),
        (
            {"backbone_config": None},
            "Give a backbone config (a preset or bert_config_file) or an init_checkpoint",
        ),
        ({"mixed_precision": "float8"}, "mixed_precision is 'float8' but must be one of"),
        ({"weight_decay": -0.1}, "weight_decay is -0.1 but must be >= 0."),
    ],
)
def test_bad_settings_fail_before_training(overrides, message, records, tmp_path):
    with pytest.raises((ValueError, FileNotFoundError)) as error:
        PretrainingRun(tiny_config(records, tmp_path / "run", **overrides))
    assert message in str(error.value)
    assert not (tmp_path / "run" / "history.jsonl").exists()


def test_a_model_axis_that_does_not_divide_the_widths_is_refused_before_building(
    records, tmp_path, monkeypatch
):
    def three_model_splits(*arguments):
        replicas = DataParallel("none")
        replicas.model_splits = 3  # as model_parallel's default mesh makes it on 3 devices
        return replicas

    monkeypatch.setattr(pretraining_run, "DataParallel", three_model_splits)
    with pytest.raises(
        ValueError, match="among 3 devices, which must divide the widths hidden_dim=16"
    ):
        PretrainingRun(tiny_config(records, tmp_path / "run"))


def test_records_that_hold_no_example_are_refused_before_training(tmp_path):
    # Repeated forever, an empty file would keep the run waiting for a first batch.
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        PretrainingRun(tiny_config(str(empty), tmp_path / "run"))
    assert str(error.value) == f"{empty} holds no records: there is nothing to read."


def test_a_vocabulary_larger_than_the_embeddings_is_refused(records, tmp_path):
    vocabulary = tmp_path / "vocab.txt"  # one token more than TRAINING_BACKBONE's 40
    vocabulary.write_text("".join(f"token{index}\n" for index in range(41)))
    with pytest.raises(
        ValueError, match="holds 41 tokens but the backbone's vocabulary_size is 40"
    ):
        PretrainingRun(tiny_config(records, tmp_path / "run", vocab_file=str(vocabulary)))
    vocabulary.write_text("".join(f"token{index}\n" for index in range(40)))
    PretrainingRun(tiny_config(records, tmp_path / "fits", vocab_file=str(vocabulary)))


@pytest.mark.parametrize("do_lower_case, warned", [(True, True), (False, False)])
def test_a_cased_vocabulary_marked_uncased_is_warned_of(
    do_lower_case, warned, records, tmp_path, caplog
):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("".join(f"Token{index}\n" for index in range(40)))
    config = tiny_config(
        records, tmp_path / "run", vocab_file=str(vocabulary), do_lower_case=do_lower_case
    )
    with caplog.at_level("WARNING"):
        PretrainingRun(config)
    expected = (
        f"--do_lower_case is true, but 40 of the 40 tokens of --vocab_file {vocabulary} hold "
        "upper-case letters ('Token0', 'Token1', 'Token2', ...)"
    )
    assert (expected in caplog.text) == warned


def test_records_of_a_larger_vocabulary_stop_the_run_instead_of_training_on_nan(records, tmp_path):
    small = {**TRAINING_BACKBONE, "vocabulary_size": 8}  # the records' ids reach past 8
    run = PretrainingRun(tiny_config(records, tmp_path / "run", backbone_config=small))
    with pytest.raises(
        InputFileError, match="hold a token id past the vocabulary_size 8 of the backbone"
    ):
        run.train(verbose=0)
    assert not (tmp_path / "run" / "export").exists()


def test_records_of_a_larger_vocabulary_than_the_vocab_file_stop_the_run(records, tmp_path):
    vocabulary = tmp_path / "vocab.txt"  # fits the 40 embeddings; the records' ids reach past 8
    vocabulary.write_text("".join(f"token{index}\n" for index in range(8)))
    run = PretrainingRun(tiny_config(records, tmp_path / "run", vocab_file=str(vocabulary)))
    with pytest.raises(
        InputFileError, match=f"hold a token id past the 8 tokens of vocab_file {vocabulary}"
    ):
        run.train(verbose=0)
    assert not (tmp_path / "run" / "export").exists()


def test_an_init_checkpoint_of_another_architecture_is_refused(records, tmp_path):
    BertBackbone(**{**TRAINING_BACKBONE, "num_layers": 2}).save_to_preset(str(tmp_path / "other"))
    with pytest.raises(
        ValueError, match="written with another architecture: num_layers is 2 there but 1 here"
    ):
        PretrainingRun(
            tiny_config(records, tmp_path / "run", init_checkpoint=str(tmp_path / "other"))
        )


def test_resuming_with_another_architecture_or_batching_is_refused(finished_run):
    config = finished_run.config
    with pytest.raises(
        ValueError, match="another architecture: hidden_dim is 16 there but 32 here"
    ):
        PretrainingRun(
            dataclasses.replace(config, backbone_config={**TRAINING_BACKBONE, "hidden_dim": 32})
        )
    with pytest.raises(ValueError, match="train_batch_size is 4 there but 8 here"):
        PretrainingRun(dataclasses.replace(config, train_batch_size=8))
    with pytest.raises(ValueError, match="bucket_by_length is False there but True here"):
        PretrainingRun(dataclasses.replace(config, bucket_by_length=True))
    with pytest.raises(ValueError, match="at step 5, past num_train_steps=4"):
        PretrainingRun(dataclasses.replace(config, num_train_steps=4))


def test_an_output_dir_holding_another_programs_checkpoints_is_refused(finished_run, tmp_path):
    shutil.copytree(finished_run.config.output_dir, tmp_path / "run")
    latest = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*.json"))[-1]
    latest.write_text(json.dumps({"settings": {}, "step": 5}))  # as tasks.recommend writes
    with pytest.raises(ValueError, match=r"ckpt-00000005.weights.h5 is not a pretraining check"):
        PretrainingRun(dataclasses.replace(finished_run.config, output_dir=str(tmp_path / "run")))


def test_resuming_with_or_without_float16_loss_scaling_is_refused(finished_run, caplog):
    config = dataclasses.replace(finished_run.config, num_train_steps=8)
    with pytest.raises(
        ValueError, match="mixed_precision is 'none' there but 'float16' here.*resume with"
    ):
        PretrainingRun(dataclasses.replace(config, mixed_precision="float16"))
    with caplog.at_level(logging.WARNING, logger="absl"):
        resumed = PretrainingRun(dataclasses.replace(config, mixed_precision="bfloat16"))
    assert "mixed_precision is 'none' there but 'bfloat16' here" in caplog.text
    assert int(resumed.model.optimizer.iterations) == 5


@pytest.mark.one_backend  # the run's records and settings, compared before any step
def test_resuming_on_records_made_again_is_refused_and_a_new_schedule_logged(
    records, tmp_path, caplog
):
    directory = tmp_path / "records"
    directory.mkdir()
    write_records(directory / "a.tfrecord", 24, seed=1)
    config = tiny_config(str(directory / "*.tfrecord"), tmp_path / "run", num_train_steps=2)
    PretrainingRun(config).train(verbose=0)
    longer = dataclasses.replace(config, num_train_steps=4)
    with caplog.at_level(logging.WARNING, logger="absl"):
        PretrainingRun(dataclasses.replace(longer, learning_rate=5e-4))
    assert "another learning-rate schedule from step 2 on" in caplog.text
    assert "learning_rate is 0.001 there but 0.0005 here" in caplog.text
    write_records(directory / "a.tfrecord", 20, seed=7)  # the same name, other records
    with pytest.raises(ValueError, match=r"input_file_bytes is \[\d+\] there but \[\d+\] here"):
        PretrainingRun(longer)


@pytest.mark.one_backend  # refused before any model is built
def test_an_output_dir_holding_another_programs_export_is_refused(records, tmp_path):
    BertClassifier(BertBackbone(30, 1, 2, 8, 16), 3).save_to_preset(tmp_path / "export")
    with pytest.raises(ValueError, match=r"export holds a model with the heads \['classifier'\]"):
        PretrainingRun(tiny_config(records, tmp_path))
    assert sorted(read_checkpoint(tmp_path / "export").head_weights) == ["classifier"]


@pytest.mark.one_backend  # the history file's bookkeeping
def test_a_run_that_starts_afresh_replaces_the_history_of_the_one_before(records, tmp_path):
    PretrainingRun(tiny_config(records, tmp_path, num_train_steps=4)).train(verbose=0)
    shutil.rmtree(tmp_path / "checkpoints")  # nothing to resume: the next run starts at step 0

    history = PretrainingRun(tiny_config(records, tmp_path, num_train_steps=2)).train(verbose=0)

    assert [record["step"] for record in history] == [2]


def test_a_bucketed_run_trains_and_records_its_data_order(records, tmp_path):
    config = tiny_config(records, tmp_path, num_train_steps=3, bucket_by_length=True)
    history = PretrainingRun(config).train(verbose=0)
    assert history[-1]["step"] == 3
    assert all(np.isfinite(record["loss"]) for record in history)
    with pytest.raises(ValueError, match="bucket_by_length is True there but False here"):
        PretrainingRun(dataclasses.replace(config, bucket_by_length=False, num_train_steps=4))


def test_backbone_config_from_a_file(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(
        json.dumps(
            {
                "vocab_size": 99,
                "hidden_size": 64,
                "num_hidden_layers": 3,
                "num_attention_heads": 4,
                "intermediate_size": 128,
            }
        )
    )
    config = resolve_backbone_config(bert_config_file=str(path))
    assert (config["vocabulary_size"], config["num_layers"], config["hidden_dim"]) == (99, 3, 64)
    other = tmp_path / "model.json"
    other.write_text("{}")
    with pytest.raises(ValueError, match="expected a file named bert_config.json"):
        resolve_backbone_config(bert_config_file=str(other))
