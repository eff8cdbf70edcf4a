"""A fine-tuning run exports its model with label names; the export loads as a task model."""

import json
import logging

import keras
import numpy as np
import pytest
from absl import flags

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.data.length_batching import PREDICTION_COMPILE_TOKENS
from bert_keras.data.length_batching import TRAINING_COMPILE_TOKENS
from bert_keras.finetuning.classification import ClassificationRun
from bert_keras.finetuning.flags import define_flags
from bert_keras.finetuning.run import FineTuningRun
from bert_keras.finetuning.run import fit_plan
from bert_keras.finetuning.tagging import TaggingRun
from bert_keras.finetuning.training_diverged import TrainingDivergedError
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.training.execution import Execution
from bert_keras.training.history_records import read_history
from tests.finetuning.tiny_checkpoint import save_tiny_checkpoint

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "paris", "is", "fine"]


@pytest.fixture
def checkpoint(tmp_path):
    return save_tiny_checkpoint(tmp_path, WORDS)


@pytest.fixture
def sentiment_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(
        "text\tlabel\ngood\tpositive\nbad\tnegative\ngood good\tpositive\nbad fine\tnegative\n"
    )
    return str(data)


def _trained(data, checkpoint, output_dir, execution, num_epochs=1, **options):
    run = ClassificationRun(
        "csv", data, checkpoint, str(output_dir), max_seq_length=8, execution=execution, **options
    )
    history = run.train(batch_size=2, learning_rate=1e-3, num_epochs=num_epochs, verbose=0)
    weights = [keras.ops.convert_to_numpy(variable) for variable in run.model.weights]
    return run, history, weights


def test_classification_export_loads_with_its_label_names(
    checkpoint, sentiment_data, tmp_path, caplog
):
    run = ClassificationRun(
        "csv", sentiment_data, checkpoint, str(tmp_path / "out"), max_seq_length=8
    )
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)

    export = str(tmp_path / "out" / "export")
    assert read_checkpoint(export).label_names == list(run.label_names)
    assert read_checkpoint(export).task_config == {"text_pair": False, "max_seq_length": 8}
    config = json.loads((tmp_path / "out" / "export" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {str(i): name for i, name in enumerate(run.label_names)}
    restored = BertClassifier.from_preset(export, num_classes=2, sequence_length=8)
    texts = ["good", "bad fine"]
    features = {name: value.numpy() for name, value in run.preprocessor(texts).items()}
    np.testing.assert_allclose(
        restored.predict(texts, verbose=0), run.model.predict(features, verbose=0), atol=1e-5
    )
    with caplog.at_level(logging.WARNING):  # a new run into the same directory says what is there
        scoring = ClassificationRun("csv", sentiment_data, export, str(tmp_path / "out"))
    assert "out holds an earlier run's export, history.jsonl, history.png: this run" in caplog.text
    assert scoring.earlier_files_kept() == ["export", "history.jsonl", "history.png"]
    scoring.write_file("history.jsonl", "")  # replaced: this run's now
    assert scoring.earlier_files_kept() == ["export", "history.png"]


def test_dev_labels_are_the_train_files_classes(checkpoint, sentiment_data, tmp_path):
    data = tmp_path / "data"
    # Sorted on its own, this file's labels would make "positive" class 0, train's "negative".
    (data / "dev.tsv").write_text("text\tlabel\ngood\tpositive\ngood fine\tpositive\n")
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    assert run.label_names == ("negative", "positive")
    assert run._read("dev").labels == [1, 1]
    (data / "dev.tsv").write_text("text\tlabel\ngood\tpositive\nbad\tmeh\n")
    with pytest.raises(ValueError, match=r"dev.tsv:3: label 'meh' is not one of \['negative'"):
        ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    glue = tmp_path / "sst2"  # a GLUE task's dev file too is read before training
    glue.mkdir()
    (glue / "train.tsv").write_text("sentence\tlabel\ngood\t1\n")
    (glue / "dev.tsv").write_text("sentence\tlabel\ngood\tpositive\n")
    with pytest.raises(ValueError, match=r"dev.tsv:2: label 'positive' is not one of \['0', '1'\]"):
        ClassificationRun("SST-2", str(glue), checkpoint, str(tmp_path / "out"), max_seq_length=8)


def test_a_sequence_longer_than_the_checkpoints_positions_is_refused_before_training(
    checkpoint, sentiment_data, tmp_path
):
    with pytest.raises(ValueError, match="max_seq_length is 17 but .* has only 16 position embed"):
        ClassificationRun(
            "csv", sentiment_data, checkpoint, str(tmp_path / "out"), max_seq_length=17
        )
    run = ClassificationRun(
        "csv", sentiment_data, checkpoint, str(tmp_path / "out"), max_seq_length=16
    )
    assert run.max_seq_length == run.preprocessor.sequence_length == 16
    unset = ClassificationRun("csv", sentiment_data, checkpoint, str(tmp_path / "out"))
    assert unset.max_seq_length == 16  # the default, 128, where the checkpoint has as many


def test_an_unknown_task_is_named_before_its_files_are_looked_for(checkpoint, tmp_path):
    with pytest.raises(ValueError, match="Unknown task_name 'SST-3'; known: .* or 'csv'"):
        ClassificationRun("SST-3", str(tmp_path / "absent"), checkpoint, str(tmp_path / "out"))


def test_an_unlabelled_test_file_is_predicted_and_not_scored(checkpoint, sentiment_data, tmp_path):
    (tmp_path / "data" / "test.tsv").write_text("text\ngood\nbad fine\n")
    run = ClassificationRun("csv", sentiment_data, checkpoint, str(tmp_path / "out"), 8)
    run.predict("test", batch_size=2)
    written = (tmp_path / "out" / "predictions_test.tsv").read_text().splitlines()
    assert written[0] == "index\tprediction" and len(written) == 3
    assert {line.split("\t")[1] for line in written[1:]} <= {"negative", "positive"}
    with pytest.raises(ValueError, match="The test file of .* has no labels to score"):
        run.evaluate("test", batch_size=2)


def test_a_checkpoints_head_keeps_its_order_of_the_datas_classes(
    checkpoint, sentiment_data, tmp_path
):
    (tmp_path / "data" / "dev.tsv").write_text("text\tlabel\ngood\tpositive\nbad\tnegative\n")
    trained = ClassificationRun("csv", sentiment_data, checkpoint, str(tmp_path / "a"), 8)
    trained.train(batch_size=2, learning_rate=1e-2, num_epochs=2, verbose=0)
    # The same head with its classes the other way round, as another tool may order them.
    reordered = read_checkpoint(str(tmp_path / "a" / "export"))
    head = reordered.head_weights["classifier"]
    head["kernel"], head["bias"] = head["kernel"][:, ::-1], head["bias"][::-1]
    reordered.label_names = reordered.label_names[::-1]
    write_checkpoint(reordered, str(tmp_path / "reordered"))

    run = ClassificationRun(
        "csv", sentiment_data, str(tmp_path / "reordered"), str(tmp_path / "b"), 8
    )

    assert run.label_names == ("positive", "negative") == tuple(trained.label_names[::-1])
    assert run._read("dev").labels == [0, 1]
    assert run.evaluate("dev", batch_size=2)["accuracy"] == trained.evaluate("dev", 2)["accuracy"]
    written = [(tmp_path / name / "predictions_dev.tsv").read_text() for name in ("a", "b")]
    assert written[0] == written[1]

    # Scoring needs no train file where the checkpoint names its classes.
    (tmp_path / "dev_only").mkdir()
    (tmp_path / "dev_only" / "dev.tsv").write_text((tmp_path / "data" / "dev.tsv").read_text())
    run = ClassificationRun(
        "csv", str(tmp_path / "dev_only"), str(tmp_path / "reordered"), str(tmp_path / "c"), 8
    )
    assert run.label_names == ("positive", "negative")
    run.evaluate("dev", batch_size=2)
    assert (tmp_path / "c" / "predictions_dev.tsv").read_text() == written[0]
    with pytest.raises(FileNotFoundError, match="No train.csv or train.tsv in .* names no classes"):
        ClassificationRun("csv", str(tmp_path / "dev_only"), checkpoint, str(tmp_path / "d"), 8)


def test_a_heads_class_names_match_the_datas_in_other_case_or_are_warned_about(
    checkpoint, sentiment_data, tmp_path, caplog
):
    named = read_checkpoint(checkpoint)
    named.head_weights["classifier"] = {"kernel": np.zeros((8, 2)), "bias": np.zeros(2)}
    named.label_names = ["POSITIVE", "NEGATIVE"]
    write_checkpoint(named, str(tmp_path / "upper"))
    run = ClassificationRun("csv", sentiment_data, str(tmp_path / "upper"), str(tmp_path / "a"), 8)
    assert run.label_names == ("positive", "negative")  # the data's spelling, the head's order
    assert run._read("train").labels == [0, 1, 0, 1]
    assert "names the classes" not in caplog.text

    named.label_names = ["LABEL_0", "LABEL_1"]
    write_checkpoint(named, str(tmp_path / "other"))
    run = ClassificationRun("csv", sentiment_data, str(tmp_path / "other"), str(tmp_path / "b"), 8)
    assert run.label_names == ("negative", "positive")
    assert "head names the classes ['LABEL_0', 'LABEL_1'], the data ['negative'" in caplog.text


@pytest.mark.every_backend
def test_xla_compiles_by_default_only_where_it_pays_and_when_asked(
    checkpoint, sentiment_data, tmp_path
):
    backend = keras.backend.backend()
    run, _, _ = _trained(sentiment_data, checkpoint, tmp_path / "default", Execution())
    # No GPU here: TensorFlow's steps run without XLA, in batches as long as their texts.
    assert run.model.jit_compile == (backend == "jax")

    def asked(jit_compile):
        execution = Execution(jit_compile=jit_compile)
        run = FineTuningRun(
            sentiment_data, checkpoint, str(tmp_path / "asked"), execution=execution
        )
        return run.jit_compile

    assert asked(True) == (backend != "torch")
    assert asked(False) is False


@pytest.mark.every_backend
def test_scoring_batches_texts_by_length_and_writes_each_score_in_file_order(checkpoint, tmp_path):
    texts = ["good bad fine is paris good", "fine", "bad fine", "good", "paris is good", "bad"]
    rows = "".join(f"{text}\t{index / 2}\n" for index, text in enumerate(texts))
    for split in ("train", "dev"):  # fractional labels: a regression
        (tmp_path / f"{split}.tsv").write_text("text\tlabel\n" + rows)
    run = ClassificationRun(
        "csv", str(tmp_path), checkpoint, str(tmp_path / "out"), max_seq_length=12
    )

    results = run.evaluate("dev", batch_size=4)

    written = (tmp_path / "out" / "predictions_dev.tsv").read_text().splitlines()[1:]
    scores = [float(line.split("\t")[1]) for line in written]
    # Each text alone, padded to the full sequence length.
    alone = [
        run.model.predict({k: v.numpy() for k, v in run.preprocessor([t]).items()}, verbose=0)
        for t in texts
    ]
    np.testing.assert_allclose(scores, [float(score[0, 0]) for score in alone], atol=1e-5)
    assert json.loads((tmp_path / "out" / "eval_results.json").read_text()) == results
    assert results["examples"] == 6 and results["seconds"] > 0


@pytest.mark.every_backend
def test_batch_widths_are_chosen_where_each_compiles_a_program(checkpoint, tmp_path):
    data = str(tmp_path)
    eager = Execution(mixed_precision="none", jit_compile=False)
    mixed = Execution(mixed_precision="bfloat16", jit_compile=False)
    runs = [
        FineTuningRun(
            data, checkpoint, str(tmp_path / name), execution=execution, max_batch_widths=3
        )
        for name, execution in (
            ("compiled", Execution(jit_compile=True)),
            ("eager", eager),
            ("mixed", mixed),
        )
    ]
    widths = [run.training_batching(num_epochs=2) for run in runs]
    compiles = keras.backend.backend() != "torch"  # torch runs eagerly
    # Widths of any length, of 8 in mixed precision (the tensor cores' tile).
    assert [batching["pad_to_multiple_of"] for batching in widths] == [1, 1, 8]
    assert {batching["bucket_width"] for batching in widths} == {16}
    # A bound on the widths where each compiles a program; none where the step takes any.
    assert [batching["max_widths"] for batching in widths] == [3 if compiles else None, None, None]
    assert [batching["compile_tokens"] for batching in widths] == [0] * 3
    prediction = [run.prediction_batching for run in runs]
    # TensorFlow scores in one graph for every width (no XLA), jax compiles each.
    compiles_each_width = keras.backend.backend() == "jax"
    # Compiled scoring widths are coarser, so that later scoring finds its widths compiled.
    assert [options["pad_to_multiple_of"] for options in prediction] == [
        8 if compiles_each_width else 1,
        1,
        8,
    ]
    assert [options["full_batches"] for options in prediction] == [
        compiles_each_width,
        False,
        False,
    ]
    assert [options["max_widths"] for options in prediction] == [
        3 if compiles_each_width else None,
        None,
        None,
    ]
    # Given no bound, each width compiled for scoring earns its compile in padding saved.
    assert [options["compile_tokens"] for options in prediction] == [0] * 3
    unbounded = FineTuningRun(
        data, checkpoint, str(tmp_path / "unbounded"), execution=Execution(jit_compile=True)
    )
    assert unbounded.prediction_batching["compile_tokens"] == (
        PREDICTION_COMPILE_TOKENS if compiles_each_width else 0
    )
    # In training, each compile is shared by every pass; the padding a width saves is not.
    training = [unbounded.training_batching(num_epochs) for num_epochs in (1, 4)]
    assert [options["max_widths"] for options in training] == [None, None]
    assert [options["compile_tokens"] for options in training] == (
        [TRAINING_COMPILE_TOKENS, TRAINING_COMPILE_TOKENS / 4] if compiles else [0, 0]
    )


@pytest.mark.one_backend("tensorflow")
def test_tensorflow_scores_every_batch_shape_in_one_graph_traced_once(
    checkpoint, tmp_path, monkeypatch
):
    run = FineTuningRun(str(tmp_path), checkpoint, str(tmp_path / "out"))
    model = run.build_model(lambda backbone: BertClassifier(backbone, 3), "classifier")
    lengths = np.array([2, 7, 3, 12, 5, 1, 9])
    mask = (np.arange(12) < lengths[:, None]).astype("int32")
    features = {"token_ids": mask * 5, "segment_ids": mask * 0, "padding_mask": mask}
    traces = []
    call = model.call
    monkeypatch.setattr(
        model, "call", lambda *args, **kwargs: traces.append(1) or call(*args, **kwargs)
    )

    predictions = run.predict_features(model, features, batch_size=3)  # widths 3, 9, 12

    assert len(traces) == 1  # Python runs the model only while tracing
    expected = model.predict_on_batch(features)  # every example padded to 12
    np.testing.assert_allclose(predictions, expected, atol=1e-5)
    traces.clear()  # predict_on_batch traced its own function
    again = run.predict_features(model, {k: v[:4] for k, v in features.items()}, batch_size=2)
    assert not traces  # a second scoring (a test split) reuses the graph
    np.testing.assert_allclose(again, expected[:4], atol=1e-5)


@pytest.mark.one_backend("jax")
def test_later_scoring_takes_the_widths_xla_compiled_before(checkpoint, tmp_path, monkeypatch):
    run = FineTuningRun(str(tmp_path), checkpoint, str(tmp_path / "out"))
    model = run.build_model(lambda backbone: BertClassifier(backbone, 3), "classifier")
    widths = []
    predict_on_batch = model.predict_on_batch
    monkeypatch.setattr(
        model,
        "predict_on_batch",
        lambda batch: widths.append(batch["token_ids"].shape[1]) or predict_on_batch(batch),
    )

    def features(lengths):
        mask = (np.arange(16) < np.array(lengths)[:, None]).astype("int32")
        return {"token_ids": mask * 5, "segment_ids": mask * 0, "padding_mask": mask}

    run.predict_features(model, features([2, 3, 3, 4, 9, 10, 10, 10]), batch_size=4)
    assert widths == [16, 16]  # a compile costs more than this padding; widths of 8s
    widths.clear()
    test_split = features([1, 2, 2, 3, 1, 2, 3, 13])
    predictions = run.predict_features(model, test_split, batch_size=4)
    assert widths == [16, 16]  # compiled already: cheaper than a program for 8 or 13
    np.testing.assert_allclose(predictions, predict_on_batch(test_split), atol=1e-5)


def test_tagging_export_names_its_tags_and_a_new_run_reads_them(checkpoint, tmp_path):
    data = tmp_path / "conll"
    data.mkdir()
    (data / "train.txt").write_text("paris B-LOC\nis O\nfine O\n\ngood O\nparis B-LOC\n")
    run = TaggingRun(str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    export = str(tmp_path / "out" / "export")
    assert read_checkpoint(export).label_names == run.label_names == ["O", "B-LOC"]
    tagger = BertTokenClassifier.from_preset(export, num_classes=2)
    np.testing.assert_array_equal(
        np.asarray(tagger.get_layer("logits").kernel),
        np.asarray(run.model.get_layer("logits").kernel),
    )
    # Data tagged only "O": the names (and the head) come from the export's id2label.
    only_o = tmp_path / "only_o"
    only_o.mkdir()
    (only_o / "train.txt").write_text("is O\nfine O\n")
    again = TaggingRun(str(only_o), export, str(tmp_path / "again"), max_seq_length=8)
    assert again.label_names == ["O", "B-LOC"]


def test_label_names_must_match_the_head(checkpoint, tmp_path):
    loaded = read_checkpoint(checkpoint)
    loaded.head_weights["classifier"] = {
        "kernel": np.zeros((8, 2), "float32"),
        "bias": np.zeros(2, "float32"),
    }
    loaded.label_names = ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"names 3 labels .* has 2 outputs"):
        write_checkpoint(loaded, str(tmp_path / "bad"))


def test_a_pair_classification_export_records_its_pairs(checkpoint, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(
        "text\ttext_pair\tlabel\ngood\tbad\tno\ngood\tgood\tyes\nbad\tbad\tyes\n"
    )
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    assert read_checkpoint(str(tmp_path / "out" / "export")).task_config == {
        "text_pair": True,
        "max_seq_length": 8,
    }


@pytest.mark.parametrize("mixed_precision", ["bfloat16", "float16"])
def test_mixed_precision_keeps_float32_weights_and_the_float32_losses(
    checkpoint, sentiment_data, tmp_path, mixed_precision
):
    _, full, full_weights = _trained(sentiment_data, checkpoint, tmp_path / "full", None, 2)
    run, mixed, mixed_weights = _trained(
        sentiment_data,
        checkpoint,
        tmp_path / "mixed",
        Execution(mixed_precision=mixed_precision),
        2,
    )
    assert run.model.backbone.dtype_policy.name == f"mixed_{mixed_precision}"
    assert {variable.dtype for variable in run.model.weights} == {"float32"}
    # The policy is the run's: the export computes in float32, as transformers does.
    assert read_checkpoint(str(tmp_path / "mixed" / "export")).backbone_config["dtype"] == "float32"
    assert np.all(np.isfinite(mixed["loss"]))
    np.testing.assert_allclose(mixed["loss"], full["loss"], rtol=0.03)
    assert max(np.abs(a - b).max() for a, b in zip(mixed_weights, full_weights)) < 0.05


def test_each_history_interval_goes_to_the_history_file_which_a_new_run_replaces(
    checkpoint, sentiment_data, tmp_path
):
    _, history, _ = _trained(sentiment_data, checkpoint, tmp_path, None, 3)
    records = read_history(tmp_path / "history.jsonl")
    # 4 examples in batches of 2: a pass has 2 steps, fewer than the 10 points asked for.
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5, 6]
    assert [record["epoch"] for record in records] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert [record["loss"] for record in records] == pytest.approx(history["loss"])
    assert all(record["seconds"] > 0 and record["examples_per_second"] > 0 for record in records)
    assert (tmp_path / "history.png").read_bytes()[:4] == b"\x89PNG"
    _trained(sentiment_data, checkpoint, tmp_path, None, 1)
    assert [record["step"] for record in read_history(tmp_path / "history.jsonl")] == [1, 2]


@pytest.mark.parametrize(
    "examples, batch_size, epochs, points, calls, plan",
    [
        (1000, 10, 2, 10, 1, (20, 10, 200)),  # 100 steps a pass, 10 intervals of 10 each
        (1000, 10, 2, 1, 1, (2, 100, 200)),  # one interval a pass: Keras epochs are passes
        (1000, 10, 0.5, 10, 1, (10, 5, 50)),  # half a pass, still 10 points
        (1000, 10, 2, 10, 4, (17, 12, 200)),  # intervals of 3 calls, the last of 2
        (1000, 10, 2, 7, 1, (14, 15, 200)),  # 13 intervals of 15 steps, the last of 5
        (1000, 10, 1.01, 10, 4, (9, 12, 104)),  # 101 steps asked for: 26 whole calls
        (6, 8, 3, 10, 1, (3, 1, 3)),  # one step a pass: one point a pass
    ],
)
def test_passes_are_cut_into_history_intervals_of_whole_compiled_calls(
    examples, batch_size, epochs, points, calls, plan
):
    assert fit_plan(examples, batch_size, epochs, points, calls) == plan


class _TwoReplicasOnOneDevice:
    """A run's `DataParallel` that says it has two replicas and keeps each batch whole."""

    num_replicas = 2

    def __init__(self, replicas):
        self.replicas = replicas

    def __getattr__(self, name):
        return getattr(self.replicas, name)

    def local_share(self, dataset):
        return dataset


def test_replicas_train_the_passes_asked_for_on_their_full_batches(checkpoint, tmp_path):
    data = tmp_path / "five"
    data.mkdir()
    texts = ["good", "bad", "good good", "bad fine", "fine"]
    (data / "train.tsv").write_text(
        "text\tlabel\n" + "".join(f"{text}\t{index % 2}\n" for index, text in enumerate(texts))
    )
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.replicas = _TwoReplicasOnOneDevice(run.replicas)

    history = run.train(batch_size=2, learning_rate=1e-3, num_epochs=2, verbose=0)

    # Two full batches a pass (the fifth text's batch is dropped): 4 steps, not 6.
    assert history["step"] == [1, 2, 3, 4]
    assert history["epoch"] == [0.5, 1.0, 1.5, 2.0]
    assert int(run.model.optimizer.iterations) == 4


def test_length_buckets_train_as_plain_batches_when_every_text_shares_one(
    checkpoint, sentiment_data, tmp_path
):
    # Texts of 3 and 4 tokens, one bucket (1..16): the same batches, in order.
    _, plain, plain_weights = _trained(sentiment_data, checkpoint, tmp_path / "plain", None, 2)
    _, bucketed, bucketed_weights = _trained(
        sentiment_data, checkpoint, tmp_path / "bucketed", None, 2, bucket_by_length=True
    )
    np.testing.assert_allclose(bucketed["loss"], plain["loss"], rtol=1e-6)
    for a, b in zip(bucketed_weights, plain_weights):
        np.testing.assert_allclose(a, b, atol=1e-7)


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() == "torch", reason="torch runs one batch per call")
def test_two_batches_per_compiled_call_train_as_one_per_call_does(
    checkpoint, sentiment_data, tmp_path
):
    _, one, one_weights = _trained(sentiment_data, checkpoint, tmp_path / "one", None, 2)
    _, two, two_weights = _trained(
        sentiment_data, checkpoint, tmp_path / "two", Execution(steps_per_execution=2), 2
    )
    # History intervals of one step each, against intervals of one call (two steps) each.
    assert two["step"] == one["step"][1::2] == [2, 4]
    one_per_interval = np.mean(np.reshape(one["loss"], (-1, 2)), axis=1)
    np.testing.assert_allclose(two["loss"], one_per_interval, rtol=1e-5)
    for a, b in zip(two_weights, one_weights):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="torch runs one batch per call")
@pytest.mark.one_backend("jax")
def test_steps_rounded_up_to_whole_compiled_calls_are_logged(
    checkpoint, sentiment_data, tmp_path, caplog
):
    with caplog.at_level(logging.WARNING):  # 4 examples in batches of 2: 2 steps a pass
        _, history, _ = _trained(
            sentiment_data, checkpoint, tmp_path / "three", Execution(steps_per_execution=3), 2
        )
    assert history["step"][-1] == 6
    assert "4 steps (2 passes of 4 examples) round up to 6: steps_per_execution=3" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # calls of more steps than the run: one of its 2
        _, history, _ = _trained(
            sentiment_data, checkpoint, tmp_path / "many", Execution(steps_per_execution=100)
        )
    assert history["step"][-1] == 2 and "round up" not in caplog.text


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch runs one batch per call")
def test_torch_refuses_several_batches_per_call(checkpoint, sentiment_data, tmp_path):
    with pytest.raises(ValueError, match="steps_per_execution is 2 but Keras' torch backend"):
        ClassificationRun(
            "csv",
            sentiment_data,
            checkpoint,
            str(tmp_path),
            execution=Execution(steps_per_execution=2),
        )


def test_a_frozen_backbone_keeps_the_checkpoints_weights_while_the_head_trains(
    checkpoint, sentiment_data, tmp_path
):
    flag_values = flags.FlagValues()
    program_flags = define_flags(flag_values)
    flag_values(
        [
            "program",
            f"--data_dir={sentiment_data}",
            f"--init_checkpoint={checkpoint}",
            f"--output_dir={tmp_path}",
            "--max_seq_length=8",
            "--freeze_backbone",
        ]
    )
    run = ClassificationRun("csv", **program_flags.run_arguments())
    backbone_before = [keras.ops.convert_to_numpy(w).copy() for w in run.model.backbone.weights]
    head_before = keras.ops.convert_to_numpy(run.model.get_layer("logits").kernel).copy()
    run.train(batch_size=2, learning_rate=1e-2, num_epochs=2, verbose=0)

    assert sorted(w.path for w in run.model.trainable_weights) == ["logits/bias", "logits/kernel"]
    for variable, before in zip(run.model.backbone.weights, backbone_before):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), before, variable.path)
    exported = read_checkpoint(str(tmp_path / "export")).backbone_weights
    initial = read_checkpoint(checkpoint).backbone_weights
    for path, value in initial.items():
        np.testing.assert_array_equal(exported[path], value, path)
    # Freezing is the run's: a run from the export trains its backbone unless told not to.
    assert read_checkpoint(str(tmp_path / "export")).backbone_config["trainable"] is True
    head_after = keras.ops.convert_to_numpy(run.model.get_layer("logits").kernel)
    assert np.abs(head_after - head_before).max() > 1e-4


@pytest.mark.every_backend
def test_a_run_whose_loss_diverges_stops_unexported(checkpoint, sentiment_data, tmp_path):
    run = ClassificationRun("csv", sentiment_data, checkpoint, str(tmp_path / "out"), 8)
    with pytest.raises(TrainingDivergedError, match=r"The training loss is (nan|inf) by step \d"):
        run.train(batch_size=2, learning_rate=1e30, num_epochs=20, verbose=0)
    history = read_history(tmp_path / "out" / "history.jsonl")
    assert len(history) < 20 * 2  # Keras' TerminateOnNaN stopped it where the loss first was
    assert not (tmp_path / "out" / "export").exists()
