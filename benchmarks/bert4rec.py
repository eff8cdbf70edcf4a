"""BERT4Rec: quality and training time on MovieLens-100K, and training speed at ML-1M sizes.

Three parts (`--parts`):

- `movielens`: the ML-100K file of RecBole's wheel, leave-one-out, full
  ranking of each user's last item among the items the user has not seen.
  Trains `tasks.recommend`'s model (`--movielens_epochs`, `max_sequence_length`
  50, lr 2e-3, batch 64) and prints its NDCG@10, HR@10 and training seconds
  beside three baselines fitted on the same training items: most popular,
  item-kNN (cosine co-occurrence) and item transitions.
- `speed`: training steps of the `bert4rec_ml1m` preset at ML-1M's sizes
  (3,416 items, length 200, 40 masked items per window, batch 256) on
  random windows, in windows per second (median of `--repeats` rounds, after
  compiling).

- `recbole`: RecBole's own BERT4Rec on the same file and protocol
  (`benchmarks.recbole_bert4rec`, in RecBole's side environment
  `.venv-recbole` that `make recbole-venv` builds): its NDCG@10, HR@10 and
  training seconds, and with `movielens` the ratios of ours to it.

    KERAS_BACKEND=jax python -m benchmarks.bert4rec --parts=movielens,speed,recbole
"""

import json
import os
import subprocess
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import flag_checks
from benchmarks import measurements
from bert_keras.training.host_memory import restart_with_training_malloc

PARTS = ("movielens", "speed", "recbole")
_PARTS = flags.DEFINE_list("parts", ["movielens", "speed"], f"Parts to run, of {PARTS}.")
flag_checks.require_known_names(_PARTS, PARTS)
_EPOCHS = flags.DEFINE_integer("movielens_epochs", 60, "Training epochs on ML-100K.", lower_bound=1)
_RECBOLE_EPOCHS = flags.DEFINE_integer(
    "recbole_epochs",
    20,
    "Most epochs of RecBole's BERT4Rec (it stops early on validation).",
    lower_bound=1,
)
RECBOLE_PYTHON = os.path.join(common.REPOSITORY, ".venv-recbole", "bin", "python")

ML1M_ITEMS, ML1M_LENGTH, ML1M_PREDICTIONS, ML1M_BATCH = 3416, 200, 40, 256


def movielens():
    """Prints the model's and the baselines' test metrics and seconds on ML-100K."""
    from bert_keras.data.interactions import movielens_100k_path
    from bert_keras.recommendation import baselines
    from bert_keras.recommendation.run import RecommendationRun

    run = RecommendationRun(
        movielens_100k_path(),
        "recbole",
        tempfile.mkdtemp(prefix="bert4rec_"),
        max_sequence_length=50,
    )
    rows = {}
    for name in ("most_popular", "item_knn", "item_transition"):
        baseline = getattr(baselines, f"{name}_scores")
        start = time.perf_counter()
        metrics = run.test_metrics(
            lambda histories, baseline=baseline: baseline(
                run.split.train, run.sequences.num_items, histories
            )
        )
        rows[name] = (metrics, time.perf_counter() - start)
    start = time.perf_counter()
    run.train(num_epochs=_EPOCHS.value, batch_size=64, learning_rate=2e-3, verbose=0)
    seconds = time.perf_counter() - start
    rows["bert4rec"] = (run.evaluate(), seconds)
    print(f"MovieLens-100K: {len(run.split.test_targets)} users, {run.sequences.num_items} items")
    print(f"{'recommender':<16} {'NDCG@10':>8} {'HR@10':>8} {'seconds':>8}")
    for name, (metrics, seconds) in rows.items():
        print(
            f"{name:<16} {metrics['test/full/ndcg@10']:>8.4f} "
            f"{metrics['test/full/hr@10']:>8.4f} {seconds:>8.1f}"
        )
    return {name: {**metrics, "seconds": seconds} for name, (metrics, seconds) in rows.items()}


def speed():
    """Prints training windows per second at ML-1M sizes."""
    import keras
    import numpy as np

    from bert_keras.models.bert4rec import Bert4Rec

    rng = np.random.default_rng(0)
    item_ids = rng.integers(1, ML1M_ITEMS + 1, (ML1M_BATCH, ML1M_LENGTH)).astype("int32")
    positions = np.sort(
        np.stack([rng.choice(ML1M_LENGTH, ML1M_PREDICTIONS, replace=False) for _ in item_ids]),
        axis=1,
    ).astype("int32")
    labels = np.take_along_axis(item_ids, positions, axis=1)
    np.put_along_axis(item_ids, positions, ML1M_ITEMS + 1, axis=1)
    features = {"item_ids": item_ids, "masked_positions": positions}
    model = Bert4Rec.from_preset("bert4rec_ml1m", num_items=ML1M_ITEMS)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4))

    def step():
        model.train_on_batch(features, labels)

    seconds = common.interleaved_median_seconds({"bert4rec": step}, common.REPEATS.value)
    seconds = seconds["bert4rec"]
    rate = ML1M_BATCH / seconds
    print(
        f"{keras.backend.backend()}: {rate:.1f} training windows/s "
        f"(batch {ML1M_BATCH}, length {ML1M_LENGTH}, {ML1M_ITEMS} items)"
    )
    return {"backend": keras.backend.backend(), "windows_per_second": rate}


def recbole():
    """RecBole's BERT4Rec on ML-100K in its side environment: test metrics and seconds."""
    if not os.path.isfile(RECBOLE_PYTHON):
        raise RuntimeError(f"{RECBOLE_PYTHON} is missing: run `make recbole-venv` first.")
    completed = subprocess.run(
        [RECBOLE_PYTHON, "-m", "benchmarks.recbole_bert4rec", f"--epochs={_RECBOLE_EPOCHS.value}"],
        cwd=common.REPOSITORY,
        capture_output=True,
        text=True,
    )
    if completed.returncode:
        raise RuntimeError(f"RecBole's BERT4Rec failed:\n{completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    print(
        f"RecBole BERT4Rec: NDCG@10 {result['test/full/ndcg@10']:.4f}, "
        f"HR@10 {result['test/full/hr@10']:.4f}, {result['seconds']:.1f} s "
        f"(best epoch {result['best_epoch']}; {result['users']} users, {result['items']} items)"
    )
    return result


def main(argv):
    del argv
    results = {}
    parts = {"movielens": movielens, "speed": speed, "recbole": recbole}
    for part in _PARTS.value:
        results[part] = parts[part]()
    print(json.dumps(results))
    measurements.write_measurements(_measurement_rows(results))


def _measurement_rows(results):
    """BERT4Rec's NDCG@10 and HR@10 beside the best baseline's (by NDCG@10); its speed alone."""
    import keras

    rows = []
    if "movielens" in results:
        by_name = results["movielens"]
        baseline = max(
            (name for name in by_name if name != "bert4rec"),
            key=lambda name: by_name[name]["test/full/ndcg@10"],
        )
        for metric in ("ndcg@10", "hr@10"):
            rows.append(
                measurements.measurement(
                    "bert4rec",
                    f"MovieLens-100K {metric.upper()}",
                    by_name["bert4rec"][f"test/full/{metric}"],
                    f"{baseline} baseline",
                    by_name[baseline][f"test/full/{metric}"],
                    backend=keras.backend.backend(),
                    settings=f"{_EPOCHS.value} epochs",
                )
            )
    if "movielens" in results and "recbole" in results:
        ours, theirs = results["movielens"]["bert4rec"], results["recbole"]
        for name, key, higher_is_better in (
            ("NDCG@10", "test/full/ndcg@10", True),
            ("HR@10", "test/full/hr@10", True),
            ("training seconds", "seconds", False),
        ):
            rows.append(
                measurements.measurement(
                    "bert4rec",
                    f"MovieLens-100K {name} vs RecBole",
                    ours[key],
                    "RecBole BERT4Rec",
                    theirs[key],
                    backend=keras.backend.backend(),
                    higher_is_better=higher_is_better,
                    settings=(
                        f"ours {_EPOCHS.value} epochs; RecBole best of {_RECBOLE_EPOCHS.value} "
                        f"(epoch {theirs['best_epoch']})"
                    ),
                )
            )
    if "speed" in results:
        rows.append(
            measurements.measurement(
                "bert4rec",
                "ML-1M training windows/s",
                results["speed"]["windows_per_second"],
                None,
                None,
                backend=results["speed"]["backend"],
                settings=f"median of {common.REPEATS.value}; no peer in this environment",
            )
        )
    return rows


if __name__ == "__main__":
    restart_with_training_malloc()
    app.run(main)
