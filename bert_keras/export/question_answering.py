"""The serving signatures of a question answerer: question and context in, the answer span out.

`tasks.squad --do_predict` in one TensorFlow graph: the context is split into
the windows `squad_features` makes (the original run_squad.py's doc-stride
rule, each token predicted from the window that gives it the most context),
every window of the batch runs through the model at once, and each question
takes the best span over all its windows, chosen as
`bert_keras.finetuning.squad.best_answers` chooses it: for SQuAD v1.1 always
a span, for v2.0 "" when the null ([CLS]) score beats the best span by more
than a threshold.
"""

import dataclasses

import tensorflow as tf

from bert_keras.export.signatures import REQUIRED_BACKEND
from bert_keras.export.signatures import check_backend
from bert_keras.export.signatures import checked_shape
from bert_keras.export.signatures import ids_signature
from bert_keras.export.signatures import same_batch_size
from bert_keras.export.signatures import text_specs
from bert_keras.text.preprocessor import packed_rows

__all__ = ["REQUIRED_BACKEND", "question_answering_signatures"]
# The original breaks ties between windows by this much per token of length.
_WINDOW_LENGTH_BONUS = 0.01


def question_answering_signatures(
    model,
    tokenizer,
    sequence_length,
    doc_stride=128,
    max_query_length=64,
    n_best_size=20,
    max_answer_length=30,
    null_score_diff_threshold=None,
):
    """`serving_default` and `serve_ids` of a `BertQuestionAnswerer`.

    `serving_default` takes `question` and `context` strings `[batch]` and
    gives `answer` string, `score` float32 (the answer's start plus end
    logit; the lowest float32, with answer "", when no span qualifies, as
    for an empty context), and `start`, `end` int64 `[batch]`, the answer's
    byte offsets in the context. Invalid UTF-8 in a context is first
    replaced by U+FFFD, and offsets count in the replaced text. `serve_ids`
    gives `start_logits` and `end_logits` `[batch, length]`.

    With a `null_score_diff_threshold` (SQuAD v2.0), `serving_default` also
    gives `null_odds` float32 `[batch]`, the null score (the lowest [CLS]
    start plus end logit over the windows) minus the best span's score, as
    `tasks.squad` writes it to null_odds.json (the largest float32 when no
    span qualifies). The answer is "" (with `start` = `end` = 0 and the null
    score as `score`) when `null_odds` exceeds the threshold.

    Args:
        model: a `BertQuestionAnswerer`.
        tokenizer: its `BertTokenizer`.
        sequence_length: tokens per packed window.
        doc_stride: context tokens between the starts of consecutive windows.
        max_query_length: most question tokens kept.
        n_best_size: start and end candidates per window.
        max_answer_length: longest answer, in tokens.
        null_score_diff_threshold: None for SQuAD v1.1 (always a span);
            for v2.0, how much the null score must beat the best span by
            for no answer.

    Raises:
        ValueError: a sequence length with no room for context.

    Example:
    >>> import tensorflow as tf
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "bob"])
    >>> model = BertQuestionAnswerer(BertBackbone(7, 1, 2, 8, 16))
    >>> serve = question_answering_signatures(model, tokenizer, 16, max_query_length=4)
    >>> answers = serve["serving_default"](tf.constant(["who?"]), tf.constant(["Bob"]))
    >>> answers["answer"].numpy().tolist(), answers["start"].numpy().tolist()
    ([b'Bob'], [0])
    """
    check_backend()
    if sequence_length - max_query_length - 3 < 1:
        raise ValueError(
            f"sequence_length {sequence_length} leaves no room for context after a question of "
            f"max_query_length {max_query_length} tokens, [CLS] and two [SEP]."
        )

    @tf.function(input_signature=text_specs("question", "context"), autograph=False)
    def serve_text(question, context):
        question, context = checked_shape(question, [None]), checked_shape(context, [None])
        with tf.control_dependencies(same_batch_size(question=question, context=context)):
            context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="replace")
        windows = _context_windows(
            tokenizer, question, context, sequence_length, doc_stride, max_query_length
        )
        logits = model(windows.features, training=False)
        spans, best, found = _best_spans(windows, logits, context, n_best_size, max_answer_length)
        if null_score_diff_threshold is None:
            return spans
        null = _null_scores(windows, logits)
        return _null_or_span(spans, best, found, null, null_score_diff_threshold)

    def span_logits(outputs):
        return {name: outputs[name] for name in ("start_logits", "end_logits")}

    return {"serving_default": serve_text, "serve_ids": ids_signature(model, span_logits)}


@dataclasses.dataclass
class _Windows:
    """The packed windows of a batch of questions, and where their context tokens are.

    Attributes:
        features: the model's inputs, int32 `[windows, length]`.
        example: int64 `[windows]`, the question each window answers.
        byte_starts, byte_ends: int64 `[windows, length]`, each context
            token's bytes in its context; -1 off the context.
        max_context: bool `[windows, length]`, this window gives the token
            the most context; False off the context.
        batch_size: int64, the number of questions.
    """

    features: dict
    example: tf.Tensor
    byte_starts: tf.Tensor
    byte_ends: tf.Tensor
    max_context: tf.Tensor
    batch_size: tf.Tensor


def _context_windows(tokenizer, question, context, sequence_length, doc_stride, max_query_length):
    """`_Windows` as `squad_features` makes them: [CLS] question [SEP] window [SEP]."""
    query = tokenizer.tokenize(question)[:, :max_query_length]  # [batch, (query)]
    tokens, starts, ends = tokenizer.tokenize_with_offsets(context, unit="byte")
    num_tokens = tokens.row_lengths()
    budget = sequence_length - query.row_lengths() - 3  # context tokens per window
    stride = tf.minimum(budget, doc_stride)
    num_windows = 1 + tf.maximum(num_tokens - budget + stride - 1, 0) // stride
    example = tf.repeat(tf.range(tf.size(num_tokens, tf.int64)), num_windows)  # [windows]
    index_in_example = tf.ragged.range(num_windows).flat_values
    window_start = index_in_example * tf.gather(stride, example)
    window_length = tf.minimum(
        tf.gather(num_tokens, example) - window_start, tf.gather(budget, example)
    )
    positions = tf.ragged.range(window_start, window_start + window_length)  # [windows, (tokens)]
    flat = positions.flat_values + tf.repeat(tf.gather(tokens.row_starts(), example), window_length)

    def windowed(values):  # [batch, (tokens)] -> [windows, (window tokens)]
        return positions.with_flat_values(tf.gather(values.flat_values, flat))

    max_context = _max_context(positions, example, index_in_example, num_windows, window_start)
    query = tf.gather(query, example)
    off_query = tf.cast(query, tf.int64) * 0 - 1
    lengths = query.row_lengths() + window_length + 3
    width = tf.reduce_max(tf.concat([lengths, [3]], axis=0))
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    token_ids = packed_rows((cls, query, sep, windowed(tokens), sep), pad, width)
    segment_ids = packed_rows((0, query * 0, 0, positions * 0 + 1, 1), 0, width)
    features = {
        "token_ids": tf.cast(token_ids, tf.int32),
        "segment_ids": tf.cast(segment_ids, tf.int32),
        "padding_mask": tf.cast(tf.sequence_mask(lengths, width), tf.int32),
    }
    return _Windows(
        features,
        example,
        byte_starts=packed_rows((-1, off_query, -1, windowed(starts), -1), -1, width),
        byte_ends=packed_rows((-1, off_query, -1, windowed(ends), -1), -1, width),
        max_context=packed_rows(
            (False, tf.cast(query * 0, tf.bool), False, max_context, False), False, width
        ),
        batch_size=tf.size(num_tokens, tf.int64),
    )


def _max_context(positions, example, index_in_example, num_windows, window_start):
    """bool `[windows, (tokens)]`: the window gives the token its most context (first on ties).

    As `bert_keras.data.squad.window_max_context`: among the windows holding
    a token, the best has the largest min(left, right) context plus
    `_WINDOW_LENGTH_BONUS` times its length.
    """
    window_length = positions.row_lengths()
    token_window = positions.value_rowids()  # [tokens]
    windows_of_example = tf.RaggedTensor.from_row_lengths(
        tf.range(tf.size(example, tf.int64)), num_windows
    )
    candidates = tf.gather(windows_of_example, tf.gather(example, token_window))  # [tokens, (k)]
    candidate = candidates.flat_values
    position = tf.repeat(positions.flat_values, candidates.row_lengths())
    first = tf.gather(window_start, candidate)
    last = first + tf.gather(window_length, candidate) - 1
    context = tf.cast(tf.minimum(position - first, last - position), tf.float64)
    score = context + _WINDOW_LENGTH_BONUS * tf.cast(
        tf.gather(window_length, candidate), tf.float64
    )
    score = tf.where((first <= position) & (position <= last), score, -float("inf"))
    score = candidates.with_flat_values(score)
    best = tf.reduce_max(score, axis=1)  # [tokens]
    local_index = tf.ragged.range(candidates.row_lengths())
    is_best = tf.equal(score, best[:, tf.newaxis])
    first_best = tf.reduce_min(
        tf.where(is_best, local_index, tf.int64.max).to_tensor(tf.int64.max), axis=1
    )
    return positions.with_flat_values(
        tf.equal(first_best, tf.gather(index_in_example, token_window))
    )


def _best_spans(windows, logits, context, n_best_size, max_answer_length):
    """Each question's best span over its windows.

    Returns:
        `(spans, best, found)`: `answer`, `score`, byte `start`, `end`
        `[batch]`; the best span's float64 score; whether any span qualified.
    """
    start_logits, end_logits = logits["start_logits"], logits["end_logits"]  # [windows, length]
    in_context = windows.byte_starts >= 0
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    # top_k puts the lower index first among equal logits, as a stable sort does.
    starts = tf.math.top_k(start_logits, k).indices  # [windows, k]
    ends = tf.math.top_k(end_logits, k).indices

    def at(values, indices):
        return tf.gather(values, indices, batch_dims=1)

    start_grid, end_grid = starts[:, :, tf.newaxis], ends[:, tf.newaxis, :]
    valid = (
        at(in_context, starts)[:, :, tf.newaxis]
        & at(in_context, ends)[:, tf.newaxis, :]
        & at(windows.max_context, starts)[:, :, tf.newaxis]
        & (end_grid >= start_grid)
        & (end_grid - start_grid + 1 <= max_answer_length)
    )  # [windows, k, k]
    scores = (
        tf.cast(at(start_logits, starts), tf.float64)[:, :, tf.newaxis]
        + tf.cast(at(end_logits, ends), tf.float64)[:, tf.newaxis, :]
    )
    scores = tf.reshape(tf.where(valid, scores, -float("inf")), [-1, k * k])  # [windows, k*k]
    num_windows = tf.shape(scores, out_type=tf.int64)[0]
    best = tf.math.unsorted_segment_max(
        tf.reduce_max(scores, axis=1), windows.example, windows.batch_size
    )  # [batch]
    # The first candidate of the best score, in the original's order: window,
    # then start rank, then end rank.
    candidate_ids = tf.reshape(tf.range(num_windows * tf.cast(k * k, tf.int64)), [-1, k * k])
    is_best = tf.reshape(valid, [-1, k * k]) & tf.equal(
        scores, tf.gather(best, windows.example)[:, tf.newaxis]
    )
    none = num_windows * tf.cast(k * k, tf.int64)
    first = tf.math.unsorted_segment_min(
        tf.reduce_min(tf.where(is_best, candidate_ids, none), axis=1),
        windows.example,
        windows.batch_size,
    )
    found = first < none
    first = tf.where(found, first, 0)
    window = first // tf.cast(k * k, tf.int64)
    rank = first % tf.cast(k * k, tf.int64)
    start_position = tf.gather_nd(starts, tf.stack([window, rank // tf.cast(k, tf.int64)], 1))
    end_position = tf.gather_nd(ends, tf.stack([window, rank % tf.cast(k, tf.int64)], 1))
    start = tf.gather_nd(
        windows.byte_starts, tf.stack([window, tf.cast(start_position, tf.int64)], 1)
    )
    end = tf.gather_nd(windows.byte_ends, tf.stack([window, tf.cast(end_position, tf.int64)], 1))
    start, end = tf.where(found, start, 0), tf.where(found, end, 0)
    end = end + tf.where(found, _combining_marks_after(context, end), 0)
    spans = {
        "answer": tf.where(found, tf.strings.substr(context, start, end - start), ""),
        "score": tf.where(found, tf.cast(best, tf.float32), tf.float32.min),
        "start": start,
        "end": end,
    }
    return spans, best, found


def _combining_marks_after(texts, offsets):
    """Bytes of the combining marks (Unicode category Mn) at each offset of its text.

    Accent stripping drops a combining accent, so the token before it ends
    before it; the accent belongs to the answer's last letter (see
    `bert_keras.data.squad`, which moves token ends the same way).
    """
    rest = tf.strings.substr(texts, offsets, tf.cast(tf.strings.length(texts), tf.int64) - offsets)
    marks = tf.strings.regex_replace(rest, r"(?s)^(\p{Mn}*).*$", r"\1")
    return tf.cast(tf.strings.length(marks), tf.int64)


def _null_scores(windows, logits):
    """float64 `[batch]`: the lowest [CLS] start plus end logit over each question's windows."""
    window_null = tf.cast(logits["start_logits"][:, 0], tf.float64) + tf.cast(
        logits["end_logits"][:, 0], tf.float64
    )
    return tf.math.unsorted_segment_min(window_null, windows.example, windows.batch_size)


def _null_or_span(spans, best, found, null, null_score_diff_threshold):
    """SQuAD v2.0: `spans` with "" where the null score beats the best span by enough.

    As `best_answers` with `version_2_with_negative`. (Its n-best list
    never ranks the null entry above the best span when it holds only one
    entry: the best span's logits are each window's highest.)
    """
    answered = found & (null - best <= null_score_diff_threshold)
    null_odds = tf.where(found, tf.cast(null - best, tf.float32), tf.float32.max)
    return {
        "answer": tf.where(answered, spans["answer"], ""),
        "score": tf.where(answered, spans["score"], tf.cast(null, tf.float32)),
        "start": tf.where(answered, spans["start"], 0),
        "end": tf.where(answered, spans["end"], 0),
        "null_odds": null_odds,
    }
