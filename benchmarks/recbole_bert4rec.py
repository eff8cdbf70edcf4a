"""RecBole's own BERT4Rec on MovieLens-100K, in RecBole's side environment (`make recbole-venv`).

Run by `benchmarks.bert4rec --parts=recbole` with `.venv-recbole/bin/python`:
RecBole 1.2.1 pins packages this project's environment does not hold, so it
lives in a venv of its own (`requirements-recbole.txt`), and this program
imports only RecBole, torch, absl and `benchmarks.flag_checks`. It trains
RecBole's `BERT4Rec` (its
default configuration: 2 layers, 2 heads, hidden 64, mask ratio 0.2,
cross-entropy over every item) on the `ml-100k.inter` of RecBole's wheel
with the protocol of `tasks.recommend`: users with at least 5
interactions, each history in time order, the last item for test and the
one before for validation, full ranking over the items the user has not
seen, early stopping on validation NDCG@10. It prints one JSON line:
test NDCG@10 and HR@10, the epochs and the training seconds.

RecBole keeps its best model in a pickled checkpoint file, which torch
refuses to load by default; the best weights are kept in memory instead,
so nothing is unpickled.

    .venv-recbole/bin/python -m benchmarks.recbole_bert4rec --epochs=30
"""

import copy
import json
import os
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import flag_checks

_EPOCHS = flags.DEFINE_integer("epochs", 20, "Most training epochs.", lower_bound=1)
_STOPPING_STEP = flags.DEFINE_integer(
    "stopping_step",
    5,
    "Epochs without a better validation NDCG@10 before stopping.",
    lower_bound=1,
)
_MAX_LENGTH = flags.DEFINE_integer(
    "max_sequence_length", 50, "Items of history the model reads.", lower_bound=1
)
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-3, "Adam's learning rate (RecBole's).")
flag_checks.require_positive(_LEARNING_RATE)
_BATCH_SIZE = flags.DEFINE_integer(
    "batch_size", 256, "Training sequences per batch (the paper's).", lower_bound=1
)
_SEED = flags.DEFINE_integer("seed", 2020, "RecBole's seed.")


def _config_dict(checkpoint_dir):
    import recbole

    return {
        "data_path": os.path.join(os.path.dirname(recbole.__file__), "dataset_example"),
        "checkpoint_dir": checkpoint_dir,
        "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
        "user_inter_num_interval": "[5,inf)",
        "eval_args": {
            "split": {"LS": "valid_and_test"},
            "order": "TO",
            "group_by": "user",
            "mode": "full",
        },
        "train_neg_sample_args": None,
        "loss_type": "CE",
        "metrics": ["Hit", "NDCG"],
        "topk": [10],
        "valid_metric": "NDCG@10",
        "MAX_ITEM_LIST_LENGTH": _MAX_LENGTH.value,
        "epochs": _EPOCHS.value,
        "stopping_step": _STOPPING_STEP.value,
        "learning_rate": _LEARNING_RATE.value,
        "train_batch_size": _BATCH_SIZE.value,
        "eval_batch_size": 4096,
        "seed": _SEED.value,
        "reproducibility": True,
        "use_gpu": False,
        "device": "cpu",
        "show_progress": False,
        "log_wandb": False,
    }


def main(argv):
    del argv
    from recbole.config import Config
    from recbole.data import create_dataset
    from recbole.data import data_preparation
    from recbole.model.sequential_recommender import BERT4Rec
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    work = tempfile.mkdtemp(prefix="recbole_")
    os.chdir(work)  # RecBole writes its logs under the working directory
    config = Config(model="BERT4Rec", dataset="ml-100k", config_dict=_config_dict(work))
    init_seed(config["seed"], config["reproducibility"])
    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    model = BERT4Rec(config, train_data.dataset)
    trainer = Trainer(config, model)
    best = {}

    def keep_best_weights(epoch, verbose=True, **kwargs):
        del verbose, kwargs
        best.update(epoch=epoch + 1, weights=copy.deepcopy(model.state_dict()))

    trainer._save_checkpoint = keep_best_weights
    start = time.perf_counter()
    trainer.fit(train_data, valid_data, saved=True, show_progress=False)
    seconds = time.perf_counter() - start
    model.load_state_dict(best["weights"])
    result = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
    print(
        json.dumps(
            {
                "test/full/ndcg@10": float(result["ndcg@10"]),
                "test/full/hr@10": float(result["hit@10"]),
                "users": int(dataset.user_num - 1),
                "items": int(dataset.item_num - 1),
                "best_epoch": best["epoch"],
                "seconds": seconds,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
