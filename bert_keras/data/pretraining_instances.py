"""BERT's pretraining instances: documents -> sentence pairs -> masked tokens.

The algorithm of google-research/bert `create_pretraining_data.py`, on token
id arrays instead of lists of strings: a document is cut into chunks of
sentences up to a target length, segment A is a random prefix of the chunk,
segment B its continuation or (half the time, always for a one-sentence chunk)
a span of another document, the pair is truncated to fit, and some tokens are
masked. Pairs are kept as spans into one flat token array, so truncation,
assembly and masking are numpy operations on all the instances of a pass at
once; only the chunking loop, which makes the original's random draws one by
one, is Python.

Departures from the original, and why:

* The random next segment comes from another document of the same shard (a
  bounded window of about `input_mb_per_shard` of text) rather than the whole
  corpus, and instances are shuffled within the shard rather than globally:
  memory stays bounded by the work in flight. It is never the document itself
  (the original falls back to it after ten unlucky draws) unless the shard
  holds a single document.
* Whole-word masking decides [MASK] / random / unchanged once per word (the
  original decides per piece, so a word could come out half masked), and a
  "##" piece right after [SEP] starts a word (the original glues it to the
  last word of segment A).
* Truncation draws how many of a segment's removed tokens come off the front
  as one binomial draw; the distribution is the original's, the random stream
  is not (no run of this code reproduces the original's bytes anyway).
* The random generators are numpy's and Python's, seeded from
  (random_seed, shard index, pass), so every shard is the same whatever the
  number of worker processes.

This module needs only numpy, so that the worker processes that run it
(`pretraining_worker`) hold no TensorFlow; `example_encoding` turns its
`Instances` into `tf.train.Example` bytes.
"""

import bisect
import dataclasses
import random

import numpy as np

# Ids written by the original for padding, whatever the vocabulary says.
PADDING_ID = 0


def token_id_dtype(vocabulary_size):
    """The smallest dtype that holds every id of the vocabulary.

    A shard's instances are mostly token ids: uint16 halves them for the
    vocabularies of all released BERT checkpoints (30,522 to 119,547 ids:
    the largest need int32).

    Example:
    >>> token_id_dtype(30522), token_id_dtype(119547)
    (dtype('uint16'), dtype('int32'))
    """
    return np.dtype(np.uint16 if vocabulary_size <= 1 << 16 else np.int32)


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How documents become masked sentence pairs (the original's flags).

    Example:
    >>> InstanceOptions(max_seq_length=64).max_num_tokens
    61
    >>> InstanceOptions(masked_lm_prob=1.5).validate()
    Traceback (most recent call last):
    ...
    ValueError: --masked_lm_prob is 1.5 but must be in [0, 1].
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    dupe_factor: int = 10
    random_seed: int = 12345

    @property
    def max_num_tokens(self):
        """Tokens of A and B together: [CLS] A [SEP] B [SEP] fills the rest."""
        return self.max_seq_length - 3

    def validate(self):
        """Raises ValueError naming the first flag that is out of range."""
        if self.max_seq_length < 5:
            raise ValueError(
                f"--max_seq_length is {self.max_seq_length} but must be at least "
                "5: [CLS] A [SEP] B [SEP] needs a token in each of A and B."
            )
        if not 0 <= self.masked_lm_prob <= 1:
            raise ValueError(f"--masked_lm_prob is {self.masked_lm_prob} but must be in [0, 1].")
        if not 0 <= self.short_seq_prob <= 1:
            raise ValueError(f"--short_seq_prob is {self.short_seq_prob} but must be in [0, 1].")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"--max_predictions_per_seq is {self.max_predictions_per_seq} "
                "but must be at least 1."
            )
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor is {self.dupe_factor} but must be at least 1.")
        if self.random_seed < 0:
            raise ValueError(f"--random_seed is {self.random_seed} but must be >= 0.")


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """The ids the algorithm needs from the vocabulary.

    `is_continuation[id]` is True for "##" pieces (whole-word masking only).

    Example:
    >>> SpecialTokens(cls_id=2, sep_id=3, mask_id=4, vocabulary_size=10).sep_id
    3
    """

    cls_id: int
    sep_id: int
    mask_id: int
    vocabulary_size: int
    is_continuation: np.ndarray = None


@dataclasses.dataclass
class Documents:
    """Tokenized documents as flat arrays.

    Args:
        tokens: [num_tokens] int32, every sentence of every document.
        sentence_starts: [num_sentences + 1], where each sentence starts in
            `tokens` (the last entry is `len(tokens)`).
        document_starts: [num_documents + 1], where each document starts in
            sentences.

    Example:
    >>> documents = Documents.from_lists([[[5, 6], [7]], [[8, 9, 10]]])
    >>> documents.num_documents, documents.sentence_starts.tolist()
    (2, [0, 2, 3, 6])
    """

    tokens: np.ndarray
    sentence_starts: np.ndarray
    document_starts: np.ndarray

    @classmethod
    def from_lists(cls, documents):
        """Builds from documents given as lists of sentences of token ids."""
        sentences = [sentence for document in documents for sentence in document]
        lengths = [len(sentence) for sentence in sentences]
        return cls(
            tokens=np.array([t for s in sentences for t in s], np.int32),
            sentence_starts=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            document_starts=np.concatenate(
                [[0], np.cumsum([len(document) for document in documents])]
            ).astype(np.int64),
        )

    @property
    def num_documents(self):
        return len(self.document_starts) - 1


@dataclasses.dataclass
class Instances:
    """Masked sentence pairs as padded arrays, one row per instance.

    Arrays: `input_ids` (`token_id_dtype`) [n, max_seq_length];
    `masked_lm_positions` (int32) and `masked_lm_ids` (`token_id_dtype`)
    [n, max_predictions_per_seq]; `next_sentence_labels` [n] (1 = B is a
    random span). `input_mask`, `segment_ids` and `masked_lm_weights` are
    computed when read, from each row's `lengths` (with [CLS] and both
    [SEP]), `b_starts` (B's first position) and `num_masked`: a shard's
    instances are held in memory at once, and these would double them.
    `masking_counts` counts the replacements drawn: [MASK], random token,
    unchanged.

    Example:
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10, 11]]] * 2)
    >>> tokens = SpecialTokens(cls_id=2, sep_id=3, mask_id=4, vocabulary_size=12)
    >>> instances = create_instances(documents, tokens, InstanceOptions(
    ...     max_seq_length=8, max_predictions_per_seq=2), shard_index=0)
    >>> instances.input_ids.shape[1], len(instances) > 0
    (8, True)
    """

    input_ids: np.ndarray
    lengths: np.ndarray
    b_starts: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    num_masked: np.ndarray
    next_sentence_labels: np.ndarray
    masking_counts: np.ndarray

    def __len__(self):
        return len(self.input_ids)

    @property
    def input_mask(self):
        """[n, max_seq_length] uint8: 1 on tokens, 0 on padding."""
        position = np.arange(self.input_ids.shape[1])
        return (position < self.lengths[:, np.newaxis]).astype(np.uint8)

    @property
    def segment_ids(self):
        """[n, max_seq_length] uint8: 1 on B and its [SEP], else 0."""
        position = np.arange(self.input_ids.shape[1])
        in_b = (position >= self.b_starts[:, np.newaxis]) & (position < self.lengths[:, np.newaxis])
        return in_b.astype(np.uint8)

    @property
    def masked_lm_weights(self):
        """[n, max_predictions_per_seq] float32: 1 on real predictions."""
        slot = np.arange(self.masked_lm_positions.shape[1])
        return (slot < self.num_masked[:, np.newaxis]).astype(np.float32)

    def take(self, rows):
        """The instances at `rows`, in that order."""
        fields = {
            field.name: getattr(self, field.name)[rows]
            for field in dataclasses.fields(self)
            if field.name != "masking_counts"
        }
        return Instances(masking_counts=self.masking_counts, **fields)

    def statistics(self):
        """Counts for the run's summary (all plain ints).

        Example:
        >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
        >>> tokens = SpecialTokens(2, 3, 4, 12)
        >>> stats = create_instances(documents, tokens, InstanceOptions(
        ...     max_seq_length=8), shard_index=0).statistics()
        >>> sorted(stats)  # doctest: +NORMALIZE_WHITESPACE
        ['examples', 'kept_tokens', 'mask_tokens', 'maskable_tokens',
         'masked_tokens', 'random_next', 'random_tokens', 'tokens']
        """
        mask, random_token, kept = (int(count) for count in self.masking_counts)
        tokens = int(self.lengths.sum())
        return {
            "examples": len(self),
            "tokens": tokens,
            "maskable_tokens": tokens - 3 * len(self),
            "masked_tokens": int(self.num_masked.sum()),
            "mask_tokens": mask,
            "random_tokens": random_token,
            "kept_tokens": kept,
            "random_next": int(self.next_sentence_labels.sum()),
        }


def _pass_generators(random_seed, shard_index, pass_index):
    """A Python and a numpy generator for one pass over one shard."""
    seed = np.random.SeedSequence(random_seed, spawn_key=(shard_index, pass_index))
    python_seed = int.from_bytes(seed.generate_state(4).tobytes(), "little")
    return random.Random(python_seed), np.random.default_rng(seed)


def _sentence_pairs(sentence_starts, document_starts, options, rng):
    """[pairs, 5] (a_start, a_end, b_start, b_end, is_random_next) token spans.

    The original's `create_instances_from_document`, for every document, on
    sentence offsets (Python lists: they index faster than numpy arrays). A
    chunk ends at the first sentence that brings it to the target length,
    found by bisection. `below(n)` is `random.randrange(n)` and makes the same
    draws, without its argument checks, which cost more than the draw.
    """
    starts, random_float, getrandbits = sentence_starts, rng.random, rng.getrandbits

    def below(n):
        bits = n.bit_length()
        value = getrandbits(bits)
        while value >= n:
            value = getrandbits(bits)
        return value

    max_num_tokens, short_seq_prob = options.max_num_tokens, options.short_seq_prob
    num_documents = len(document_starts) - 1
    pairs = []
    for document_index in range(num_documents):
        first, last = document_starts[document_index], document_starts[document_index + 1]
        target_length = max_num_tokens
        if random_float() < short_seq_prob:
            target_length = 2 + below(max_num_tokens - 1)
        chunk_first = first
        while chunk_first < last:
            chunk_start = starts[chunk_first]
            chunk_end = bisect.bisect_left(
                starts, chunk_start + target_length, chunk_first + 1, last
            )
            chunk_sentences = chunk_end - chunk_first
            a_end = chunk_first + 1
            if chunk_sentences >= 2:
                a_end += below(chunk_sentences - 1)
            a_stop = starts[a_end]
            if chunk_sentences == 1 or random_float() < 0.5:
                # B: sentences of another document, from a random one on.
                other = document_index
                if num_documents > 1:
                    other = below(num_documents - 1)
                    other += other >= document_index
                other_first, other_last = document_starts[other], document_starts[other + 1]
                sentence = other_first + below(other_last - other_first)
                b_start = starts[sentence]
                b_length = target_length - (a_stop - chunk_start)
                b_end = bisect.bisect_left(starts, b_start + b_length, sentence + 1, other_last)
                pairs.append((chunk_start, a_stop, b_start, starts[b_end], 1))
                # The chunk's unused sentences go back for the next chunk.
                chunk_first = a_end
            else:
                pairs.append((chunk_start, a_stop, a_stop, starts[chunk_end], 0))
                chunk_first = chunk_end
    return np.array(pairs, np.int64).reshape(-1, 5)


def truncated_lengths(a_lengths, b_lengths, max_num_tokens):
    """Lengths after the original's `truncate_seq_pair`, without the loop.

    The loop drops a token from the longer segment (B on a tie) until the
    pair fits; its end state has a closed form.

    Example:
    >>> truncated_lengths(np.array([10, 2, 9]), np.array([3, 10, 9]), 8)
    (array([5, 2, 4]), array([3, 6, 4]))
    """
    too_long = a_lengths + b_lengths > max_num_tokens
    half_up = (max_num_tokens + 1) // 2
    a_kept = np.minimum(a_lengths, np.maximum(half_up, max_num_tokens - b_lengths))
    a_final = np.where(too_long, a_kept, a_lengths)
    b_final = np.where(too_long, np.minimum(b_lengths, max_num_tokens - a_final), b_lengths)
    return a_final, b_final


def _assemble(documents, spans, special_tokens, options, np_rng):
    """Token ids [n, max_seq_length], lengths and B's starts [n] of truncated pairs.

    Also gives which positions hold text (not [CLS], [SEP] or padding).
    """
    a_start, a_end, b_start, b_end = (spans[:, column] for column in range(4))
    a_length, b_length = truncated_lengths(a_end - a_start, b_end - b_start, options.max_num_tokens)
    # Each removed token came off the front or the back with probability 1/2.
    a_start = a_start + np_rng.binomial(a_end - a_start - a_length, 0.5)
    b_start = b_start + np_rng.binomial(b_end - b_start - b_length, 0.5)

    # int32 from here on: a shard's token offsets fit, and the [n, seq]
    # arrays below are half the size.
    position = np.arange(options.max_seq_length, dtype=np.int32)  # [seq]
    a_length, b_length, a_start, b_start = (
        values.astype(np.int32)[:, np.newaxis] for values in (a_length, b_length, a_start, b_start)
    )
    b_first = a_length + 2  # [n, 1], position of B's first token
    length = b_first + b_length + 1  # [n, 1], with [CLS] and both [SEP]
    in_b_part = position >= b_first  # [n, seq]: B, its [SEP] and the padding
    source = np.where(in_b_part, b_start - b_first, a_start - 1) + position  # [n, seq]
    is_text = (position != 0) & (position != b_first - 1) & (position < length - 1)
    source[~is_text] = 0
    input_ids = documents.tokens[source]  # [n, seq]
    input_ids[~is_text] = PADDING_ID
    input_ids[:, 0] = special_tokens.cls_id
    rows = np.arange(len(spans))
    input_ids[rows, a_length[:, 0] + 1] = special_tokens.sep_id
    input_ids[rows, length[:, 0] - 1] = special_tokens.sep_id
    return input_ids.astype(np.int32, copy=False), length[:, 0], b_first[:, 0], is_text


def num_predictions(lengths, options):
    """The original's count: min(max_predictions, max(1, round(len * prob))).

    `lengths` count [CLS] and [SEP], as the original's `len(tokens)` does.

    Example:
    >>> num_predictions(np.array([5, 40, 128]), InstanceOptions())
    array([ 1,  6, 19])
    """
    wanted = np.round(lengths * options.masked_lm_prob).astype(np.int64)
    return np.minimum(options.max_predictions_per_seq, np.maximum(1, wanted))


def _choose_replacements(input_ids, rows, positions, special_tokens, np_rng, counts):
    """80% [MASK], 10% random token, 10% unchanged, drawn per position."""
    draw = np_rng.random(len(rows))
    random_ids = np_rng.integers(0, special_tokens.vocabulary_size, len(rows))
    replacement = np.where(
        draw < 0.8,
        special_tokens.mask_id,
        np.where(draw < 0.9, input_ids[rows, positions], random_ids),
    )
    counts += [(draw < 0.8).sum(), (draw >= 0.9).sum(), ((draw >= 0.8) & (draw < 0.9)).sum()]
    return replacement


def _mask_tokens(input_ids, candidates, options, special_tokens, np_rng):
    """Token-level masking of all rows at once; returns sorted positions.

    A random key per candidate position; the positions with the smallest
    keys, as many as `num_predictions`, are a uniform random choice. They are
    the keys up to each row's `wanted`-th smallest, found by partitioning only
    values (cheaper than argpartition), and come out in position order.
    """
    num_rows, _ = input_ids.shape
    lengths = candidates.sum(axis=1) + 3
    wanted = np.minimum(num_predictions(lengths, options), lengths - 3)  # [n], >= 1
    keys = np_rng.random(candidates.shape)  # [n, seq]
    keys[~candidates] = 2.0
    predictions = min(options.max_predictions_per_seq, keys.shape[1])
    smallest = np.sort(np.partition(keys, predictions - 1, axis=1)[:, :predictions], axis=1)
    threshold = smallest[np.arange(num_rows), wanted - 1]  # [n], a candidate's key
    is_chosen = keys <= threshold[:, np.newaxis]  # [n, seq]
    if is_chosen.sum() != wanted.sum():  # equal keys (about once in 10**12 rows)
        is_chosen &= np.cumsum(is_chosen, axis=1) <= wanted[:, np.newaxis]
    rows, flat_positions = np.nonzero(is_chosen)  # row by row, positions increasing
    slot = np.arange(options.max_predictions_per_seq)[np.newaxis, :]
    chosen = slot < wanted[:, np.newaxis]  # [n, max_predictions]
    positions = np.zeros(chosen.shape, np.int32)
    positions[chosen] = flat_positions
    labels = np.zeros_like(positions)
    labels[chosen] = input_ids[rows, flat_positions]
    counts = np.zeros(3, np.int64)
    input_ids[rows, flat_positions] = _choose_replacements(
        input_ids, rows, flat_positions, special_tokens, np_rng, counts
    )
    return positions, labels, chosen, counts


def _mask_whole_words(input_ids, candidates, options, special_tokens, np_rng):
    """Whole-word masking of all rows at once: the word decides 80/10/10.

    As in the original, words are visited in a random order and taken while
    they fit in `num_predictions` (a word that does not fit is skipped). The
    loop runs over the visiting order, each step deciding one word of every
    row, so it takes as many steps as a row has words at most.
    """
    num_rows, seq_length = input_ids.shape
    wanted = num_predictions(candidates.sum(axis=1) + 3, options)  # [n]
    position = np.arange(seq_length)
    # A word starts at a non-"##" piece or right after [CLS] / [SEP].
    follows_candidate = np.pad(candidates[:, :-1], ((0, 0), (1, 0)))
    starts_word = candidates & (~special_tokens.is_continuation[input_ids] | ~follows_candidate)
    # [n, seq]: where the word of each piece starts.
    word_start = np.maximum.accumulate(np.where(starts_word, position, 0), axis=1)
    word_lengths = np.zeros((num_rows, seq_length), np.int64)  # at each word's start
    rows, piece_positions = np.nonzero(candidates)
    np.add.at(word_lengths, (rows, word_start[rows, piece_positions]), 1)
    # Word starts in a random order; positions that start no word go last.
    visiting_order = np.argsort(
        np.where(starts_word, np_rng.random(starts_word.shape), 2.0), axis=1
    )
    lengths_in_order = np.take_along_axis(word_lengths, visiting_order, axis=1)  # [n, seq]
    taken = np.zeros(num_rows, np.int64)
    is_taken = np.zeros((num_rows, seq_length), bool)  # in visiting order
    for step in range(int(starts_word.sum(axis=1).max())):
        length = lengths_in_order[:, step]
        fits = (length > 0) & (taken + length <= wanted)
        is_taken[:, step] = fits
        taken += np.where(fits, length, 0)
    chosen_start = np.zeros((num_rows, seq_length), bool)
    np.put_along_axis(chosen_start, visiting_order, is_taken, axis=1)
    is_chosen = candidates & np.take_along_axis(chosen_start, word_start, axis=1)  # [n, seq]
    # One draw per word (read at its start), random ids per piece.
    word_draw = np.take_along_axis(np_rng.random((num_rows, seq_length)), word_start, axis=1)
    random_ids = np_rng.integers(0, special_tokens.vocabulary_size, (num_rows, seq_length))
    rows, flat_positions = np.nonzero(is_chosen)  # row by row, positions increasing
    draw = word_draw[rows, flat_positions]
    labels_flat = input_ids[rows, flat_positions]
    input_ids[rows, flat_positions] = np.where(
        draw < 0.8,
        special_tokens.mask_id,
        np.where(draw < 0.9, labels_flat, random_ids[rows, flat_positions]),
    )
    counts = np.array(
        [(draw < 0.8).sum(), (draw >= 0.9).sum(), ((draw >= 0.8) & (draw < 0.9)).sum()]
    )
    slot = np.arange(options.max_predictions_per_seq)[np.newaxis, :]
    chosen = slot < is_chosen.sum(axis=1)[:, np.newaxis]  # [n, max_predictions]
    positions = np.zeros(chosen.shape, np.int32)
    positions[chosen] = flat_positions
    labels = np.zeros(chosen.shape, np.int32)
    labels[chosen] = labels_flat
    return positions, labels, chosen, counts


def _instances_of_pass(documents, special_tokens, options, shard_index, pass_index):
    """One pass of the original's loop over the documents of a shard."""
    py_rng, np_rng = _pass_generators(options.random_seed, shard_index, pass_index)
    spans = _sentence_pairs(
        documents.sentence_starts.tolist(), documents.document_starts.tolist(), options, py_rng
    )
    input_ids, lengths, b_starts, candidates = _assemble(
        documents, spans, special_tokens, options, np_rng
    )
    mask = _mask_whole_words if options.do_whole_word_mask else _mask_tokens
    positions, labels, chosen, counts = mask(input_ids, candidates, options, special_tokens, np_rng)
    id_dtype = token_id_dtype(special_tokens.vocabulary_size)
    return Instances(
        input_ids=input_ids.astype(id_dtype),
        lengths=lengths,
        b_starts=b_starts,
        masked_lm_positions=positions,
        masked_lm_ids=labels.astype(id_dtype),
        num_masked=chosen.sum(axis=1, dtype=np.int32),
        next_sentence_labels=spans[:, 4],
        masking_counts=counts,
    )


def create_instances(documents, special_tokens, options, shard_index):
    """All `dupe_factor` passes over a shard's documents, shuffled together.

    Args:
        documents: a `Documents` (empty sentences and documents removed).
        special_tokens: a `SpecialTokens`.
        options: an `InstanceOptions`.
        shard_index: the shard's number; with `options.random_seed` it seeds
            every random choice, so a shard never depends on which process
            made it.

    Returns:
        An `Instances`.

    Example:
    >>> documents = Documents.from_lists([[[5, 6, 7], [8, 9]], [[10, 11]]])
    >>> tokens = SpecialTokens(cls_id=2, sep_id=3, mask_id=4, vocabulary_size=12)
    >>> options = InstanceOptions(max_seq_length=10, dupe_factor=2)
    >>> instances = create_instances(documents, tokens, options, shard_index=0)
    >>> bool((instances.input_ids[:, 0] == 2).all())
    True
    """
    passes = [
        _instances_of_pass(documents, special_tokens, options, shard_index, pass_index)
        for pass_index in range(options.dupe_factor)
    ]
    shuffle_rng = np.random.default_rng(
        np.random.SeedSequence(options.random_seed, spawn_key=(shard_index,))
    )
    num_instances = sum(len(instances) for instances in passes)
    order = shuffle_rng.permutation(num_instances)
    # Row k of the result is row order[k] of the passes one after the other,
    # so row j of the passes goes to row destination[j]. Each pass's rows go
    # straight there, a field at a time, and each pass's array is let go once
    # placed: the shard's instances are held once, not twice.
    destination = np.empty(num_instances, np.int64)
    destination[order] = np.arange(num_instances)
    masking_counts = sum(instances.masking_counts for instances in passes)
    columns = {}
    for field in dataclasses.fields(Instances):
        if field.name == "masking_counts":
            continue
        first = getattr(passes[0], field.name)
        column = np.empty((num_instances, *first.shape[1:]), first.dtype)
        start = 0
        for instances in passes:
            values = getattr(instances, field.name)
            column[destination[start : start + len(values)]] = values
            start += len(values)
            setattr(instances, field.name, None)
        columns[field.name] = column
    return Instances(masking_counts=masking_counts, **columns)
