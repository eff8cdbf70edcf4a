"""RecommendationRun: learning planted structure, honest splits, the files it writes, resuming."""

import contextlib
import glob
import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest

from bert_keras.recommendation.baselines import item_knn_scores
from bert_keras.recommendation.baselines import item_transition_scores
from bert_keras.recommendation.baselines import most_popular_scores
from bert_keras.recommendation.run import EARLY_STOPPING_METRIC
from bert_keras.recommendation.run import RecommendationRun
from bert_keras.recommendation.run import ValidationRanking
from bert_keras.training.checkpoint_manager import CheckpointManager
from tests.recommendation.synthetic_logs import write_cluster_walks

SMALL_MODEL = {"hidden_dim": 32, "intermediate_dim": 64, "dropout": 0.1, "attention_dropout": 0.1}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    log = write_cluster_walks(tmp_path_factory.mktemp("log") / "walks.csv")
    run = RecommendationRun(
        str(log),
        "csv",
        str(tmp_path_factory.mktemp("run")),
        preset="bert4rec_steam",  # masks 40% of short windows: more to learn from per step
        max_sequence_length=24,
        **SMALL_MODEL,
    )
    fit_inputs = []
    keras_fit = keras.Model.fit

    def recording_fit(model, x=None, *args, **kwargs):
        fit_inputs.append(x)
        return keras_fit(model, x, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keras.Model, "fit", recording_fit)
        history = run.train(num_epochs=30, batch_size=32, learning_rate=1e-2, verbose=0)
    return run, history, fit_inputs


def test_recovers_the_planted_sequence(trained):
    run, history, _ = trained
    model = run.test_metrics(lambda histories: run.model.next_item_scores(histories))
    popular = run.test_metrics(
        lambda histories: most_popular_scores(run.split.train, run.sequences.num_items, histories)
    )
    assert model["test/full/hr@10"] > 0.6, model
    assert model["test/full/hr@10"] > 5 * popular["test/full/hr@10"]
    assert model["test/pop100/ndcg@10"] > popular["test/pop100/ndcg@10"] + 0.3
    assert history["val_full/ndcg@10"][-1] > history["val_full/ndcg@10"][0]


def test_fit_reads_a_dataset_without_an_autotuning_thread_to_wait_for(trained):
    # Its iterator's deletion at the end of fit would wait for the thread to wake.
    *_, fit_inputs = trained
    assert [dataset.options().autotune.enabled for dataset in fit_inputs] == [False]


def test_training_never_sees_the_validation_or_test_items(trained):
    run, *_ = trained
    for train, sequence in zip(run.split.train, run.sequences.sequences):
        np.testing.assert_array_equal(train, sequence[:-2])


def test_evaluation_writes_both_protocols(trained):
    run, *_ = trained
    results = run.evaluate()
    assert results["users"] == 300 and results["items"] == run.sequences.num_items
    for protocol in ("full", "pop100"):
        for metric in ("hr@1", "hr@5", "hr@10", "ndcg@5", "ndcg@10", "mrr"):
            assert 0.0 <= results[f"test/{protocol}/{metric}"] <= 1.0
    with open(f"{run.output_dir}/eval_results.json") as file:
        assert json.load(file) == results


def test_predictions_are_unseen_raw_item_ids(trained):
    run, *_ = trained
    path = run.predict(top_k=5)
    with open(path) as file:
        rows = [line.rstrip("\n").split("\t") for line in file][1:]
    assert len(rows) == 300 * 5
    seen = {}
    for user, sequence in zip(run.sequences.user_ids, run.sequences.sequences):
        seen[user] = {run.sequences.item_ids[i - 1] for i in sequence}
    assert [rank for _, rank, _, _ in rows[:5]] == ["1", "2", "3", "4", "5"]
    for user, _, item, _ in rows:
        assert item.startswith("item") and item not in seen[user]


def test_the_transition_baseline_finds_successors_and_item_knn_does_not(trained):
    # Ground truth for the baselines that the real-data test compares with:
    # a transition count sees the planted successor, order-free co-occurrence
    # sees only the clusters.
    run, *_ = trained

    def metrics(baseline):
        return run.test_metrics(
            lambda histories: baseline(run.split.train, run.sequences.num_items, histories)
        )

    assert metrics(item_transition_scores)["test/full/hr@10"] > 0.9
    assert metrics(item_knn_scores)["test/full/hr@10"] < 0.9


def test_a_reread_log_keeps_the_trained_models_item_ids(trained, tmp_path):
    # New users make the rarest items the most frequent: the log's own ids would change.
    run, *_ = trained
    log = write_cluster_walks(tmp_path / "walks.csv")
    rarest = run.sequences.item_ids[-10:]
    with open(log, "a") as file:
        for user in range(20):
            file.writelines(f"newcomer{user},{item},{time}\n" for time, item in enumerate(rarest))
    expected = _predicted_items(run.predict(top_k=3))
    again = RecommendationRun(
        str(log), "csv", run.output_dir, preset="bert4rec_steam", max_sequence_length=24
    )
    assert again.sequences.item_ids != run.sequences.item_ids  # what makes this case
    answered = _predicted_items(again.predict(top_k=3))
    assert again.sequences.item_ids == run.sequences.item_ids
    assert answered[: len(expected)] == expected and len(answered) == len(expected) + 20 * 3


def _predicted_items(path):
    """(user, rank, item) of each row of a predictions.tsv; scores left out."""
    with open(path) as file:
        return [tuple(line.split("\t")[:3]) for line in file.read().splitlines()[1:]]


def test_predictions_stop_where_the_unseen_items_run_out(trained):
    run, *_ = trained
    path = run.predict(top_k=run.sequences.num_items)
    with open(path) as file:
        rows = [line.rstrip("\n").split("\t") for line in file][1:]
    for user, sequence in zip(run.sequences.user_ids, run.sequences.sequences):
        listed = [item for row_user, _, item, _ in rows if row_user == user]
        seen = {run.sequences.item_ids[i - 1] for i in sequence}
        assert len(listed) == run.sequences.num_items - len(seen)
        assert not set(listed) & seen and len(set(listed)) == len(listed)


def test_too_many_negatives_are_refused_before_training(tmp_path):
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=20)
    run = RecommendationRun(str(log), "csv", str(tmp_path / "run"), num_negatives=10_000)
    with pytest.raises(ValueError, match=r"num_negatives=10000 .* user 'user\d+'.* at most \d+"):
        run.check_negatives()
    most = run.most_negatives()
    assert 0 < most < run.sequences.num_items
    run.num_negatives = most
    run.check_negatives()
    run.num_negatives = most + 1
    with pytest.raises(ValueError, match=f"at most {most}\\."):
        run.check_negatives()


def test_a_user_who_has_seen_every_item_is_ranked_in_full_alone(tmp_path):
    log = tmp_path / "log.csv"
    lines = ["user,item,timestamp"] + [f"all,item{item},{item}" for item in range(6)]
    lines += [
        f"user{user},item{(user + step) % 6},{step}" for user in range(4) for step in range(5)
    ]
    log.write_text("\n".join(lines) + "\n")
    run = RecommendationRun(str(log), "csv", str(tmp_path / "run"), num_negatives=1)
    with pytest.raises(
        ValueError, match=r"user 'all', who has seen all 6 items: --num_negatives=0"
    ):
        run.check_negatives()
    run.num_negatives = 0
    run.check_negatives()
    results = run.test_metrics(lambda histories: np.zeros((len(histories), 7)))
    assert sorted(name for name in results if "/" in name) == [
        f"test/full/{metric}" for metric in ("hr@1", "hr@10", "hr@5", "mrr", "ndcg@10", "ndcg@5")
    ]


TINY_MODEL = {
    "num_layers": 1,
    "hidden_dim": 16,
    "intermediate_dim": 32,
    "dropout": 0.1,  # a random stream that a resumed run must continue
    "attention_dropout": 0.1,
}
TINY_TRAINING = {"num_epochs": 3, "batch_size": 16, "learning_rate": 1e-2, "verbose": 0}
TINY_LOG_USERS = 31  # 48 windows: 3 whole batches, one shape for jax to compile


def tiny_run(log, output_dir, **model_overrides):
    return RecommendationRun(
        str(log),
        "csv",
        str(output_dir),
        preset="bert4rec_steam",
        max_sequence_length=12,
        num_negatives=5,
        **{**TINY_MODEL, **model_overrides},
    )


class Interruption(Exception):
    """Stands for a kill right after a checkpoint is written."""


@contextlib.contextmanager
def checkpoints_recorded(stop_after=None, weights=None):
    """Yields the epochs of the checkpoints written; `Interruption` after `stop_after` of them.

    The model's weights at each checkpoint go to `weights` (epoch -> arrays) when given.
    """
    save = CheckpointManager.save
    saved = []

    def recording_save(manager, model, step, metadata):
        checkpoint = save(manager, model, step, metadata)
        saved.append(step)
        if weights is not None:
            weights[step] = [np.array(value) for value in model.get_weights()]
        if len(saved) == stop_after:
            raise Interruption(f"killed after epoch {step}")
        return checkpoint

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CheckpointManager, "save", recording_save)
        yield saved


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """An uninterrupted run, and one killed after epoch 2 of 3 then run again."""
    log = write_cluster_walks(
        tmp_path_factory.mktemp("log") / "walks.csv", num_users=TINY_LOG_USERS
    )
    uninterrupted = tiny_run(log, tmp_path_factory.mktemp("uninterrupted"))
    uninterrupted_history = uninterrupted.train(**TINY_TRAINING)
    output_dir = tmp_path_factory.mktemp("interrupted")
    with checkpoints_recorded(stop_after=2) as saved_before, pytest.raises(Interruption):
        tiny_run(log, output_dir).train(**TINY_TRAINING)
    with checkpoints_recorded() as saved_after:
        run = tiny_run(log, output_dir)
        history = run.train(**TINY_TRAINING)
    return log, (uninterrupted, uninterrupted_history), (run, history), (saved_before, saved_after)


@pytest.mark.every_backend
def test_a_run_killed_after_an_epoch_resumes_and_ends_as_if_never_stopped(resumed):
    _, (uninterrupted, expected_history), (run, history), saved = resumed
    assert saved == ([1, 2], [3])  # the second run trained epoch 3 only
    assert len(history["loss"]) == 3
    for name, values in expected_history.items():
        np.testing.assert_allclose(history[name], values, rtol=1e-5, atol=1e-7, err_msg=name)
    for weights, expected in zip(run.model.get_weights(), uninterrupted.model.get_weights()):
        np.testing.assert_allclose(weights, expected, rtol=1e-5, atol=1e-6)
    with open(os.path.join(run.output_dir, "history.json")) as file:
        assert json.load(file) == history
    assert sorted(os.listdir(os.path.join(run.output_dir, "checkpoints"))) == [
        "best.weights.h5",
        "ckpt-00000002.json",
        "ckpt-00000002.weights.h5",
        "ckpt-00000003.json",
        "ckpt-00000003.weights.h5",
    ]


def test_a_finished_run_is_loaded_not_trained_again(resumed, monkeypatch):
    _, _, (run, history), _ = resumed
    monkeypatch.setattr(keras.Model, "fit", lambda *args, **kwargs: pytest.fail("trained again"))
    for name in ("history.json", "history.png"):  # as a kill just after model.keras leaves it
        os.remove(os.path.join(run.output_dir, name))
    again = tiny_run(resumed[0], run.output_dir)
    assert again.train(**TINY_TRAINING) == history
    with open(os.path.join(run.output_dir, "history.json")) as file:
        assert json.load(file) == history
    assert os.path.exists(os.path.join(run.output_dir, "history.png"))
    for weights, expected in zip(again.model.get_weights(), run.model.get_weights()):
        np.testing.assert_array_equal(weights, expected)


@pytest.mark.parametrize(
    "model_overrides, training, message",
    [
        ({"hidden_dim": 24}, {}, "another model: hidden_dim is 16 there but 24 here"),
        ({}, {"batch_size": 8}, "another data order: batch_size is 16 there but 8 here"),
        ({}, {"num_epochs": 5}, "another learning-rate schedule: num_epochs is 3 there but 5 here"),
        # The default 100, used as 1 in a run of 9 steps, is named as given.
        ({}, {"num_warmup_steps": 0}, "schedule: num_warmup_steps is 100 there but 0 here"),
        (
            {"hidden_dim": 24},
            {"batch_size": 8},
            "another model: hidden_dim is 16 there but 24 here; and another data order: "
            "batch_size is 16 there but 8 here",
        ),
    ],
)
def test_a_checkpoint_refuses_other_settings_and_names_them(
    resumed, model_overrides, training, message
):
    log, _, (run, _), _ = resumed
    again = tiny_run(log, run.output_dir, **model_overrides)
    with pytest.raises(ValueError, match=message + ".*another output_dir"):
        again.train(**{**TINY_TRAINING, **training})


def _with_another_backend(output_dir, copy):
    """A copy of `output_dir` whose checkpoints say another backend wrote them."""
    shutil.copytree(output_dir, copy)
    for path in glob.glob(str(copy / "checkpoints" / "*.json")):
        with open(path) as file:
            metadata = json.load(file)
        metadata["settings"]["backend"]["KERAS_BACKEND"] = "another"
        with open(path, "w") as file:
            json.dump(metadata, file)
    return copy


@pytest.mark.one_backend  # the settings' bookkeeping
def test_training_on_under_another_backend_is_refused_and_a_finished_model_still_loads(
    resumed, tmp_path
):
    log, _, (run, history), _ = resumed
    finished = _with_another_backend(run.output_dir, tmp_path / "finished")
    assert tiny_run(log, finished).train(**TINY_TRAINING) == history  # loaded, not trained
    killed = _with_another_backend(run.output_dir, tmp_path / "killed")
    for path in glob.glob(str(killed / "checkpoints" / "ckpt-00000003*")):  # as if killed before
        os.remove(path)
    with pytest.raises(
        ValueError,
        match="written with another backend: KERAS_BACKEND is 'another' there but "
        f"'{keras.backend.backend()}' here. A resumed run continues dropout's",
    ):
        tiny_run(log, killed).train(**TINY_TRAINING)


@pytest.mark.one_backend  # the settings' bookkeeping
def test_other_training_windows_are_named_in_words(resumed):
    log, _, (run, _), _ = resumed
    with pytest.raises(ValueError) as refusal:
        tiny_run(log, run.output_dir).train(**TINY_TRAINING, sliding_window=0.25)
    message = str(refusal.value)
    assert "other training windows (the log, --min_interactions, --max_sequence_length" in message
    assert "windows_sha256" not in message


def test_an_output_dir_holding_another_programs_checkpoints_is_refused(resumed, tmp_path):
    log, _, (run, _), _ = resumed
    shutil.copytree(run.output_dir, tmp_path / "run")
    latest = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*.json"))[-1]
    latest.write_text(json.dumps({"architecture": {}, "step": 3}))  # as tasks.pretrain writes
    with pytest.raises(ValueError, match=r"ckpt-00000003.weights.h5 is not a BERT4Rec checkpoint"):
        tiny_run(log, str(tmp_path / "run")).train(**TINY_TRAINING)


def test_early_stopping_restores_the_best_epoch_after_a_resume(tmp_path, monkeypatch):
    # Validation NDCG@10 by epoch: best at epoch 2 (1-based), none better in the next one.
    scores = [0.1, 0.5, 0.2, 0.9, 0.9]

    def scripted_ranking(callback, epoch, logs=None):
        logs[EARLY_STOPPING_METRIC] = scores[epoch]

    monkeypatch.setattr(ValidationRanking, "on_epoch_end", scripted_ranking)
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=TINY_LOG_USERS)
    training = {**TINY_TRAINING, "num_epochs": 5, "patience": 1}
    weights = {}
    with checkpoints_recorded(stop_after=2, weights=weights), pytest.raises(Interruption):
        tiny_run(log, tmp_path / "run").train(**training)
    with checkpoints_recorded(weights=weights) as saved:
        run = tiny_run(log, tmp_path / "run")
        history = run.train(**training)
    # A fresh early stopping would take epoch 3 for the best and go on to epoch 4.
    assert saved == [3] and history[EARLY_STOPPING_METRIC] == scores[:3]
    for restored, best in zip(run.model.get_weights(), weights[2]):
        np.testing.assert_array_equal(restored, best)
    assert any(np.any(now != best) for now, best in zip(weights[3], weights[2]))


def test_a_run_trained_anew_and_stopped_before_its_model_saves_ignores_the_older_model(
    tmp_path, monkeypatch, caplog
):
    scores = [0.1, 0.5, 0.2]  # validation NDCG@10 by epoch: the best is epoch 2

    def scripted_ranking(callback, epoch, logs=None):
        logs[EARLY_STOPPING_METRIC] = scores[epoch]

    monkeypatch.setattr(ValidationRanking, "on_epoch_end", scripted_ranking)
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=TINY_LOG_USERS)
    output_dir = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        tiny_run(log, output_dir).train(**TINY_TRAINING)  # an older run, with its model.keras
    # 3 epochs of 3 batches: the default 100 warmup steps are capped.
    assert "num_warmup_steps 100 is more than a tenth of the 9 training steps: 1" in caplog.text
    shutil.rmtree(output_dir / "checkpoints")  # as the README says, to train anew
    anew, weights = {**TINY_TRAINING, "learning_rate": 3e-3}, {}
    with checkpoints_recorded(stop_after=3, weights=weights), pytest.raises(Interruption):
        tiny_run(log, output_dir).train(**anew)  # killed before its model.keras
    history = tiny_run(log, output_dir).train(**anew)
    assert history[EARLY_STOPPING_METRIC] == scores
    reloaded = tiny_run(log, output_dir)
    reloaded.load_model()
    for saved, best in zip(reloaded.model.get_weights(), weights[2]):
        np.testing.assert_array_equal(saved, best)


@pytest.mark.one_backend  # the callbacks' bookkeeping
def test_a_diverged_run_is_an_error_and_saves_no_model_nor_checkpoint_of_it(tmp_path):
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=TINY_LOG_USERS)
    run = tiny_run(log, tmp_path / "out")
    with checkpoints_recorded() as saved, pytest.raises(ValueError, match=r"is nan in epoch 1: "):
        run.train(**{**TINY_TRAINING, "learning_rate": 1e30})
    assert saved == []
    assert not os.path.exists(tmp_path / "out" / "model.keras")
