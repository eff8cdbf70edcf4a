"""Learns a BERT WordPiece vocabulary (vocab.txt) from text files.

    python -m tools.build_vocab --input_file='corpus/*.txt' --output_file=vocab.txt \\
        --vocab_size=30522 --do_lower_case=true

Words are split exactly as bert_keras's BertTokenizer splits them; the learner
is tensorflow-text's. A 30,522-token vocabulary gets the released BERT layout
([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103); any other size puts the
five special tokens first. The file is written to a temporary name and renamed
(`bert_keras.atomic_files`), so an interrupted run leaves no partial vocab.txt;
missing directories of --output_file are created. Lines that are not valid UTF-8
are skipped and reported (their count and the first one's file:line), as
tools.create_pretraining_data does.

As tensorflow-text's learner does, only the --max_unique_characters (1,000)
most frequent characters are learned: words holding a rarer one are left out
(a printed warning counts them; raise the flag for Chinese or Japanese, whose
vocabularies hold many thousands of characters). Words over 50 characters, which
that learner cannot take, give only their characters (a printed warning counts
them too): a language written without spaces between words, Thai say, then
tokenizes character by character unless it is split into words first.
"""

import glob
import os
import sys

from absl import app
from absl import flags
from absl import logging

from bert_keras.atomic_files import file_in_the_way
from bert_keras.atomic_files import write_text
from bert_keras.data.pretraining_corpus import glob_matches
from bert_keras.data.pretraining_corpus import input_patterns
from bert_keras.data.pretraining_corpus import reject_directory
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.usage_errors import run_program

_INPUT_FILE = flags.DEFINE_string("input_file", None, "Comma-separated text files or globs.")
_OUTPUT_FILE = flags.DEFINE_string("output_file", None, "Where vocab.txt goes.")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size",
    30522,
    "The vocabulary's size at most (the learner's rarest subwords past it are left out).",
    lower_bound=6,  # the five special tokens and one learned
)
_MAX_UNIQUE_CHARACTERS = flags.DEFINE_integer(
    "max_unique_characters",
    1000,
    "Characters past this many most frequent are left out (each kept one takes two "
    'tokens, "x" and "##x"); a warning says how many. Raise it for Chinese or Japanese.',
    lower_bound=1,
)
_DO_LOWER_CASE = flags.DEFINE_boolean(
    "do_lower_case", True, "Uncased (lower-case, strip accents) or cased vocabulary."
)


def input_paths(patterns):
    """Expands files and globs; raises naming any that match nothing, or if none is given.

    Example:
    >>> input_paths([])
    Traceback (most recent call last):
    ...
    absl.app.UsageError: --input_file names no file.
    """
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise app.UsageError(f"--input_file: {pattern!r} matches no file.")
        for path in matches:
            _reject_directory(path, "--input_file")
        paths += matches
    if not paths:
        raise app.UsageError("--input_file names no file.")
    return paths


def check_output_is_no_input(output_file, patterns, paths):
    """Raises a usage error naming both flags if --output_file is, or would be, an input.

    Writing one of the input files would replace that text; a glob that
    matches --output_file would read this vocabulary on the next run, even
    before the file exists.

    Example:
    >>> check_output_is_no_input("data/vocab.txt", ["data/*.txt"], ["data/a.txt"])
    Traceback (most recent call last):
    ...
    absl.app.UsageError: --output_file data/vocab.txt matches --input_file's 'data/*.txt', ...
    """
    output = os.path.realpath(output_file)
    for path in paths:
        if os.path.realpath(path) == output:
            raise app.UsageError(
                f"--output_file {output_file} is the --input_file file {path}: writing the "
                "vocabulary would replace that text. Give another --output_file."
            )
    for pattern in patterns:
        if glob.has_magic(pattern) and glob_matches(pattern, output_file):
            raise app.UsageError(
                f"--output_file {output_file} matches --input_file's {pattern!r}, so a later "
                "run would learn from this vocabulary: write it outside the pattern, or narrow "
                "the pattern."
            )


def check_output_file(path):
    """Raises a usage error naming --output_file unless vocab.txt can be written at `path`.

    Missing directories are made later; a directory at `path`, or a file
    where a directory of it must be, is an error.

    Example:
    >>> check_output_file("/")
    Traceback (most recent call last):
    ...
    absl.app.UsageError: --output_file: / is a directory; give a file path in it, e.g. '/vocab.txt'.
    """
    if not path:
        raise app.UsageError("--output_file is empty; give where vocab.txt goes.")
    _reject_directory(path, "--output_file", "a file path in it", "vocab.txt")
    blocking = file_in_the_way(os.path.dirname(os.path.abspath(path)))
    if blocking:
        raise app.UsageError(f"--output_file: {blocking} is a file, so {path} cannot be made.")


def _reject_directory(path, flag, *hint):
    """`pretraining_corpus.reject_directory`, its error a usage error."""
    try:
        reject_directory(path, flag, *hint)
    except IsADirectoryError as error:
        raise app.UsageError(str(error)) from None


def left_out_message(left_out, limit):
    """The warning for the characters (a dict character → occurrences) past the `limit`.

    Example:
    >>> left_out_message({"a": 2, "b": 1}, 1000)[:71]
    'Warning: 2 distinct characters (3 occurrences) are past the 1000 most f'
    """
    return (
        f"Warning: {len(left_out)} distinct characters ({sum(left_out.values())} occurrences) "
        f"are past the {limit} most frequent (--max_unique_characters={limit}): they, and the "
        "words that hold them, are left out of the vocabulary and will tokenize to [UNK]. "
        "Raise --max_unique_characters to keep them."
    )


def long_words_message(too_long, limit):
    """The warning for words the learner takes as characters only.

    Example:
    >>> long_words_message({"x" * 60: 2, "y" * 70: 1}, limit=50)[:77]
    'Warning: 2 distinct words (3 occurrences) are over 50 characters, the longest'
    """
    first = next(iter(too_long))
    return (
        f"Warning: {len(too_long)} distinct words ({sum(too_long.values())} occurrences) are "
        f"over {limit} characters, the longest the learner takes: their characters are "
        "learned, not their pieces, so they tokenize character by character (a text without "
        f"spaces between words, such as Thai, needs a word segmenter first). The first begins "
        f"{first[:20]!r}."
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    # Before the imports and the learning below, so a bad flag fails fast.
    check_output_file(_OUTPUT_FILE.value)
    patterns = input_patterns(_INPUT_FILE.value)
    paths = input_paths(patterns)
    check_output_is_no_input(_OUTPUT_FILE.value, patterns, paths)
    with long_lived_objects():
        from bert_keras.text.vocabulary_learner import MAX_LEARNED_WORD_LENGTH
        from bert_keras.text.vocabulary_learner import SkippedLines
        from bert_keras.text.vocabulary_learner import count_words
        from bert_keras.text.vocabulary_learner import learn_vocabulary
        from bert_keras.text.vocabulary_learner import left_out_characters
        from bert_keras.text.vocabulary_learner import long_words
        from bert_keras.text.vocabulary_learner import text_lines

    skipped = SkippedLines()
    counts = count_words(text_lines(paths, skipped), lowercase=_DO_LOWER_CASE.value)
    logging.info("%d distinct words in %d files", len(counts), len(paths))
    if skipped.count:
        logging.info(skipped.message())
        print(skipped.message())
    left_out = left_out_characters(counts, _MAX_UNIQUE_CHARACTERS.value)
    if left_out:
        message = left_out_message(left_out, _MAX_UNIQUE_CHARACTERS.value)
        logging.info(message)
        print(message)
    too_long = long_words(counts)
    if too_long:
        message = long_words_message(too_long, MAX_LEARNED_WORD_LENGTH)
        logging.info(message)
        print(message)
    try:
        vocabulary = learn_vocabulary(counts, _VOCAB_SIZE.value, _MAX_UNIQUE_CHARACTERS.value)
    except ValueError as error:
        raise app.UsageError(
            f"{error} (--vocab_size={_VOCAB_SIZE.value}, --input_file={_INPUT_FILE.value})"
        ) from error
    try:
        write_text(_OUTPUT_FILE.value, "".join(token + "\n" for token in vocabulary))
    except OSError as error:  # a full disk, say: the file is left as it was
        sys.exit(f"build_vocab: --output_file: {_OUTPUT_FILE.value} cannot be written: {error}.")
    print(f"wrote {len(vocabulary)} tokens to {_OUTPUT_FILE.value}")


if __name__ == "__main__":
    freeze_heap_at_exit()
    flags.mark_flags_as_required(["input_file", "output_file"])
    run_program(main)
