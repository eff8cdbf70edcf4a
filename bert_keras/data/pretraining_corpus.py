"""Text corpus -> sharded pretraining records, streaming, in worker processes.

The driver behind `tools/create_pretraining_data.py`. The input is the
original's: one sentence per line, a blank line between documents (a new
input file also starts a new document). The main process reads the corpus in
order, tokenizes it in in-graph batches, drops the documents that give no
tokens, cuts the rest into shards of whole documents (`input_mb_per_shard` of
text, at least two documents each) and hands each shard's token ids to the
next idle worker process, which makes
all `dupe_factor` passes of instances (`pretraining_instances`) and their
serialized records; a thread of the main process per worker writes what its
worker sends to a hidden temporary file, renamed when the shard is complete,
while the main thread tokenizes the next shards. At most two shards per
worker are in flight, so memory does not grow with the corpus.

Shard `i` is written to `{output_files[i % len(output_files)]}-{i:05d}`, so a
glob such as `--input_file=out.tfrecord*` reads them all, and nothing else
matches it: the files in progress and the log of finished shards are hidden
files beside them (`.out.tfrecord-00003.incomplete`, `.out.tfrecord.progress`,
see `progress_path`). The log records the settings' fingerprint: a rerun with
the same settings skips finished shards, one with other settings stops with
an error instead of mixing them. A run that completes removes its log, so
running it again makes every shard anew, and deletes shards that an earlier
run left under the same names. Missing directories of the output files are
created.

Departures from the original's reading, and why (the algorithm's are in
pretraining_instances.py):

* A new input file starts a new document (the original runs a document on
  across files), so files can be added or sharded freely.
* Lines that are not valid UTF-8 are skipped, counted and reported with the
  first file:line (the original stops with a decoding error). As in the
  original, a line of only whitespace (Unicode's: a no-break space too)
  separates documents, and a line that gives no tokens is dropped.
* A corpus of fewer than two documents that give tokens is an error (the
  original would pair a document with itself); documents that give no
  tokens are dropped first, as in the original, and counted in the summary;
  one-sentence documents are kept, as in the
  original (they only give random-next pairs), and counted in the summary.
* Instances are shuffled within a shard, not across the whole output: shuffle
  when reading (`pretraining_records.pretraining_dataset(shuffle=True)`
  shuffles files and examples).

TensorFlow is imported inside the functions that need it: the worker
processes (`pretraining_worker`) import only numpy modules of this package,
so each holds a shard's instances, not a copy of TensorFlow. The records are
written by TensorFlow in the main process, whose CRC-32C no package in the
environment offers.
"""

import collections
import dataclasses
import fnmatch
import functools
import glob
import hashlib
import json
import os
import re
import threading
import time

import numpy as np
from absl import logging

from bert_keras.checkpoints.vocabulary import upper_case_warning
from bert_keras.data import pretraining_instances
from bert_keras.data import pretraining_worker
from bert_keras.data.input_file_error import InputFileError
from bert_keras.training.output_lock import file_lock_path

_FORMAT_VERSION = 2  # 2: input files' modification times
_IN_FLIGHT_PER_WORKER = 2
# Text per tokenizer call: bigger calls run hardly faster and raise the main
# process's peak memory.
_TOKENIZE_BATCH_BYTES = 256 * 1024
# The summary warns above this share of [UNK] in the text's tokens: English
# text has well under 1% with BERT's vocabularies, a cased text read with
# an uncased vocabulary and --do_lower_case=false over half.
UNKNOWN_TOKENS_WARNING_SHARE = 0.05


@dataclasses.dataclass
class ReadStatistics:
    """What reading and tokenizing the corpus found, with the first place of each problem.

    `documents` counts the documents that give tokens: the others are dropped.

    Example:
    >>> ReadStatistics().documents
    0
    """

    bytes_read: int = 0
    lines: int = 0
    documents: int = 0
    invalid_utf8_lines: int = 0
    first_invalid_utf8: str = ""
    single_sentence_documents: int = 0
    first_single_sentence: str = ""
    documents_without_tokens: int = 0
    first_document_without_tokens: str = ""
    input_tokens: int = 0
    unknown_input_tokens: int = 0


@dataclasses.dataclass
class TextDocument:
    """A document as read: its stripped UTF-8 lines (bytes), and where it starts."""

    lines: list
    location: str = ""

    @property
    def num_bytes(self):
        return sum(len(line) for line in self.lines)


@dataclasses.dataclass
class TokenizedDocument:
    """A document's sentences (its lines that give tokens), token ids back to back."""

    tokens: np.ndarray  # [tokens] int32
    sentence_lengths: np.ndarray  # [sentences], each > 0
    num_bytes: int  # of its text, which sizes the shards


@dataclasses.dataclass
class DocumentShard:
    """A shard's documents (`TokenizedDocument`s, or any with a `num_bytes`)."""

    index: int
    documents: list
    num_bytes: int = 0

    def token_ids(self):
        """The shard's `TokenizedDocument`s as one `pretraining_instances.Documents`.

        Example:
        >>> shard = DocumentShard(0, [
        ...     TokenizedDocument(np.array([5, 5, 5], np.int32), np.array([2, 1]), 7),
        ...     TokenizedDocument(np.array([6], np.int32), np.array([1]), 2)])
        >>> documents = shard.token_ids()
        >>> documents.tokens.tolist(), documents.sentence_starts.tolist(), documents.document_starts.tolist()
        ([5, 5, 5, 6], [0, 2, 3, 4], [0, 2, 3])
        """
        lengths = np.concatenate([document.sentence_lengths for document in self.documents])
        sentences = [len(document.sentence_lengths) for document in self.documents]
        return pretraining_instances.Documents(
            tokens=np.concatenate([document.tokens for document in self.documents]),
            sentence_starts=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            document_starts=np.concatenate([[0], np.cumsum(sentences)]).astype(np.int64),
        )


def input_patterns(input_file):
    """The paths and globs of a comma-separated `input_file` (or of a list), blanks dropped.

    Example:
    >>> input_patterns(" a.txt, ,data/*.txt")
    ['a.txt', 'data/*.txt']
    """
    parts = input_file.split(",") if isinstance(input_file, str) else input_file
    return [pattern for pattern in (part.strip() for part in parts) if pattern]


def resolve_input_files(input_file, flag="--input_file", example="*.txt"):
    """Files of comma-separated paths or globs, each of which must match, and match no directory.

    Args:
        input_file: comma-separated paths or globs, or a list of them.
        flag: what names them, for the errors.
        example: a glob of the files wanted in a directory, for the errors.

    Example:
    >>> resolve_input_files("/no/such/file.txt")
    Traceback (most recent call last):
    ...
    FileNotFoundError: --input_file: no file matches '/no/such/file.txt'.
    """
    import tensorflow as tf

    paths = []
    for pattern in input_patterns(input_file):
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"{flag}: no file matches {pattern!r}.")
        for path in matches:
            reject_directory(path, flag, example=example)
        paths.extend(matches)
    if not paths:
        raise FileNotFoundError(f"{flag} names no file.")
    return _each_once(paths, flag)


def _each_once(paths, flag):
    """`paths` without repeats (overlapping globs), which are warned of: each file is read once."""
    keys = [path if "://" in path else os.path.realpath(path) for path in paths]
    repeated = [key for key, count in collections.Counter(keys).items() if count > 1]
    if repeated:
        others = f" and {len(repeated) - 1} other files" if len(repeated) > 1 else ""
        logging.warning(
            "%s's patterns match %s%s more than once; each file is read once.",
            flag,
            repeated[0],
            others,
        )
    kept = {}
    for key, path in zip(keys, paths):
        kept.setdefault(key, path)
    return list(kept.values())


def reject_directory(path, flag, wanted="its files", example="*.txt"):
    """Raises IsADirectoryError, naming `flag` and what to give instead, when `path` is a directory.

    Args:
        path: a path given by the flag.
        flag: the flag's name, for the message.
        wanted: what the flag wants from the directory.
        example: a name in the directory, or a glob, for the message.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> reject_directory(directory + "/corpus.txt", "--input_file")  # a file (or nothing): no error
    >>> try:
    ...     reject_directory(directory, "--vocab_file", "the vocabulary file in it", "vocab.txt")
    ... except IsADirectoryError as error:
    ...     str(error) == (f"--vocab_file: {directory} is a directory; give the vocabulary "
    ...                    f"file in it, e.g. '{directory}/vocab.txt'.")
    True
    """
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{flag}: {path} is a directory; give {wanted}, e.g. {os.path.join(path, example)!r}."
        )


def check_outputs_are_not_inputs(input_file, output_files):
    """Raises ValueError naming both flags where --input_file would read this run's own files.

    The shards (`out.tfrecord-00000`, ...) hold records, not text, and the
    hidden files beside them (the run's lock, its progress log, a shard
    being written) are its bookkeeping: a pattern that matches the first
    shard's name or one of those, even before they exist, would have this
    run or the next tokenize them as text. TensorFlow's globs, which read
    --input_file, match hidden files too.

    Args:
        input_file: comma-separated paths or globs, or a list of them.
        output_files: the output paths (`output_file_names`).

    Example:
    >>> check_outputs_are_not_inputs("data/*", ["data/out.tfrecord"])
    Traceback (most recent call last):
    ...
    ValueError: --input_file's 'data/*' matches data/out.tfrecord-00000, a file of --output_file's ...
    >>> check_outputs_are_not_inputs("data/*.txt", ["data/out.tfrecord"])
    """
    patterns = input_patterns(input_file)
    for output in output_files:
        if "://" in output:
            continue  # other file systems' globs have rules of their own
        first_shard = shard_path([output], 0)
        own_files = (first_shard, file_lock_path(output), progress_path(output))
        own_files += (_temporary_path(first_shard),)
        for pattern in patterns:
            for path in own_files:
                if glob_matches(pattern, path, hidden_files=True):
                    raise ValueError(
                        f"--input_file's {pattern!r} matches {path}, a file of --output_file's "
                        f"run ({'its records' if path == first_shard else 'its bookkeeping'}), "
                        "which would be read as text: write the records outside the pattern, or "
                        "narrow the pattern (e.g. to *.txt)."
                    )


def glob_matches(pattern, path, hidden_files=False):
    """Whether a glob of `pattern` would list `path` if it existed (symbolic links resolved).

    Args:
        pattern: a path, or a glob of paths.
        path: the file in question.
        hidden_files: whether a wildcard matches a leading "." (as in
            TensorFlow's globs), or not (as in Python's `glob`).

    Example:
    >>> glob_matches("data/*", "data/.out.lock"), glob_matches("data/*", "data/.out.lock", True)
    (False, True)
    """
    pattern_parts = _real_parts(pattern)
    path_parts = _real_parts(path)
    return len(pattern_parts) == len(path_parts) and all(
        fnmatch.fnmatchcase(part, pattern_part)
        and (hidden_files or pattern_part.startswith(".") or not part.startswith("."))
        for part, pattern_part in zip(path_parts, pattern_parts)
    )


def _real_parts(path):
    """The components of `path`, its longest leading part without wildcards resolved."""
    parts = os.path.abspath(path).split(os.sep)
    plain = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    head = os.path.realpath(os.sep.join(parts[:plain]) or os.sep)
    return [part for part in head.split(os.sep) if part] + parts[plain:]


def _open_binary(path):
    if "://" in path:
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def read_documents(paths, statistics):
    """Yields the input files' documents as `TextDocument`s.

    Lines that are not valid UTF-8 are skipped and counted in `statistics`.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "wb").write(b"One.\\nTwo.\\n\\n\\xff bad\\nThree.\\n\\xc2\\xa0\\nFour.\\n")
    >>> statistics = ReadStatistics()
    >>> [document.lines for document in read_documents([path], statistics)]
    [[b'One.', b'Two.'], [b'Three.'], [b'Four.']]
    >>> statistics.invalid_utf8_lines, statistics.first_invalid_utf8.endswith(":4")
    (1, True)
    """
    for path in paths:
        document, first_line = [], 0
        with _open_binary(path) as file:
            for line_number, line in enumerate(file, 1):
                statistics.bytes_read += len(line)
                statistics.lines += 1
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    statistics.invalid_utf8_lines += 1
                    statistics.first_invalid_utf8 = (
                        statistics.first_invalid_utf8 or f"{path}:{line_number}"
                    )
                    continue
                line = line.strip()
                if text.strip():  # Unicode's whitespace, as the original's str.strip()
                    first_line = first_line or line_number
                    document.append(line)
                elif document:
                    yield TextDocument(document, f"{path}:{first_line}")
                    document, first_line = [], 0
        if document:
            yield TextDocument(document, f"{path}:{first_line}")


def tokenized_documents(
    tokenize, documents, statistics, unknown_id=None, max_batch_bytes=_TOKENIZE_BATCH_BYTES
):
    """Yields `TokenizedDocument`s of `TextDocument`s, dropping what gives no tokens.

    As in the original, a line that gives no tokens (control characters, a
    lone byte-order mark) is no sentence, and a document without sentences is
    dropped before documents are counted, paired or drawn as random next
    segments. `statistics` counts the documents kept, those of one sentence,
    those dropped, and the tokens ([UNK] among them where `unknown_id` is given).

    Args:
        tokenize: a function from a [lines] string tensor to ragged int ids.
        documents: `TextDocument`s.
        statistics: a `ReadStatistics` to update.
        unknown_id: the id of "[UNK]", to count.
        max_batch_bytes: text per call of `tokenize`; bigger batches run a
            little faster and take more memory.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> statistics = ReadStatistics()
    >>> texts = [TextDocument([b"hi hi", b"\\x01"], "a:1"), TextDocument([b"\\x01"], "a:4"),
    ...          TextDocument([b"hi", b"ho"], "a:6")]
    >>> [(document.tokens.tolist(), document.sentence_lengths.tolist())
    ...  for document in tokenized_documents(tokenizer.tokenize, texts, statistics, 1)]
    [([5, 5], [2]), ([5, 1], [1, 1])]
    >>> statistics.documents, statistics.documents_without_tokens, statistics.first_document_without_tokens
    (2, 1, 'a:4')
    >>> statistics.single_sentence_documents, statistics.unknown_input_tokens
    (1, 1)
    """
    group, size = [], 0
    for document in documents:
        group.append(document)
        size += document.num_bytes
        if size >= max_batch_bytes:
            yield from _tokenized_group(tokenize, group, statistics, unknown_id, max_batch_bytes)
            group, size = [], 0
    if group:
        yield from _tokenized_group(tokenize, group, statistics, unknown_id, max_batch_bytes)


def _tokenized_group(tokenize, group, statistics, unknown_id, max_batch_bytes):
    import tensorflow as tf

    lines = [line for document in group for line in document.lines]
    token_batches, length_batches = [], []
    for batch in _line_batches(lines, max_batch_bytes):
        token_ids = tokenize(tf.constant(batch))  # [lines, (tokens)]
        token_batches.append(token_ids.flat_values.numpy().astype(np.int32))
        length_batches.append(token_ids.row_lengths().numpy())
    tokens, lengths = np.concatenate(token_batches), np.concatenate(length_batches)
    statistics.input_tokens += len(tokens)
    if unknown_id is not None:
        statistics.unknown_input_tokens += int(np.count_nonzero(tokens == unknown_id))
    token_starts = np.concatenate([[0], np.cumsum(lengths)])
    line_end = 0
    for document in group:
        line_begin, line_end = line_end, line_end + len(document.lines)
        sentence_lengths = lengths[line_begin:line_end]
        sentence_lengths = sentence_lengths[sentence_lengths > 0]
        if not len(sentence_lengths):
            statistics.documents_without_tokens += 1
            statistics.first_document_without_tokens = (
                statistics.first_document_without_tokens or document.location
            )
            continue
        statistics.documents += 1
        if len(sentence_lengths) == 1:
            statistics.single_sentence_documents += 1
            statistics.first_single_sentence = statistics.first_single_sentence or document.location
        yield TokenizedDocument(
            tokens[token_starts[line_begin] : token_starts[line_end]],
            sentence_lengths,
            document.num_bytes,
        )


class TooFewDocumentsError(ValueError):
    """A corpus of fewer than two documents that give tokens: it has no next-sentence pairs."""


def text_shards(documents, bytes_per_shard, corpus="The corpus"):
    """Groups documents into `DocumentShard`s of at least `bytes_per_shard`, 2+ documents.

    A last shard too small to stand alone joins the one before. Raises
    `TooFewDocumentsError` when there are fewer than two documents, before
    yielding anything: the original would pair a document with itself.

    Args:
        documents: objects with a `num_bytes` (`TokenizedDocument`s).
        bytes_per_shard: the text of a shard, at least.
        corpus: what the documents are, for the error.

    Example:
    >>> documents = [TextDocument([b"a" * 10]), TextDocument([b"b" * 10]),
    ...              TextDocument([b"c" * 10]), TextDocument([b"d" * 10]), TextDocument([b"e"])]
    >>> [len(shard.documents) for shard in text_shards(documents, 15)]
    [2, 3]
    >>> list(text_shards([TextDocument([b"Only.", b"One."])], 15))
    Traceback (most recent call last):
    ...
    bert_keras...TooFewDocumentsError: The corpus holds 1 document that gives tokens; next-sentence ...
    """
    held, current, size = None, [], 0
    for document in documents:
        current.append(document)
        size += document.num_bytes
        if size >= bytes_per_shard and len(current) >= 2:
            if held is not None:
                yield held
            held = DocumentShard(0 if held is None else held.index + 1, current, size)
            current, size = [], 0
    if held is None:
        if len(current) < 2:
            raise TooFewDocumentsError(
                f"{corpus} holds {len(current)} "
                f"{'document that gives' if len(current) == 1 else 'documents that give'} "
                "tokens; next-sentence pairs need at least 2."
            )
        held = DocumentShard(0, current, size)
    elif current:
        held.documents.extend(current)
        held.num_bytes += size
    yield held


def _line_batches(lines, max_bytes):
    """Consecutive groups of lines of at most `max_bytes` (or one line)."""
    batch, size = [], 0
    for line in lines:
        if batch and size + len(line) > max_bytes:
            yield batch
            batch, size = [], 0
        batch.append(line)
        size += len(line)
    if batch:
        yield batch


def shard_path(output_files, index):
    """Where shard `index` goes.

    Example:
    >>> shard_path(["a.tfrecord", "b.tfrecord"], 3)
    'b.tfrecord-00003'
    """
    return f"{output_files[index % len(output_files)]}-{index:05d}"


def _temporary_path(path):
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.incomplete")


def output_file_names(output_file):
    """The paths of a comma-separated `--output_file`, blanks dropped.

    Example:
    >>> output_file_names(" a.tfrecord, ,b.tfrecord")
    ['a.tfrecord', 'b.tfrecord']
    """
    return [path.strip() for path in output_file.split(",") if path.strip()]


def check_shards_finished(paths, flag="--input_file"):
    """Raises an `InputFileError` for a shard of a run that is under way or was interrupted.

    Until its last shard is written, `create_pretraining_data` keeps its
    progress log beside the output (`progress_path`): a set of shards with
    one is partial, or a new run's shards mixed with an earlier run's.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> shard = os.path.join(directory, "out.tfrecord-00000")
    >>> check_shards_finished([shard])
    >>> open(progress_path(os.path.join(directory, "out.tfrecord")), "w").close()
    >>> check_shards_finished([shard])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bert_keras.data.input_file_error.InputFileError: --input_file: .../out.tfrecord-00000 belongs ...
    """
    for path in paths:
        log = progress_path(re.sub(r"-\d{5}$", "", path))
        if os.path.exists(log):
            raise InputFileError(
                f"{flag}: {path} belongs to records that create_pretraining_data has not "
                f"finished ({log} is beside them: a run is writing them, or was interrupted, "
                "and earlier shards of that name may be another run's). Run the same command "
                "again to finish them."
            )


def progress_path(output_file):
    """Where the log of finished shards goes: a hidden file beside the output.

    Hidden so that the usual way of reading the output, a glob of its name
    (`--input_file=out.tfrecord*`), never picks it up.

    Example:
    >>> progress_path("/data/out.tfrecord")
    '/data/.out.tfrecord.progress'
    """
    directory, name = os.path.split(output_file)
    return os.path.join(directory, f".{name}.progress")


class ProgressLog:
    """Finished shards of a run, in a JSON-lines file beside the output.

    The first line holds the settings; a log written with other settings
    raises ValueError naming the settings that differ.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.progress")
    >>> log = ProgressLog(path, {"dupe_factor": 10})
    >>> log.add(0, {"examples": 5})
    >>> ProgressLog(path, {"dupe_factor": 10}).finished
    {0: {'examples': 5}}
    >>> ProgressLog(path, {"dupe_factor": 5})
    Traceback (most recent call last):
    ...
    ValueError: ...out.progress records a run with other settings (dupe_factor: 10 then, 5 now); ...
    >>> log.remove()  # the run is complete
    >>> ProgressLog(path, {"dupe_factor": 5}).finished
    {}
    """

    def __init__(self, path, settings):
        self.path = path
        self.settings = settings
        self.finished = {}
        if os.path.exists(path):
            self._load()

    def _load(self):
        with open(self.path) as file:
            lines = file.read().splitlines()
        recorded = json.loads(lines[0])["settings"] if lines else self.settings
        if recorded != self.settings:
            changed = sorted(set(recorded) | set(self.settings))
            differences = ", ".join(
                f"{key}: {recorded.get(key)} then, {self.settings.get(key)} now"
                for key in changed
                if recorded.get(key) != self.settings.get(key)
            )
            raise ValueError(
                f"{self.path} records a run with other settings ({differences}); delete it and "
                "its shards, or choose another --output_file."
            )
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # the last line of a killed run
                continue
            self.finished[entry["shard"]] = entry["statistics"]

    def add(self, index, statistics):
        """Records a finished shard (the file is made on the first one)."""
        new = not os.path.exists(self.path)
        with open(self.path, "a") as file:
            if new:
                file.write(json.dumps({"settings": self.settings}) + "\n")
            file.write(json.dumps({"shard": index, "statistics": statistics}) + "\n")
        self.finished[index] = statistics

    def remove(self):
        """Deletes the file, once the run it records is complete."""
        if os.path.exists(self.path):
            os.remove(self.path)


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        digest.update(file.read())
    return digest.hexdigest()


def _file_version(path):
    """`[path, size, modification time in ns]`: a file edited since changes (None past a URL)."""
    if "://" in path:
        return [path, None, None]
    status = os.stat(path)
    return [path, status.st_size, status.st_mtime_ns]


def run_settings(
    paths, output_files, vocab_file, do_lower_case, options, compression, input_mb_per_shard
):
    """Everything that decides the output bytes, as a JSON-able dict."""
    return {
        "format_version": _FORMAT_VERSION,
        "input_files": [_file_version(path) for path in paths],
        "output_files": list(output_files),
        "vocab_sha256": _file_sha256(vocab_file),
        "do_lower_case": do_lower_case,
        "compression": compression,
        "input_mb_per_shard": input_mb_per_shard,
        **dataclasses.asdict(options),
    }


class _Progress:
    """Logs documents, MB/s and ETA at most every `interval` seconds."""

    def __init__(self, statistics, total_bytes, interval):
        self.statistics, self.total_bytes, self.interval = statistics, total_bytes, interval
        self.start = self.last = time.monotonic()

    def update(self, shards_done):
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        done = self.statistics.bytes_read
        speed = done / max(now - self.start, 1e-9)
        eta = (self.total_bytes - done) / speed if speed else float("inf")
        logging.info(
            "%d documents, %.1f of %.1f MB read (%.0f%%), %.2f MB/s, %d shards written, ETA %.0f s",
            self.statistics.documents,
            done / 1e6,
            self.total_bytes / 1e6,
            100 * done / max(self.total_bytes, 1),
            speed / 1e6,
            shards_done,
            eta,
        )


def create_pretraining_data(
    input_file,
    output_file,
    vocab_file,
    options,
    do_lower_case=True,
    compression="",
    num_workers=None,
    input_mb_per_shard=1.0,
    progress_interval=30.0,
):
    """Writes pretraining records for a text corpus; returns the summary.

    Args:
        input_file: comma-separated paths or globs of text files.
        output_file: comma-separated output paths; shards get "-00000"...
        vocab_file: the WordPiece vocabulary.
        options: a `pretraining_instances.InstanceOptions`.
        do_lower_case: lower-case and strip accents (uncased vocabularies).
        compression: "" or "GZIP".
        num_workers: worker processes (default: all cores).
        input_mb_per_shard: input text per shard; it bounds the window from
            which random next segments are drawn.
        progress_interval: seconds between progress lines.

    Returns:
        A dict of counts (see `summary_lines`).

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> vocab = os.path.join(directory, "vocab.txt")
    >>> _ = open(vocab, "w").write("\\n".join(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "."]))
    >>> corpus = os.path.join(directory, "corpus.txt")
    >>> _ = open(corpus, "w").write("a b.\\nb a.\\n\\nb b.\\na a.\\n")
    >>> summary = create_pretraining_data(
    ...     corpus, os.path.join(directory, "out.tfrecord"), vocab,
    ...     pretraining_instances.InstanceOptions(max_seq_length=16, dupe_factor=2),
    ...     num_workers=1)
    >>> summary["shards"], sorted(os.listdir(directory))
    (1, ['corpus.txt', 'out.tfrecord-00000', 'vocab.txt'])
    """
    options.validate()
    if compression not in ("", "GZIP"):
        raise ValueError(f'--compression is {compression!r} but must be "" or "GZIP".')
    if input_mb_per_shard <= 0:
        raise ValueError(f"--input_mb_per_shard is {input_mb_per_shard} but must be > 0.")
    paths = resolve_input_files(input_file)
    if not os.path.exists(vocab_file):
        raise FileNotFoundError(f"--vocab_file: {vocab_file!r} does not exist.")
    reject_directory(vocab_file, "--vocab_file", "the vocabulary file in it", "vocab.txt")
    output_files = output_file_names(output_file)
    if not output_files:
        raise ValueError("--output_file names no file.")
    check_output_files(output_files)
    check_outputs_are_not_inputs(input_file, output_files)
    num_workers = num_workers or os.cpu_count() or 1
    settings = run_settings(
        paths, output_files, vocab_file, do_lower_case, options, compression, input_mb_per_shard
    )
    _make_parent_directories(output_files)
    log = ProgressLog(progress_path(output_files[0]), settings)

    statistics = ReadStatistics()
    progress = _Progress(
        statistics, sum(size for _, size, _ in settings["input_files"] if size), progress_interval
    )
    shard_statistics = dict(log.finished)
    writer = _ShardWriter(compression, log, shard_statistics)
    pending = collections.deque()
    start = time.monotonic()
    # The workers start while the tokenizer is built. A thread per worker
    # writes its shards while this one tokenizes the next: all spend their
    # time in TensorFlow ops or numpy, which release the GIL.
    pool = pretraining_worker.WorkerPool(num_workers)
    try:
        tokenize, special_tokens, unknown_id = _tokenizer(
            vocab_file, do_lower_case, options.do_whole_word_mask
        )
        # Tokenized before sharding: a document that gives no tokens is
        # dropped, so every shard holds two documents to draw random next
        # segments from (a resumed run tokenizes its finished shards again).
        documents = tokenized_documents(
            tokenize, read_documents(paths, statistics), statistics, unknown_id
        )
        corpus = f"--input_file {input_file!r}"
        try:
            for shard in text_shards(documents, input_mb_per_shard * 1e6, corpus):
                path = shard_path(output_files, shard.index)
                if shard.index in log.finished and os.path.exists(path):
                    continue
                documents = shard.token_ids()
                write = functools.partial(writer.write, shard.index, path)
                pending.append(
                    pool.executor.submit(
                        pool.make_shard, documents, special_tokens, options, shard.index, write
                    )
                )
                while len(pending) >= _IN_FLIGHT_PER_WORKER * num_workers:
                    pending.popleft().result()
                progress.update(len(shard_statistics))
        except TooFewDocumentsError as error:
            raise TooFewDocumentsError(f"{error}{_skipped_lines(statistics)}") from None
        while pending:
            pending.popleft().result()
    finally:
        pool.close()
    _remove_stale_shards(output_files, shard_statistics)
    log.remove()
    return _summary(statistics, shard_statistics, time.monotonic() - start)


def _skipped_lines(statistics):
    """What the reader skipped, where that may be why a corpus gave too few documents."""
    if not statistics.invalid_utf8_lines:
        return ""
    return (
        f" {statistics.invalid_utf8_lines} of its lines are not valid UTF-8, so were skipped (the "
        f"first at {statistics.first_invalid_utf8}): is the text compressed, or in another "
        "encoding?"
    )


def _remove_stale_shards(output_files, shard_indexes):
    """Deletes shards an earlier, finished run left under these names.

    A finished run keeps no log, so the next run with the same output names
    starts afresh and overwrites its shards; where it makes fewer, the rest
    would otherwise be read with its own by `OUTPUT_FILE*`.
    """
    import tensorflow as tf

    written = {
        (output_files[index % len(output_files)], os.path.basename(shard_path(output_files, index)))
        for index in shard_indexes
    }
    removed = []
    for output_file in sorted(set(output_files)):
        shard_name = re.compile(re.escape(os.path.basename(output_file)) + r"-\d{5,}")
        for path in sorted(tf.io.gfile.glob(output_file + "-*")):
            name = os.path.basename(path)
            if shard_name.fullmatch(name) and (output_file, name) not in written:
                tf.io.gfile.remove(path)
                removed.append(path)
    if removed:
        logging.warning(
            "Deleted %d shards an earlier run left under these names: %s%s",
            len(removed),
            ", ".join(removed[:3]),
            f" and {len(removed) - 3} more" if len(removed) > 3 else "",
        )


def check_output_files(output_files):
    """Raises ValueError naming --output_file when a shard could not be written there.

    Checked before any work: a name ending in a separator (its shards would
    be hidden-looking "-00000" files in the directory), an existing parent
    that is a file, or one this process may not write in.

    Example:
    >>> check_output_files(["/tmp/out/"])
    Traceback (most recent call last):
    ...
    ValueError: --output_file: '/tmp/out/' names a directory; give a file name in it, e.g. '/tmp/out/examples.tfrecord'.
    """
    for path in output_files:
        if "://" in path:
            continue  # tf.io.gfile's file systems answer when written
        if not os.path.basename(path):
            raise ValueError(
                f"--output_file: {path!r} names a directory; give a file name in it, e.g. "
                f"{os.path.join(path, 'examples.tfrecord')!r}."
            )
        existing = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise ValueError(
                f"--output_file: {existing} is a file, so {path!r} cannot be written; "
                "give a path in a directory."
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ValueError(f"--output_file: {existing} is not writable, so {path!r} cannot be.")


def _make_parent_directories(paths):
    """Creates the missing directories of output files, as the training programs do."""
    import tensorflow as tf

    for directory in {os.path.dirname(path) for path in paths}:
        if directory:
            try:
                tf.io.gfile.makedirs(directory)
            except tf.errors.OpError as error:  # e.g. in /proc, even for root
                raise ValueError(
                    f"--output_file: cannot make the directory {directory}: {error.message}"
                ) from None


def _tokenizer(vocab_file, do_lower_case, whole_words):
    import tensorflow as tf

    from bert_keras.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab_file, lowercase=do_lower_case)
    vocabulary = tokenizer.get_vocabulary()
    if do_lower_case and (warning := upper_case_warning(vocabulary, vocab_file)):
        logging.warning(warning)
    special_tokens = pretraining_instances.SpecialTokens(
        cls_id=tokenizer.cls_token_id,
        sep_id=tokenizer.sep_token_id,
        mask_id=tokenizer.mask_token_id,
        vocabulary_size=len(vocabulary),
        is_continuation=np.array([token.startswith("##") for token in vocabulary])
        if whole_words
        else None,
    )
    tokenize = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    return tokenize, special_tokens, tokenizer.unk_token_id


class _ShardWriter:
    """Writes shards from several threads: records, rename, progress log."""

    def __init__(self, compression, log, shard_statistics):
        self.compression, self.log, self.shard_statistics = compression, log, shard_statistics
        self._lock = threading.Lock()

    def write(self, index, path, statistics, batches):
        """Writes a shard's records as they come, renames the file, logs it."""
        import tensorflow as tf

        temporary = _temporary_path(path)
        options = tf.io.TFRecordOptions(compression_type=self.compression)
        with tf.io.TFRecordWriter(temporary, options) as writer:
            for data, lengths in batches:
                data, ends = data.tobytes(), np.cumsum(lengths).tolist()
                for begin, end in zip([0, *ends[:-1]], ends):
                    writer.write(data[begin:end])
        tf.io.gfile.rename(temporary, path, overwrite=True)
        with self._lock:
            self.log.add(index, statistics)
            self.shard_statistics[index] = statistics


def _summary(read_statistics, shard_statistics, seconds):
    totals = collections.Counter()
    for statistics in shard_statistics.values():
        totals.update(statistics)
    return {
        "shards": len(shard_statistics),
        **dict(totals),
        **dataclasses.asdict(read_statistics),
        "seconds": seconds,
    }


def summary_lines(summary):
    """The final report, as lines for a log.

    Example:
    >>> summary = {"shards": 1, "examples": 10, "tokens": 900, "maskable_tokens": 870,
    ...            "masked_tokens": 130, "mask_tokens": 104, "random_tokens": 13,
    ...            "kept_tokens": 13, "random_next": 5, "documents": 4, "lines": 40,
    ...            "bytes_read": 4000, "invalid_utf8_lines": 0, "first_invalid_utf8": "",
    ...            "single_sentence_documents": 0, "first_single_sentence": "", "seconds": 2.0}
    >>> print("\\n".join(summary_lines(summary)))  # doctest: +NORMALIZE_WHITESPACE
    Wrote 10 examples in 1 shards from 4 documents (40 lines, 0.0 MB, 0.00 MB/s).
    Tokens: 900; masked: 130 = 0.149 of the 870 maskable (not [CLS]/[SEP]).
    Masked tokens became [MASK] 0.800, a random token 0.100, unchanged 0.100.
    Random next segments: 0.500 of the examples.
    """
    examples = summary.get("examples", 0)
    masked = summary.get("masked_tokens", 0)
    lines = [
        f"Wrote {examples} examples in {summary['shards']} shards from {summary['documents']} "
        f"documents ({summary['lines']} lines, {summary['bytes_read'] / 1e6:.1f} MB, "
        f"{summary['bytes_read'] / 1e6 / max(summary['seconds'], 1e-9):.2f} MB/s).",
        f"Tokens: {summary.get('tokens', 0)}; masked: {masked} = "
        f"{masked / max(summary.get('maskable_tokens', 0), 1):.3f} of the "
        f"{summary.get('maskable_tokens', 0)} maskable (not [CLS]/[SEP]).",
        f"Masked tokens became [MASK] {summary.get('mask_tokens', 0) / max(masked, 1):.3f}, "
        f"a random token {summary.get('random_tokens', 0) / max(masked, 1):.3f}, "
        f"unchanged {summary.get('kept_tokens', 0) / max(masked, 1):.3f}.",
        f"Random next segments: {summary.get('random_next', 0) / max(examples, 1):.3f} of the examples.",
    ]
    if summary["invalid_utf8_lines"]:
        lines.append(
            f"Skipped {summary['invalid_utf8_lines']} lines that are not valid UTF-8 "
            f"(the first at {summary['first_invalid_utf8']})."
        )
    if summary["single_sentence_documents"]:
        lines.append(
            f"{summary['single_sentence_documents']} documents have a single sentence (the first at "
            f"{summary['first_single_sentence']}); as in the original, they give only random-next pairs."
        )
    if summary.get("documents_without_tokens"):
        lines.append(
            f"Dropped {summary['documents_without_tokens']} documents that give no tokens (the "
            f"first at {summary['first_document_without_tokens']}), as the original does."
        )
    unknown, tokens = summary.get("unknown_input_tokens", 0), summary.get("input_tokens", 0)
    if unknown > UNKNOWN_TOKENS_WARNING_SHARE * tokens:
        lines.append(
            f"Warning: {unknown / tokens:.3f} of the {tokens} tokens of the text are [UNK]: does "
            "--do_lower_case suit the vocabulary (an uncased one needs true, a cased one false), "
            "and the vocabulary the text's language?"
        )
    return lines
