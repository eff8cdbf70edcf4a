"""Words → word-piece windows for token tagging, and window logits → one tag per word.

As in the paper's CoNLL setup (Devlin et al. §5.3), each word is tagged on its
first word piece; its other pieces, [CLS], [SEP] and padding carry
`IGNORED_LABEL`. A sentence whose pieces do not fit in one sequence is never
truncated: it becomes overlapping windows, each starting about half a window
after the previous one, and every word takes its prediction from the window
where it has the most context on its shorter side (the rule the original
run_squad.py uses for document spans). So every word gets a prediction.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from bert_keras.models.bert_token_classifier import IGNORED_LABEL

_TOKENIZE_BATCH = 4096  # words per tokenizer call


def tokenize_words(tokenizer, sentences):
    """The word-piece ids of every word, word by word.

    A word the tokenizer turns into nothing (e.g. only control characters)
    becomes [UNK], so every word has a first piece to carry its tag.

    Args:
        tokenizer: a `BertTokenizer`.
        sentences: a list of word lists.

    Returns:
        A list (sentences) of lists (words) of lists of int piece ids.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "##s"])
    >>> tokenize_words(tokenizer, [["EUs", "EU"], ["\\x00"]])
    [[[5, 6], [5]], [[1]]]
    """
    words = [word for sentence in sentences for word in sentence]
    pieces = []
    for start in range(0, len(words), _TOKENIZE_BATCH):
        batch = tf.constant(words[start : start + _TOKENIZE_BATCH], tf.string)
        pieces += tokenizer.tokenize(batch).to_list()
    pieces = [word_pieces or [tokenizer.unk_token_id] for word_pieces in pieces]
    result, start = [], 0
    for sentence in sentences:
        result.append(pieces[start : start + len(sentence)])
        start += len(sentence)
    return result


def window_bounds(piece_counts, budget):
    """The windows `(first_word, end_word)` covering a sentence, and each word's window.

    Args:
        piece_counts: word pieces of each word (a word with more than
            `budget` counts as `budget`: only its first piece matters).
        budget: pieces a window holds.

    Returns:
        `(windows, owners)`: the windows in order, and for each word the index
        of the window that predicts it (most context on its shorter side;
        the first such window on a tie).

    Example:
    >>> window_bounds([1, 1, 1, 1, 1, 1], 4)
    ([(0, 4), (2, 6)], [0, 0, 0, 1, 1, 1])
    """
    counts = [min(count, budget) for count in piece_counts]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(int)  # pieces before each word
    windows, start = [], 0
    while True:
        end = start
        while end < len(counts) and offsets[end + 1] - offsets[start] <= budget:
            end += 1
        windows.append((start, end))
        if end == len(counts):
            break
        # Half a window further on, but early enough that word `end` fits.
        halfway = int(np.searchsorted(offsets, (offsets[start] + offsets[end]) / 2))
        fitting = int(np.searchsorted(offsets, offsets[end + 1] - budget))
        start = max(halfway, fitting, start + 1)
    return windows, _owners(windows, offsets.tolist())


def _owners(windows, offsets):
    """Each word's window: of the few that hold it, the first with the most context.

    Windows start and end in order, so a word's windows follow one another
    from the first that ends after it: time linear in the words.
    """
    owners, first_holding = [], 0
    for word in range(len(offsets) - 1):
        while windows[first_holding][1] <= word:
            first_holding += 1
        owner, most_context = first_holding, -1
        for index in range(first_holding, len(windows)):
            first, end = windows[index]
            if first > word:
                break
            context = min(offsets[word] - offsets[first], offsets[end] - offsets[word + 1])
            if context > most_context:
                owner, most_context = index, context
        owners.append(owner)
    return owners


@dataclasses.dataclass
class WordWindows:
    """Packed windows of tagged sentences and where their words' tags are.

    Attributes:
        features: dict of int32 `[windows, max_seq_length]` arrays
            `token_ids`, `segment_ids`, `padding_mask`.
        labels: int32 `[windows, max_seq_length]`: a word's label on its
            first piece (every word the window holds), `IGNORED_LABEL`
            elsewhere.
        sentence_lengths: words of each sentence.
        owned: for each sentence, a list `(window, position)` per word: the
            window and the sequence position whose logits tag the word.
    """

    features: dict
    labels: np.ndarray
    sentence_lengths: list
    owned: list

    def __len__(self):
        return len(self.labels)

    def word_predictions(self, logits):
        """Per-word class ids, sentence by sentence, from the windows' logits.

        Args:
            logits: `[windows, max_seq_length, num_classes]`.

        Returns:
            A list (sentences) of lists of int class ids.
        """
        best = np.argmax(np.asarray(logits), axis=-1)  # [windows, seq]
        return [[int(best[window, position]) for window, position in words] for words in self.owned]


def word_windows(
    word_pieces, max_seq_length, cls_token_id, sep_token_id, pad_token_id=0, word_labels=None
):
    """Packs sentences of word pieces into `[CLS] pieces [SEP]` windows.

    Args:
        word_pieces: from `tokenize_words`.
        max_seq_length: tokens per window, [CLS] and [SEP] included.
        cls_token_id: id of [CLS].
        sep_token_id: id of [SEP].
        pad_token_id: id of [PAD].
        word_labels: a list (sentences) of lists of int labels per word, or
            None (all labels are then `IGNORED_LABEL`).

    Returns:
        `WordWindows`.

    Example:
    >>> windows = word_windows([[[7, 8], [9]]], 6, 2, 3, word_labels=[[1, 0]])
    >>> windows.features["token_ids"].tolist(), windows.labels.tolist()
    ([[2, 7, 8, 9, 3, 0]], [[-100, 1, -100, 0, -100, -100]])
    >>> windows.owned
    [[(0, 1), (0, 3)]]
    """
    if max_seq_length < 3:
        raise ValueError(
            f"max_seq_length must leave room for [CLS], a piece and [SEP], got {max_seq_length}."
        )
    budget = max_seq_length - 2
    token_rows, label_rows, owned = [], [], []
    for sentence_index, pieces in enumerate(word_pieces):
        labels = word_labels[sentence_index] if word_labels is not None else None
        bounds, owners = window_bounds([len(word) for word in pieces], budget)
        first_window = len(token_rows)
        first_positions = {}  # (window, word) -> position of the word's first piece
        for window_index, (first, end) in enumerate(bounds):
            tokens, window_labels = [cls_token_id], [IGNORED_LABEL]
            for word in range(first, end):
                first_positions[window_index, word] = len(tokens)
                word_pieces_kept = pieces[word][:budget]
                tokens += word_pieces_kept
                window_labels += [labels[word] if labels is not None else IGNORED_LABEL]
                window_labels += [IGNORED_LABEL] * (len(word_pieces_kept) - 1)
            tokens.append(sep_token_id)
            window_labels.append(IGNORED_LABEL)
            token_rows.append(tokens)
            label_rows.append(window_labels)
        owned.append(
            [
                (first_window + owner, first_positions[owner, word])
                for word, owner in enumerate(owners)
            ]
        )
    token_ids = np.full((len(token_rows), max_seq_length), pad_token_id, np.int32)
    labels = np.full((len(token_rows), max_seq_length), IGNORED_LABEL, np.int32)
    padding_mask = np.zeros((len(token_rows), max_seq_length), np.int32)
    for row, (tokens, window_labels) in enumerate(zip(token_rows, label_rows)):
        token_ids[row, : len(tokens)] = tokens
        labels[row, : len(tokens)] = window_labels
        padding_mask[row, : len(tokens)] = 1
    features = {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": padding_mask,
    }
    return WordWindows(features, labels, [len(pieces) for pieces in word_pieces], owned)
