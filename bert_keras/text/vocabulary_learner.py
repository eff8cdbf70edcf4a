"""Learning a WordPiece vocabulary from text, with BERT's special-token layout.

Words are split exactly as `BertTokenizer` splits them (so the vocabulary
fits the tokenizer that will use it), counted, and handed to
tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib`).
tensorflow-text's own `bert_vocab_from_dataset` would split words with its
`BertTokenizer`, which case-folds with NFKC unlike the original BERT.
"""

import collections
import dataclasses

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer

# The released BERT vocabularies: [PAD]=0, [unused0..98], [UNK]=100,
# [CLS]=101, [SEP]=102, [MASK]=103, [unused99..993], then learned pieces.
STANDARD_VOCABULARY_SIZE = 30522
_FIRST_LEARNED_ID = 999
# tensorflow-text's learner ignores longer words (its cost grows with the square
# of a word's length): `learnable_words` gives it their characters instead.
MAX_LEARNED_WORD_LENGTH = 50


def reserved_tokens(vocabulary_size):
    """The special tokens at the head of a vocabulary of `vocabulary_size`.

    The standard 30,522 layout puts [UNK], [CLS], [SEP], [MASK] at ids
    100–103 among [unusedN] placeholders; any other size puts the five
    special tokens first.

    Example:
    >>> tokens = reserved_tokens(30522)
    >>> tokens.index("[PAD]"), tokens.index("[UNK]"), tokens.index("[MASK]"), len(tokens)
    (0, 100, 103, 999)
    >>> reserved_tokens(8000)
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    """
    if vocabulary_size != STANDARD_VOCABULARY_SIZE:
        return list(SPECIAL_TOKENS)
    unused = [f"[unused{index}]" for index in range(_FIRST_LEARNED_ID - 5)]
    return ["[PAD]", *unused[:99], "[UNK]", "[CLS]", "[SEP]", "[MASK]", *unused[99:]]


@dataclasses.dataclass
class SkippedLines:
    """The lines `text_lines` skipped as not valid UTF-8: how many, and where the first is."""

    count: int = 0
    first: str = ""

    def message(self):
        """What to tell the user, as tools.create_pretraining_data does; "" when none.

        Example:
        >>> SkippedLines(2, "corpus.txt:7").message()
        'Skipped 2 lines that are not valid UTF-8 (the first at corpus.txt:7).'
        """
        if not self.count:
            return ""
        return f"Skipped {self.count} lines that are not valid UTF-8 (the first at {self.first})."


def text_lines(paths, skipped):
    """Yields the lines of the files at `paths`, skipping those that are not valid UTF-8.

    A line with bytes that are not UTF-8 (a Latin-1 "café") is skipped and
    counted in `skipped`, not learned with its letters replaced or dropped.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "wb").write(b"caf\\xc3\\xa9\\ncaf\\xe9\\nok\\n")
    >>> skipped = SkippedLines()
    >>> list(text_lines([path], skipped)), skipped.count, skipped.first.endswith(":2")
    (['café\\n', 'ok\\n'], 1, True)
    """
    for path in paths:
        with open(path, "rb") as file:
            for line_number, line in enumerate(file, 1):
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError:
                    skipped.count += 1
                    skipped.first = skipped.first or f"{path}:{line_number}"


def count_words(lines, lowercase=True, batch_size=4096):
    """Counts the words `BertTokenizer(lowercase=...)` would see in `lines`.

    Args:
        lines: an iterable of strings.
        lowercase: uncased (lower-case, strip accents) or cased splitting.
        batch_size: lines normalized per in-graph call.

    Example:
    >>> sorted(count_words(["Ab ab.", "AB"]).items())
    [('.', 1), ('ab', 3)]
    """
    splitter = BertTokenizer(list(SPECIAL_TOKENS), lowercase=lowercase)
    counts = collections.Counter()
    batch = []
    for line in lines:
        batch.append(line)
        if len(batch) == batch_size:
            _count_batch(splitter, batch, counts)
            batch = []
    if batch:
        _count_batch(splitter, batch, counts)
    return counts


def _count_batch(splitter, batch, counts):
    words = splitter.split_words(tf.constant(batch)).flat_values.numpy()
    counts.update(word.decode("utf-8") for word in words)


def learn_vocabulary(word_counts, vocabulary_size, max_unique_characters=1000):
    """A WordPiece vocabulary of at most `vocabulary_size` tokens, specials first.

    Args:
        word_counts: dict word → count, e.g. from `count_words`.
        vocabulary_size: the largest vocabulary wanted (30,522 gives the
            standard layout, see `reserved_tokens`).
        max_unique_characters: the learner's alphabet size limit: words with
            a rarer character are left out (`left_out_characters` says which).

    Raises:
        ValueError: `word_counts` is empty or the size leaves no room.

    Example:
    >>> vocabulary = learn_vocabulary({"low": 5, "lower": 3, "newest": 6}, 40)
    >>> vocabulary[:5], "low" in vocabulary
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    """
    reserved = reserved_tokens(vocabulary_size)
    if not word_counts:
        raise ValueError("No words to learn a vocabulary from: the input text is empty.")
    if vocabulary_size <= len(reserved):
        raise ValueError(
            f"vocabulary_size {vocabulary_size} leaves no room after the "
            f"{len(reserved)} reserved tokens."
        )
    learned = wordpiece_tokenizer_learner_lib.learn(
        learnable_words(word_counts),
        vocab_size=vocabulary_size,
        reserved_tokens=reserved,
        lower_thresh=1,
        max_token_length=MAX_LEARNED_WORD_LENGTH,
        max_unique_chars=max_unique_characters,
    )
    vocabulary = reserved + [token for token in learned if token not in set(reserved)]
    return _without_the_rarest_subwords(vocabulary, vocabulary_size)


def left_out_characters(word_counts, max_unique_characters=1000):
    """The characters past the `max_unique_characters` most frequent, each with its occurrences.

    `learn_vocabulary` leaves them out of its vocabulary, and the words
    that hold them out of the learning, so they tokenize to [UNK].

    Example:
    >>> left_out_characters({"aab": 2, "c": 1}, max_unique_characters=2)
    Counter({'c': 1})
    """
    words = wordpiece_tokenizer_learner_lib.get_input_words(
        learnable_words(word_counts).items(), [], MAX_LEARNED_WORD_LENGTH
    )
    kept = wordpiece_tokenizer_learner_lib.get_allowed_chars(words, max_unique_characters)
    left_out = collections.Counter()
    for word, count in words:
        for character in word:
            if character not in kept:
                left_out[character] += count
    return left_out


def learnable_words(word_counts):
    """`word_counts` as the learner takes them: a word too long to learn from gives its characters.

    So every character of the text stays in the vocabulary (up to
    `max_unique_characters`), and a long word is spelled out one piece per
    character; the original tokenizer makes [UNK] of a word only past 200
    characters.

    Example:
    >>> learnable_words({"ab": 2, "x" * 51: 1, "xy" * 30: 1})
    Counter({'x': 81, 'y': 30, 'ab': 2})
    """
    learnable = collections.Counter()
    for word, count in word_counts.items():
        if len(word) <= MAX_LEARNED_WORD_LENGTH:
            learnable[word] += count
        else:
            for character in word:
                learnable[character] += count
    return learnable


def long_words(word_counts):
    """The words of `word_counts` over `MAX_LEARNED_WORD_LENGTH` characters, with their counts.

    Example:
    >>> {len(word): count for word, count in long_words({"ab": 2, "x" * 51: 3}).items()}
    {51: 3}
    """
    return {
        word: count for word, count in word_counts.items() if len(word) > MAX_LEARNED_WORD_LENGTH
    }


def _without_the_rarest_subwords(vocabulary, vocabulary_size):
    """The learner's `vocabulary` cut to `vocabulary_size`, a size it may overshoot.

    Every single character stays, its "##" form too, so every word can still
    be spelled; the cut drops the rarest longer subwords. The learner lists
    the plain characters first but sorts the "##" ones by count among the
    subwords, so a plain cut at the size would drop rare "##x".
    """
    reserved = reserved_tokens(vocabulary_size)
    learned = vocabulary[len(reserved) :]
    characters = [token for token in learned if _is_character(token)]
    room = vocabulary_size - len(reserved) - len(characters)
    if room < 0:
        raise ValueError(
            f"vocabulary_size {vocabulary_size} leaves no room for the text's {len(characters)} "
            "single characters after the reserved tokens: give a larger one."
        )
    kept_subwords = set([token for token in learned if not _is_character(token)][:room])
    return reserved + [token for token in learned if _is_character(token) or token in kept_subwords]


def _is_character(token):
    """Whether a learned token is one character, as "x" or as "##x"."""
    return len(token.removeprefix("##")) == 1
