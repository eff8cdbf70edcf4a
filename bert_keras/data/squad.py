"""SQuAD v1.1 / v2.0 files → examples → windowed features, as the original run_squad.py.

`read_squad` reads the JSON the SQuAD site distributes; `squad_features` turns
each question into one or more packed inputs `[CLS] question [SEP] window
[SEP]`, sliding a window of context tokens with the original's doc stride.
Unlike the original, which splits the context on whitespace and re-joins
tokens to find answer text, every token carries its character span in the
original context (the tokenizer's offsets, the ones `BertPreprocessor` packs),
so an answer is mapped to tokens, and tokens back to text, by character
positions alone.
"""

import dataclasses
import json
import re
import unicodedata

import numpy as np
from absl import logging

from bert_keras.data.delimited_text import not_utf8_error
from bert_keras.data.input_file_error import InputFileError

# Questions and contexts are tokenized this many at a time: bounded memory,
# few eager TensorFlow calls.
_TOKENIZE_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class SquadAnswer:
    """An answer's text and the character where it starts in the context.

    `start` is the file's answer_start, checked against the context for the
    answer a training question is trained on; for prediction only the text
    matters (None where the file gives no answer_start).
    """

    text: str
    start: int | None

    @property
    def end(self):
        """Character after the answer's last one."""
        return self.start + len(self.text)


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    Attributes:
        question_id: the "id" of the question in the file.
        question: question text.
        context: the paragraph's text, untouched.
        answers: tuple of `SquadAnswer`; empty for unanswerable (v2.0) or
            unlabelled questions. Training uses the first.
        is_impossible: v2.0's "is_impossible".
    """

    question_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False


def read_squad(path, version_2_with_negative=False, is_training=False):
    """Reads a SQuAD JSON file (`{"data": [{"paragraphs": [...]}]}`).

    As the original run_squad.py, a training question whose (first) answer
    is not in the words at its answer_start is skipped with a warning (one
    a few characters off, within its words, is kept); prediction reads
    only the answers' texts (what the official scoring scripts use), so
    there answer_start is neither needed nor checked.

    Args:
        path: the .json file.
        version_2_with_negative: read v2.0's "is_impossible".
        is_training: every answerable question must have an answer (the
            first is trained on, and must be at its answer_start).

    Returns:
        A list of `SquadExample`, in file order.

    Raises:
        InputFileError: a file without questions ("FILE holds no questions"),
            or a malformed entry, named by file and question id: missing
            fields, an id that is not a string, an is_impossible that is not
            true or false, an unanswerable question outside v2.0, a training
            question without an answer, a repeated id.

    Example:
    >>> import json, tempfile
    >>> path = tempfile.mkdtemp() + "/dev.json"
    >>> qa = {"id": "q1", "question": "Where?",
    ...       "answers": [{"text": "Paris", "answer_start": 3}]}
    >>> _ = open(path, "w").write(json.dumps({"data": [{"paragraphs": [
    ...     {"context": "In Paris.", "qas": [qa]}]}]}))
    >>> read_squad(path)[0].answers
    (SquadAnswer(text='Paris', start=3),)
    """
    with open(path, encoding="utf-8-sig") as file:  # an editor's byte-order mark is no JSON
        try:
            dataset = json.load(file)
        except json.JSONDecodeError as error:
            raise InputFileError(f"{path} is not valid JSON: {error}") from None
        except UnicodeDecodeError:
            raise not_utf8_error(path) from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise InputFileError(f'{path} has no "data" list; expected SQuAD JSON.')
    examples, seen_ids, skipped = [], set(), 0
    for article_index, article in enumerate(dataset["data"]):
        where = f"{path}, data[{article_index}]"
        article = _object(article, where, "an article")
        paragraphs = _list_field(article, "paragraphs", where, required=True)
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{path}, data[{article_index}].paragraphs[{paragraph_index}]"
            _object(paragraph, where, "a paragraph")
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise InputFileError(f'{where} has no "context" string.')
            _check_unicode(context, f"{where}: its context")
            for qa_index, qa in enumerate(_list_field(paragraph, "qas", where, required=True)):
                _object(qa, f"{where}.qas[{qa_index}]", "a question")
                example = _read_question(qa, context, where, version_2_with_negative, is_training)
                if example is None:  # a training answer not at its answer_start, warned about
                    skipped += 1
                    continue
                if example.question_id in seen_ids:
                    raise InputFileError(
                        f"{where}: question id {example.question_id!r} is repeated."
                    )
                seen_ids.add(example.question_id)
                examples.append(example)
    if not examples:
        note = f" to train on: all {skipped} are skipped (see the warnings)" if skipped else ""
        raise InputFileError(f"{path} holds no questions{note}.")
    if skipped:
        logging.warning(
            "%s: skipped %d training questions whose answer is blank or not in the words at "
            "its answer_start.",
            path,
            skipped,
        )
    return examples


def _read_question(qa, context, where, version_2_with_negative, is_training):
    question_id = qa.get("id")
    if question_id is None or question_id == "":
        raise InputFileError(f'{where} has a question without an "id": {str(qa)[:200]}')
    if not isinstance(question_id, str):
        raise InputFileError(
            f"{where}: question id must be a string, got "
            f"{type(question_id).__name__} {question_id!r}."
        )
    where = f"{where}, question {question_id!r}"
    if not isinstance(qa.get("question"), str):
        raise InputFileError(f'{where} has no "question" string.')
    _check_unicode(qa["question"], f"{where}: its question")
    is_impossible = qa.get("is_impossible", False)
    if not isinstance(is_impossible, bool):
        raise InputFileError(
            f"{where}: is_impossible must be true or false, got "
            f"{type(is_impossible).__name__} {is_impossible!r}."
        )
    if is_impossible and not version_2_with_negative:
        raise InputFileError(
            f"{where} is marked is_impossible, a SQuAD v2.0 question; read it "
            "with version_2_with_negative (--version_2_with_negative)."
        )
    answers = () if is_impossible else _list_field(qa, "answers", where)
    if is_impossible and qa.get("answers"):
        logging.warning(
            "%s is marked is_impossible yet lists answers; they are not read, as the original "
            "reads them (evaluate-v2.0.py would score against them).",
            where,
        )
    if is_training and not is_impossible and not answers:
        raise InputFileError(f"{where} has no answer; every training question needs one.")
    answers = tuple(
        _read_answer(answer, context, where, checked=is_training and index == 0)
        for index, answer in enumerate(answers)
    )
    if None in answers:
        return None
    return SquadExample(question_id, qa["question"], context, answers, is_impossible)


def _object(value, where, description):
    """`value`, which must be a JSON object (a dict)."""
    if not isinstance(value, dict):
        raise InputFileError(
            f"{where}: {description} must be a JSON object, got {type(value).__name__}."
        )
    return value


def _list_field(entry, name, where, required=False):
    """`entry[name]`, which must be a JSON list; an empty one when absent, unless `required`."""
    if required and name not in entry:
        keys = ", ".join(map(repr, entry)) or "none"
        raise InputFileError(f'{where} has no "{name}" list (its keys: {keys}).')
    value = entry.get(name, [])
    if not isinstance(value, list):
        hint = ""
        if isinstance(value, dict) and isinstance(value.get("text"), list):
            hint = (
                " (Hugging Face datasets' layout; SQuAD JSON lists answers as "
                '[{"text": ..., "answer_start": ...}])'
            )
        raise InputFileError(
            f'{where}: its "{name}" must be a JSON list, got {type(value).__name__}{hint}.'
        )
    return value


def _read_answer(answer, context, where, checked):
    """A `SquadAnswer`; `checked` (the one trained on): None when not at its answer_start."""
    if not isinstance(answer, dict):
        raise InputFileError(f'{where}: answer {answer!r} must be a JSON object with a "text".')
    text, start = answer.get("text"), answer.get("answer_start")
    if not isinstance(text, str) or (checked and not _is_offset(start)):
        needs = ' and an "answer_start" int' if checked else ""
        raise InputFileError(f'{where}: answer {answer} needs a "text" string{needs}.')
    _check_unicode(text, f"{where}: its answer")
    if not checked:
        return SquadAnswer(text, start if _is_offset(start) else None)
    if not text.strip():
        logging.warning("%s: answer %r at %d is blank; skipping the question.", where, text, start)
        return None
    if start >= 0 and context[start : start + len(text)] == text:
        return SquadAnswer(text, start)
    answer = _answer_in_its_words(context, text, start)
    if answer is None:
        logging.warning(
            "%s: answer %r is not in the words at answer_start %d (the context there reads "
            "%r); skipping the question, as the original run_squad.py does.",
            where,
            text,
            start,
            context[max(start, 0) : max(start, 0) + len(text)],
        )
    return answer


def _is_offset(value):
    """Whether a JSON value is a character offset: an int, not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _answer_in_its_words(context, text, start):
    """The answer where the original run_squad.py finds one that is not at its answer_start.

    The original takes the whitespace-separated words holding the answer's
    first and last characters by its offsets, and trains on the answer's
    words (whitespace collapsed) where they are among them; else the
    question is skipped (None).

    Example:
    >>> _answer_in_its_words("They met in Paris today.", "Paris", 13)
    SquadAnswer(text='Paris', start=12)
    >>> _answer_in_its_words("They met in  Paris today.", "in Paris", 10)
    SquadAnswer(text='in  Paris', start=9)
    >>> _answer_in_its_words("They met in Paris today.", "Rome", 12) is None
    True
    """
    end = start + len(text) - 1
    if not 0 <= start <= end < len(context):
        return None
    first, last = _word_bounds(context, start), _word_bounds(context, end)
    if first is None:  # whitespace before the context's first word
        return None
    words = context[first[0] : last[1]]
    pattern = r"\s+".join(re.escape(word) for word in text.split())
    match = re.search(pattern, words)
    return None if match is None else SquadAnswer(match.group(), first[0] + match.start())


def _word_bounds(context, index):
    """(start, end) of the word at character `index`; whitespace belongs to the word before it."""
    while index >= 0 and context[index].isspace():
        index -= 1
    if index < 0:
        return None
    start = index
    while start > 0 and not context[start - 1].isspace():
        start -= 1
    end = index + 1
    while end < len(context) and not context[end].isspace():
        end += 1
    return start, end


def _check_unicode(text, where):
    """Refuses a string JSON can hold but UTF-8 cannot: half of a surrogate pair ("\\ud83d")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputFileError(
            f"{where} holds {text[error.start : error.end]!r} at character {error.start}, "
            "half of a surrogate pair (an emoji cut in two?), which is not text."
        ) from None


@dataclasses.dataclass
class SquadFeatures:
    """Packed windows of examples, as parallel numpy arrays (one row per window).

    Attributes:
        token_ids, segment_ids, padding_mask: int32 `[windows, seq]`, the
            backbone's inputs.
        start_positions, end_positions: int32 `[windows]`, the answer's
            first and last token in the window; 0 ([CLS]) when the question
            is unanswerable or the answer is not wholly in the window.
        example_index: int32 `[windows]`, the example each window is from.
        token_starts, token_ends: int32 `[windows, seq]`, each context
            token's character span in its example's context
            (`context[start:end]`); -1 on [CLS], the question, [SEP] and
            padding.
        token_is_max_context: bool `[windows, seq]`, whether this window is
            the one where the token has the most context on both sides (the
            original's `_check_is_max_context`); False off the context.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    token_starts: np.ndarray
    token_ends: np.ndarray
    token_is_max_context: np.ndarray

    def __len__(self):
        return len(self.token_ids)

    def inputs(self):
        """The model's inputs: dict of `token_ids`, `segment_ids`, `padding_mask`."""
        return {
            "token_ids": self.token_ids,
            "segment_ids": self.segment_ids,
            "padding_mask": self.padding_mask,
        }

    def labels(self):
        """`BertQuestionAnswerer`'s targets: dict of `start_logits`, `end_logits` positions."""
        return {"start_logits": self.start_positions, "end_logits": self.end_positions}


def squad_features(
    examples,
    tokenizer,
    max_seq_length=384,
    doc_stride=128,
    max_query_length=64,
    is_training=False,
):
    """Windows, packs and labels examples as the original `convert_examples_to_features`.

    The question keeps its first `max_query_length` tokens. The context's
    tokens are covered by windows of up to `max_seq_length - question - 3`
    tokens, each starting `doc_stride` tokens after the previous one, the last
    ending at the context's end. A window's answer positions are those of
    the first answer when it lies wholly inside the window, else 0.

    Args:
        examples: `SquadExample`s.
        tokenizer: a `BertTokenizer`.
        max_seq_length: tokens per packed window.
        doc_stride: tokens between the starts of consecutive windows.
        max_query_length: most question tokens kept.
        is_training: label answer positions (otherwise all 0).

    Returns:
        `SquadFeatures`.

    Raises:
        ValueError: impossible lengths.
        InputFileError: an answer that spans no token (named by question id).

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                            "who", "a", "b", "c", "d"])
    >>> example = SquadExample("q1", "who", "a b c d", (SquadAnswer("c", 4),))
    >>> features = squad_features([example], tokenizer, max_seq_length=6,
    ...                           doc_stride=1, max_query_length=2, is_training=True)
    >>> features.token_ids.tolist()
    [[2, 5, 3, 6, 7, 3], [2, 5, 3, 7, 8, 3], [2, 5, 3, 8, 9, 3]]
    >>> features.start_positions.tolist(), features.token_is_max_context[1].tolist()
    ([0, 4, 3], [False, False, False, False, True, False])
    """
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}.")
    if max_seq_length - max_query_length - 3 < 1:
        raise ValueError(
            f"max_seq_length {max_seq_length} leaves no room for context after a "
            f"question of max_query_length {max_query_length} tokens, [CLS] and two [SEP]."
        )
    examples = list(examples)
    question_ids = _tokenize(tokenizer, [example.question for example in examples])
    contexts = sorted({example.context for example in examples})
    context_index = {context: index for index, context in enumerate(contexts)}
    context_tokens = _tokenize_with_offsets(tokenizer, contexts)
    rows = []
    for index, example in enumerate(examples):
        query = question_ids[index][:max_query_length]
        doc_ids, doc_starts, doc_ends = context_tokens[context_index[example.context]]
        answer_tokens = None
        if is_training and example.answers:
            answer_tokens = _answer_token_span(example, doc_starts, doc_ends)
            if answer_tokens is None:
                continue
        spans = _window_spans(len(doc_ids), max_seq_length - len(query) - 3, doc_stride)
        for span_index in range(len(spans)):
            rows.append(
                _pack_window(
                    tokenizer,
                    query,
                    (doc_ids, doc_starts, doc_ends),
                    spans,
                    span_index,
                    answer_tokens,
                    max_seq_length,
                    index,
                )
            )
    return _stack(rows, max_seq_length, tokenizer.pad_token_id)


def _tokenize(tokenizer, texts):
    token_ids = []
    for begin in range(0, len(texts), _TOKENIZE_BATCH):
        token_ids += tokenizer.tokenize(texts[begin : begin + _TOKENIZE_BATCH]).to_list()
    return token_ids


def _tokenize_with_offsets(tokenizer, texts):
    """[(ids, starts, ends) numpy arrays] per text, character offsets."""
    tokens = []
    for begin in range(0, len(texts), _TOKENIZE_BATCH):
        batch = texts[begin : begin + _TOKENIZE_BATCH]
        ids, starts, ends = tokenizer.tokenize_with_offsets(batch, unit="character")
        # One conversion a batch: indexing ragged rows in eager mode costs
        # several TensorFlow calls each, most of the time of the whole function.
        row_splits = ids.row_splits.numpy()
        ids, starts, ends = (tensor.flat_values.numpy() for tensor in (ids, starts, ends))
        for row, text in enumerate(batch):
            row_tokens = slice(row_splits[row], row_splits[row + 1])
            row_ends = _over_combining_marks(text, ends[row_tokens])
            tokens.append((ids[row_tokens], starts[row_tokens], row_ends))
    return tokens


def _over_combining_marks(text, ends):
    """Token ends moved past the combining marks (category Mn) that follow them.

    Accent stripping drops a combining accent, so the tokenizer's span of
    "Chloe\u0301" stops before the accent; the accent belongs to the letter
    before it, and the answer text needs it.
    """
    if text.isascii():
        return ends
    # next_kept[i]: the first index >= i that is not a combining mark.
    next_kept = np.arange(len(text) + 1)
    for index in range(len(text) - 1, -1, -1):
        if unicodedata.category(text[index]) == "Mn":
            next_kept[index] = next_kept[index + 1]
    return next_kept[ends]


def _answer_token_span(example, token_starts, token_ends):
    """First and last context token overlapping the first answer's characters; None, warned, if none."""
    answer = example.answers[0]
    overlapping = np.flatnonzero((token_starts < answer.end) & (token_ends > answer.start))
    if not len(overlapping):
        logging.warning(
            "Question %r: answer %r at character %d covers no token of the context (only "
            "characters the tokenizer drops); skipping the question.",
            example.question_id,
            answer.text,
            answer.start,
        )
        return None
    return int(overlapping[0]), int(overlapping[-1])


def _window_spans(num_tokens, max_window_tokens, doc_stride):
    """(start, length) of each window, as the original's `doc_spans` (at least one)."""
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, max_window_tokens)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, doc_stride)


def window_max_context(spans, span_index):
    """Whether window `span_index` gives each of its tokens the most context.

    The original's `_check_is_max_context`, for a whole window at once: among
    the windows holding a token, the best has the largest min(left, right)
    context plus 0.01 × its length; the first wins a tie.

    Args:
        spans: (start, length) of every window, in context tokens.
        span_index: the window asked about.

    Returns:
        bool `[length of window span_index]`.

    Example:
    >>> window_max_context([(0, 4), (2, 4)], 1).tolist()
    [False, True, True, True]
    """
    starts, lengths = np.array(spans, dtype=np.int64).reshape(-1, 2).T  # [windows]
    ends = starts + lengths - 1
    window_start, window_length = spans[span_index]
    positions = np.arange(window_start, window_start + window_length)[:, None]  # [tokens, 1]
    scores = np.minimum(positions - starts, ends - positions) + 0.01 * lengths  # [tokens, windows]
    scores = np.where((starts <= positions) & (positions <= ends), scores, -np.inf)
    return np.argmax(scores, axis=1) == span_index  # argmax: the first of equal scores


def _pack_window(
    tokenizer, query, doc, spans, span_index, answer_tokens, max_seq_length, example_index
):
    doc_ids, doc_starts, doc_ends = doc
    window_start, window_length = spans[span_index]
    window = slice(window_start, window_start + window_length)
    doc_offset = len(query) + 2  # [CLS] question [SEP]
    token_ids = [
        tokenizer.cls_token_id,
        *query,
        tokenizer.sep_token_id,
        *doc_ids[window],
        tokenizer.sep_token_id,
    ]
    segment_ids = [0] * doc_offset + [1] * (window_length + 1)
    off_context = [-1] * doc_offset
    token_starts = off_context + doc_starts[window].tolist()
    token_ends = off_context + doc_ends[window].tolist()
    max_context = [False] * doc_offset + window_max_context(spans, span_index).tolist()
    start_position = end_position = 0
    if answer_tokens is not None:
        first, last = answer_tokens
        if window_start <= first and last < window_start + window_length:
            start_position = first - window_start + doc_offset
            end_position = last - window_start + doc_offset
    return (
        token_ids,
        segment_ids,
        token_starts,
        token_ends,
        max_context,
        start_position,
        end_position,
        example_index,
    )


def _stack(rows, max_seq_length, pad_token_id):
    count = len(rows)

    def padded(column, fill, dtype):  # [windows, seq]
        array = np.full((count, max_seq_length), fill, dtype)
        for row_index, row in enumerate(rows):
            array[row_index, : len(row[column])] = row[column]
        return array

    def scalars(column):  # [windows]
        return np.array([row[column] for row in rows], "int32").reshape(count)

    lengths = np.array([len(row[0]) for row in rows], "int32").reshape(count, 1)
    return SquadFeatures(
        token_ids=padded(0, pad_token_id, "int32"),
        segment_ids=padded(1, 0, "int32"),
        padding_mask=(np.arange(max_seq_length) < lengths).astype("int32"),
        start_positions=scalars(5),
        end_positions=scalars(6),
        example_index=scalars(7),
        token_starts=padded(2, -1, "int32"),
        token_ends=padded(3, -1, "int32"),
        token_is_max_context=padded(4, False, "bool"),
    )
