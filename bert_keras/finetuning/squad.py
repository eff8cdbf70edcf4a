"""SQuAD v1.1 / v2.0 fine-tuning: windowed features, the original's answer selection, result files.

`best_answers` is the original run_squad.py's `write_predictions` with two
differences: answer text is the original context sliced at the tokens'
character offsets (no `get_final_text` re-alignment heuristics), and a
question whose every candidate is null gets "" instead of crashing (v2.0) or
the placeholder "empty" (v1.1).
"""

import dataclasses
import json
import sys
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.length_batching import batch_by_length
from bert_keras.data.squad import read_squad
from bert_keras.data.squad import squad_features
from bert_keras.evaluation.squad_metrics import squad_scores
from bert_keras.finetuning.run import FineTuningRun
from bert_keras.finetuning.run import seconds_since
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.training.checkpoint_manager import differing_values

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
# The null-odds of a question with no non-null candidate at all: above any
# threshold, and still plain JSON (unlike Infinity).
NO_NON_NULL_ODDS = sys.float_info.max
# What `BertQuestionAnswerer` gives padding, about: the logits of the positions
# a batch shorter than max_seq_length leaves out.
PADDING_LOGIT = -1e9


@dataclasses.dataclass
class SquadPredictions:
    """What `best_answers` chose, keyed by question id.

    Attributes:
        answers: question id -> answer text ("" for no answer).
        nbest: question id -> list of up to n_best_size dicts with "text",
            "probability", "start_logit" and "end_logit", best first.
        null_odds: question id -> null score minus the best non-null score
            (v2.0 only; empty for v1.1).
    """

    answers: dict
    nbest: dict
    null_odds: dict


def best_answers(
    examples,
    features,
    start_logits,
    end_logits,
    n_best_size=20,
    max_answer_length=30,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
):
    """Each question's best span over all its windows, as the original run_squad.py.

    A candidate span starts at one of a window's `n_best_size` highest start
    logits and ends at one of its highest end logits, lies in the context,
    ends no earlier than it starts, is at most `max_answer_length` tokens
    long and starts at a token this window gives the most context. Spans are
    ranked by start plus end logit. For v2.0 the null score is the lowest
    [CLS] start plus end logit over the windows, and the answer is "" when
    the null score beats the best non-null span by more than
    `null_score_diff_threshold`.

    Args:
        examples: the `SquadExample`s the features were made from.
        features: their `SquadFeatures`.
        start_logits, end_logits: float `[windows, seq]`, the model's.
        n_best_size: candidates kept per window side and in the n-best list.
        max_answer_length: longest answer, in tokens.
        version_2_with_negative: consider "no answer".
        null_score_diff_threshold: how much the null score must beat the
            best span by for "no answer".

    Returns:
        `SquadPredictions`.

    Example:
    >>> from bert_keras.data.squad import SquadExample
    >>> import numpy as np
    >>> from bert_keras.data.squad import squad_features
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                            "who", "ada", "met", "bob"])
    >>> examples = [SquadExample("q1", "who", "Ada met Bob.")]
    >>> features = squad_features(examples, tokenizer, max_seq_length=8, max_query_length=2)
    >>> start, end = np.zeros((2, 1, 8))
    >>> start[0, 5] = end[0, 5] = 3.0  # "Bob"
    >>> best_answers(examples, features, start, end).answers
    {'q1': 'Bob'}
    """
    start_logits = np.asarray(start_logits, "float64")
    end_logits = np.asarray(end_logits, "float64")
    windows_of_example = [[] for _ in examples]
    for window, example_index in enumerate(features.example_index):
        windows_of_example[example_index].append(window)
    predictions = SquadPredictions({}, {}, {})
    for example, windows in zip(examples, windows_of_example):
        candidates, null = [], None  # null: (score, start logit, end logit)
        for window in windows:
            candidates += _window_candidates(
                features,
                window,
                start_logits[window],
                end_logits[window],
                n_best_size,
                max_answer_length,
            )
            window_null = start_logits[window, 0] + end_logits[window, 0]
            if null is None or window_null < null[0]:
                null = (window_null, start_logits[window, 0], end_logits[window, 0])
        if version_2_with_negative:
            candidates.append((None, null[1], null[2]))
        nbest = _nbest(example, candidates, n_best_size, version_2_with_negative, null)
        best_non_null = next((entry for entry in nbest if entry["text"]), None)
        question_id = example.question_id
        predictions.nbest[question_id] = nbest
        if not version_2_with_negative:
            predictions.answers[question_id] = nbest[0]["text"] if nbest else ""
            continue
        if best_non_null is None:
            odds = NO_NON_NULL_ODDS
        else:
            odds = float(null[0] - best_non_null["start_logit"] - best_non_null["end_logit"])
        predictions.null_odds[question_id] = odds
        predictions.answers[question_id] = (
            "" if odds > null_score_diff_threshold else best_non_null["text"]
        )
    return predictions


def _window_candidates(features, window, start_logits, end_logits, n_best_size, max_answer_length):
    """[(character span, start logit, end logit)] of a window's valid spans.

    In the original's order: start candidates best first, then end candidates.
    """
    in_context = features.token_starts[window] >= 0
    max_context = features.token_is_max_context[window]
    # A stable sort keeps the original's tie order (Python's sorted).
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    start_grid, end_grid = starts[:, None], ends[None, :]  # [n_best, n_best]
    valid = (
        in_context[start_grid]
        & in_context[end_grid]
        & max_context[start_grid]
        & (end_grid >= start_grid)
        & (end_grid - start_grid + 1 <= max_answer_length)
    )
    start_rows, end_columns = np.nonzero(valid)  # row-major: the original's loop order
    candidates = []
    for start, end in zip(starts[start_rows], ends[end_columns]):
        span = (features.token_starts[window, start], features.token_ends[window, end])
        candidates.append((span, start_logits[start], end_logits[end]))
    return candidates


def _nbest(example, candidates, n_best_size, version_2_with_negative, null):
    """The n-best list: distinct texts, best first, with softmax probabilities."""
    candidates = sorted(candidates, key=lambda c: c[1] + c[2], reverse=True)
    seen, nbest = set(), []
    for span, start_logit, end_logit in candidates:
        if len(nbest) >= n_best_size:
            break
        text = "" if span is None else example.context[span[0] : span[1]]
        if text in seen:
            continue
        seen.add(text)
        nbest.append(
            {"text": text, "start_logit": float(start_logit), "end_logit": float(end_logit)}
        )
    if version_2_with_negative and "" not in seen:
        nbest.append({"text": "", "start_logit": float(null[1]), "end_logit": float(null[2])})
    if nbest:
        scores = np.array([entry["start_logit"] + entry["end_logit"] for entry in nbest])
        probabilities = np.exp(scores - scores.max())
        probabilities /= probabilities.sum()
        for entry, probability in zip(nbest, probabilities):
            entry["probability"] = float(probability)
    return nbest


def gold_answers(examples, version_2_with_negative=False):
    """question id -> gold answer texts ([] for unanswerable), or None when any is unlabelled.

    A question without answers is unlabelled, but in SQuAD 2.0 where some
    question has answers or is marked is_impossible: there, as in
    evaluate-v2.0.py, it is unanswerable.

    Example:
    >>> from bert_keras.data.squad import SquadAnswer
    >>> from bert_keras.data.squad import SquadExample
    >>> examples = [SquadExample("q1", "?", "Paris.", (SquadAnswer("Paris", 0),)),
    ...             SquadExample("q2", "?", "Paris.")]
    >>> gold_answers(examples) is None, gold_answers(examples, version_2_with_negative=True)
    (True, {'q1': ['Paris'], 'q2': []})
    """
    unlabelled = [not example.answers and not example.is_impossible for example in examples]
    if any(unlabelled) and not (version_2_with_negative and not all(unlabelled)):
        return None
    return {
        example.question_id: [answer.text for answer in example.answers] for example in examples
    }


class SquadRun(FineTuningRun):
    """Fine-tunes a `BertQuestionAnswerer` on SQuAD and writes the original's prediction files.

    Args:
        init_checkpoint: checkpoint directory; its vocab.txt and casing are
            used, and its question-answering head (Hugging Face
            `qa_outputs`, the original's `cls/squad`) when it has one.
        output_dir: predictions.json, nbest_predictions.json, null_odds.json
            (v2.0) and eval_results.json go here.
        max_seq_length: tokens per window (see `FineTuningRun`; None: 384
            or the checkpoint's positions, whichever is fewer).
        doc_stride: tokens between the starts of a context's windows.
        max_query_length: most question tokens kept.
        version_2_with_negative: SQuAD v2.0 (unanswerable questions).
        seed: seeds Keras, shuffling and dropout.
        execution: an `Execution` (see `FineTuningRun`).
        bucket_by_length: batch training texts by length (see `FineTuningRun`).

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> import json, tempfile
    >>> checkpoint, data = tempfile.mkdtemp() + "/tiny", tempfile.mkdtemp()
    >>> _ = open(data + "/vocab.txt", "w").write("\\n".join(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "ada", "met", "bob"]))
    >>> BertBackbone(9, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=data + "/vocab.txt")
    >>> qa = {"id": "q1", "question": "who", "answers": [{"text": "Bob", "answer_start": 8}]}
    >>> _ = open(data + "/train.json", "w").write(json.dumps(
    ...     {"data": [{"paragraphs": [{"context": "Ada met Bob", "qas": [qa]}]}]}))
    >>> run = SquadRun(checkpoint, tempfile.mkdtemp(), max_seq_length=16, max_query_length=4)
    >>> _ = run.train(data + "/train.json", batch_size=1, learning_rate=1e-3,
    ...               num_epochs=1, verbose=0)
    >>> sorted(run.predict(data + "/train.json", batch_size=1))
    ['exact_match', 'f1', 'seconds', 'total']
    """

    default_max_seq_length = 384

    def __init__(
        self,
        init_checkpoint,
        output_dir,
        max_seq_length=None,
        doc_stride=128,
        max_query_length=64,
        version_2_with_negative=False,
        scores_only=False,
        **options,
    ):
        super().__init__(None, init_checkpoint, output_dir, max_seq_length, **options)
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.version_2_with_negative = version_2_with_negative
        self.model = self.build_model(
            BertQuestionAnswerer,
            "question_answering",
            output_layer="span_logits",
            reads_pooler=False,
        )
        self._trained = False
        self._predict_examples = {}  # path -> its questions (`predict_examples`)
        if scores_only:
            self.refuse_untrained_head("question-answering", scoring_flags="--do_predict")
            self._warn_of_other_settings()

    def _warn_of_other_settings(self):
        """Warns where the checkpoint was fine-tuned with other SQuAD settings than this run's."""
        settings = {
            "max_seq_length": self.max_seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "version_2_with_negative": self.version_2_with_negative,
        }
        recorded = {
            name: value for name, value in self.checkpoint.task_config.items() if name in settings
        }
        changed = differing_values(recorded, {name: settings[name] for name in recorded})
        if changed:
            logging.warning(
                "%s was fine-tuned with other settings than this run's: %s; the flags' are "
                "taken, so give the checkpoint's to answer as it learned to.",
                self.checkpoint.directory,
                "; ".join(changed),
            )

    def features(self, examples, is_training=False):
        """`squad_features` of `examples` with this run's tokenizer and lengths."""
        return squad_features(
            examples,
            self.tokenizer,
            self.max_seq_length,
            self.doc_stride,
            self.max_query_length,
            is_training=is_training,
        )

    def train(
        self,
        train_file,
        batch_size,
        learning_rate,
        num_epochs,
        warmup_proportion=0.1,
        limit=None,
        verbose=2,
    ):
        """Fine-tunes on `train_file` with the paper's AdamW recipe; returns the history.

        Epochs count windows, not questions (a long context gives several).
        The model goes to OUTPUT_DIR/export (see `FineTuningRun.export`), its
        task config holding the windowing flags.
        """
        examples = read_squad(train_file, self.version_2_with_negative, is_training=True)
        self._trained = True
        features = self.features(examples[:limit], is_training=True)
        if not len(features):  # before the shuffle, which refuses an empty buffer
            raise InputFileError(f"No training examples in {train_file} (limit {limit}).")
        dataset = tf.data.Dataset.from_tensor_slices((features.inputs(), features.labels()))
        dataset = dataset.shuffle(len(features), seed=self.seed, reshuffle_each_iteration=True)
        history = self.fit(
            self.model,
            batch_by_length(dataset, batch_size, **self.training_batching(num_epochs)),
            len(features),
            batch_size,
            learning_rate,
            num_epochs,
            warmup_proportion,
            verbose=verbose,
        )
        self.export(
            self.model,
            "question_answering",
            output_layer="span_logits",
            task_config={
                "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length,
                "version_2_with_negative": self.version_2_with_negative,
            },
        )
        return history

    def predict_examples(self, predict_file):
        """The questions of `predict_file`, read and checked once (a program does before training)."""
        if predict_file not in self._predict_examples:
            examples = read_squad(predict_file, self.version_2_with_negative)
            self._predict_examples[predict_file] = examples
        return self._predict_examples[predict_file]

    def predict(
        self,
        predict_file,
        batch_size,
        n_best_size=20,
        max_answer_length=30,
        null_score_diff_threshold=0.0,
    ):
        """Answers `predict_file`'s questions and writes the prediction files.

        Returns:
            The EM/F1 scores (also written to eval_results.json) when every
            question has gold answers, else None.
        """
        start = time.perf_counter()
        examples = self.predict_examples(predict_file)
        self.warn_if_head_untrained("question-answering")
        features = self.features(examples)
        logits = self.predict_features(
            self.model,
            features.inputs(),
            batch_size,
            per_token_outputs=True,
            fill=PADDING_LOGIT,
        )
        predictions = best_answers(
            examples,
            features,
            logits["start_logits"],
            logits["end_logits"],
            n_best_size,
            max_answer_length,
            self.version_2_with_negative,
            null_score_diff_threshold,
        )
        self.write_file(PREDICTIONS_FILE, _json(predictions.answers))
        self.write_file(NBEST_FILE, _json(predictions.nbest))
        if self.version_2_with_negative:
            self.write_file(NULL_ODDS_FILE, _json(predictions.null_odds))
        gold = gold_answers(examples, self.version_2_with_negative)
        if gold is None:
            unlabelled = sum(
                not example.answers and not example.is_impossible for example in examples
            )
            logging.warning(
                "%s: %d of %d questions have no answers (and are not is_impossible), so the "
                "predictions are not scored (in SQuAD 2.0 they would count as unanswerable).",
                predict_file,
                unlabelled,
                len(examples),
            )
            return None
        scores = squad_scores(gold, predictions.answers, self.version_2_with_negative)
        results = {**scores, "seconds": seconds_since(start)}
        self.write_results(results)
        return results


def _json(value):
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
