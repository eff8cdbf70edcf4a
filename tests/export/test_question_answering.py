"""A question answerer's export answers as `tasks.squad` predicts, window by window."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.checkpoints import write_checkpoint
from bert_keras.data.squad import SquadExample
from bert_keras.data.squad import squad_features
from bert_keras.export.saved_model import export_saved_model
from bert_keras.finetuning.squad import NO_NON_NULL_ODDS
from bert_keras.finetuning.squad import best_answers
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.text.tokenizer import BertTokenizer
from tests.export import CONFIG
from tests.export import serve
from tests.export import write_vocabulary
from tests.export.servable import inputs_without_a_shape_check
from tests.export.servable import unservable_ops

WINDOWS = {"max_seq_length": 24, "doc_stride": 5, "max_query_length": 6}
PAIRS = [
    ("who saw the film ?", "a dull film , the plot was bad ."),
    ("what was good ?", "the film was good ! " * 8),  # several windows
    ("what plot ?", "The plot of Chloe\u0301 ’s film is grea\u0301t , 映画 was dull 🎬 ."),
    ("who ?", ""),  # no context token: no answer
    ("the the the the the the the the film ?", "great films , great plots"),  # a long question
    ("", "a plot"),
]


@pytest.fixture(scope="module")
def question_answerer(tmp_path_factory):
    """A random question answerer, its checkpoint directory and tokenizer."""
    directory = tmp_path_factory.mktemp("question_answerer")
    vocabulary = write_vocabulary(directory)
    model = BertQuestionAnswerer(BertBackbone(**CONFIG))
    checkpoint = model_checkpoint(
        model,
        heads={"question_answering": "span_logits"},
        vocabulary_file=vocabulary,
        task_config=WINDOWS,
    )
    write_checkpoint(checkpoint, directory / "export")
    return model, str(directory / "export"), BertTokenizer(vocabulary)


def _expected(model, tokenizer, pairs, **choice):
    """`tasks.squad`'s answers and their scores, through `squad_features` and `best_answers`."""
    examples = [SquadExample(str(i), q, c) for i, (q, c) in enumerate(pairs)]
    features = squad_features(examples, tokenizer, **WINDOWS)
    logits = model.predict(features.inputs(), verbose=0)
    chosen = best_answers(
        examples, features, logits["start_logits"], logits["end_logits"], **choice
    )
    scores = [
        entries[0]["start_logit"] + entries[0]["end_logit"] if entries else None
        for entries in (chosen.nbest[str(i)] for i in range(len(pairs)))
    ]
    return [chosen.answers[str(i)] for i in range(len(pairs))], scores, len(features)


def test_answers_scores_and_byte_offsets_are_the_squad_programs(question_answerer, tmp_path):
    model, checkpoint, tokenizer = question_answerer
    answers, scores, num_windows = _expected(model, tokenizer, PAIRS)
    assert num_windows > len(PAIRS) + 4 and len(set(answers)) > 3
    exported = export_saved_model(checkpoint, tmp_path / "squad")
    assert not unservable_ops(exported)
    assert inputs_without_a_shape_check(exported) == set()
    request = {"question": [q for q, _ in PAIRS], "context": [c for _, c in PAIRS]}
    served = serve(exported, {"serving_default": request})
    for path in ("eager", "session"):
        outputs = served[path]["serving_default"]
        assert outputs["answer"] == answers, path
        for (_, context), answer, start, end in zip(
            PAIRS, answers, outputs["start"], outputs["end"]
        ):
            assert context.encode()[start:end].decode() == answer
        for score, expected in zip(outputs["score"], scores):
            if expected is None:
                assert score == np.finfo("float32").min
            else:
                assert abs(score - expected) <= 1e-5 * max(1.0, abs(expected))


def test_bad_batches_get_a_clear_error_or_empty_answers(question_answerer, tmp_path):
    _, checkpoint, _ = question_answerer
    exported = export_saved_model(checkpoint, tmp_path / "squad")
    signature = tf.saved_model.load(exported).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="question and context must hold"):
        signature(question=tf.constant(["a", "b"]), context=tf.constant(["a"]))
    empty = signature(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
    assert empty["answer"].shape == (0,) and empty["score"].shape == (0,)
    invalid = signature(question=tf.constant(["plot ?"]), context=tf.constant([b"a \xff plot"]))
    assert invalid["end"].numpy()[0] <= len("a \ufffd plot".encode())
    # No token to answer from: nothing, at 0, even before the accents a span would take in.
    accents = signature(
        question=tf.constant(["plot ?"] * 2), context=tf.constant(["\u0301\u0301", ""])
    )
    assert accents["answer"].numpy().tolist() == [b"", b""]
    assert accents["start"].numpy().tolist() == accents["end"].numpy().tolist() == [0, 0]


def test_sequence_length_must_leave_room_for_context(question_answerer, tmp_path):
    _, checkpoint, _ = question_answerer
    with pytest.raises(ValueError, match="leaves no room for context"):
        export_saved_model(checkpoint, tmp_path / "squad", sequence_length=9)
    with pytest.raises(ValueError, match="null_score_diff_threshold applies to question"):
        export_saved_model(checkpoint, tmp_path / "squad", null_score_diff_threshold=1.0)
    assert not (tmp_path / "squad").exists()


def test_settings_the_model_does_not_record_are_taken_as_tasks_squad_takes_them(
    question_answerer, tmp_path
):
    model, _, tokenizer = question_answerer
    bare = model_checkpoint(  # records no windows, as a .keras file
        model,
        heads={"question_answering": "span_logits"},
        vocabulary_file=write_vocabulary(tmp_path),
    )
    write_checkpoint(bare, tmp_path / "bare")
    length = WINDOWS["max_seq_length"]
    with pytest.raises(ValueError, match=r"\(tasks.squad's default; the model records none\)"):
        export_saved_model(tmp_path / "bare", tmp_path / "squad", sequence_length=length)
    with pytest.raises(ValueError, match=r"max_query_length 200 tokens \(as given\)"):
        export_saved_model(
            tmp_path / "bare", tmp_path / "squad", sequence_length=length, max_query_length=200
        )
    choice = {"n_best_size": 3, "max_answer_length": 2}
    exported = export_saved_model(
        tmp_path / "bare",
        tmp_path / "squad",
        sequence_length=length,
        doc_stride=WINDOWS["doc_stride"],
        max_query_length=WINDOWS["max_query_length"],
        **choice,
    )
    answers, _, _ = _expected(model, tokenizer, PAIRS, **choice)
    assert answers != _expected(model, tokenizer, PAIRS)[0]  # the settings matter here
    signature = tf.saved_model.load(exported).signatures["serving_default"]
    served = signature(
        question=tf.constant([q for q, _ in PAIRS]), context=tf.constant([c for _, c in PAIRS])
    )
    assert [answer.decode() for answer in served["answer"].numpy()] == answers
    backbone = str(tmp_path / "backbone")
    BertBackbone(**CONFIG).save_to_preset(backbone, vocabulary_file=str(tmp_path / "vocab.txt"))
    with pytest.raises(ValueError, match="max_answer_length applies to question answerers only"):
        export_saved_model(backbone, tmp_path / "other", max_answer_length=2)


def _squad_2_expected(model, tokenizer, examples):
    """`tasks.squad`'s v2.0 answers and null odds, at a threshold that answers about half."""
    features = squad_features(examples, tokenizer, **WINDOWS)
    logits = model.predict(features.inputs(), verbose=0)

    def chosen(threshold):
        return best_answers(
            examples,
            features,
            logits["start_logits"],
            logits["end_logits"],
            version_2_with_negative=True,
            null_score_diff_threshold=threshold,
        )

    odds = sorted(odds for odds in chosen(0.0).null_odds.values() if odds < NO_NON_NULL_ODDS)
    threshold = (odds[len(odds) // 2 - 1] + odds[len(odds) // 2]) / 2
    expected = chosen(threshold)
    ids = [example.question_id for example in examples]
    answers = [expected.answers[question_id] for question_id in ids]
    assert 0 < answers.count("") < len(answers) - 1
    return answers, [expected.null_odds[question_id] for question_id in ids], threshold


def _assert_null_odds_equal(served, expected):
    for odds, want in zip(served, expected):
        if want == NO_NON_NULL_ODDS:
            assert odds == np.finfo("float32").max
        else:
            assert abs(odds - want) <= 1e-5 * max(1.0, abs(want))


def test_a_squad_2_export_answers_nothing_where_the_squad_program_does(question_answerer, tmp_path):
    model, checkpoint, tokenizer = question_answerer
    squad_2 = model_checkpoint(
        model,
        heads={"question_answering": "span_logits"},
        vocabulary_file=checkpoint + "/vocab.txt",
        task_config={**WINDOWS, "version_2_with_negative": True},
    )
    write_checkpoint(squad_2, tmp_path / "squad_2")
    examples = [SquadExample(str(i), q, c) for i, (q, c) in enumerate(PAIRS)]
    answers, null_odds, threshold = _squad_2_expected(model, tokenizer, examples)
    exported = export_saved_model(
        tmp_path / "squad_2", tmp_path / "squad", null_score_diff_threshold=threshold
    )
    assert not unservable_ops(exported)
    # Loaded here: the fresh-process and session paths of this graph are those of the test above.
    outputs = tf.saved_model.load(exported).signatures["serving_default"](
        question=tf.constant([e.question for e in examples]),
        context=tf.constant([e.context for e in examples]),
    )
    assert [answer.decode() for answer in outputs["answer"].numpy()] == answers
    _assert_null_odds_equal(outputs["null_odds"].numpy(), null_odds)
    for answer, start, end in zip(answers, outputs["start"].numpy(), outputs["end"].numpy()):
        assert answer or start == end == 0
