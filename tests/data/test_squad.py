"""SQuAD files → examples → windows: positions, offsets and max context as the original run_squad.py."""

import json
import re

import numpy as np
import pytest

from bert_keras.data.squad import SquadAnswer
from bert_keras.data.squad import SquadExample
from bert_keras.data.squad import read_squad
from bert_keras.data.squad import squad_features
from bert_keras.data.squad import window_max_context
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer

# Accents (precomposed and combining), quotes and punctuation touching
# answers, runs of spaces and a tab, CJK ideographs and kana, a word split
# into WordPiece pieces.
CONTEXTS = [
    "The café «Zoë» opened in 1895, near the Seine.  Its owner,   Renée Dupont,\tsold crêpes!",
    "東京は日本の首都です。Tokyo is big; Chloe\u0301's (1901–1950) shop is there.",
]
ANSWERS = [
    ("q_quoted", 0, "Zoë"),
    ("q_comma", 0, "1895"),
    ("q_spaces", 0, "Renée Dupont"),
    ("q_pieces", 0, "crêpes"),
    ("q_sentence", 0, "near the Seine"),
    ("q_cjk", 1, "日本"),
    ("q_kana", 1, "首都です"),
    ("q_combining", 1, "Chloe\u0301"),
    ("q_parenthesised", 1, "1901"),
]
LONG_CONTEXT = " ".join(f"t{index}" for index in range(30))
QUESTION = "where is it?"


def _vocabulary():
    words = (
        BertTokenizer(list(SPECIAL_TOKENS) + ["x"])
        .split_words(CONTEXTS + [LONG_CONTEXT, QUESTION])
        .flat_values.numpy()
    )
    # "crepes" becomes two pieces, so an answer ends inside a word's pieces.
    words = sorted({word.decode() for word in words} - {"crepes"}) + ["crep", "##es"]
    return list(SPECIAL_TOKENS) + words


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(_vocabulary())


def _squad_json(paragraphs):
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def _qa(question_id, context, answer_text, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer_text, start + 1)
    return {
        "id": question_id,
        "question": QUESTION,
        "answers": [{"text": answer_text, "answer_start": start}],
    }


def _write(tmp_path, value, name="squad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return str(path)


def _hand_made_file(tmp_path):
    paragraphs = [
        {
            "context": context,
            "qas": [_qa(qid, context, text) for qid, index, text in ANSWERS if index == number],
        }
        for number, context in enumerate(CONTEXTS)
    ]
    return _write(tmp_path, _squad_json(paragraphs))


def _window_text(features, examples, window):
    """The context text of a window's labelled answer, by offsets alone."""
    start, end = features.start_positions[window], features.end_positions[window]
    context = examples[features.example_index[window]].context
    return context[features.token_starts[window, start] : features.token_ends[window, end]]


def test_reads_every_question_with_its_answer(tmp_path):
    examples = read_squad(_hand_made_file(tmp_path), is_training=True)
    assert [example.question_id for example in examples] == [qid for qid, _, _ in ANSWERS]
    for example, (_, index, text) in zip(examples, ANSWERS):
        assert example.context == CONTEXTS[index] and example.answers[0].text == text
        assert not example.is_impossible


@pytest.mark.parametrize("max_seq_length, doc_stride", [(384, 128), (24, 5), (16, 3)])
def test_offsets_give_back_every_training_answer_exactly(
    tmp_path, tokenizer, max_seq_length, doc_stride
):
    examples = read_squad(_hand_made_file(tmp_path), is_training=True)
    features = squad_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length=6, is_training=True
    )
    found = set()
    for window in range(len(features)):
        if features.start_positions[window] == 0:
            continue
        example = examples[features.example_index[window]]
        assert _window_text(features, examples, window) == example.answers[0].text
        found.add(example.question_id)
    # Every answer lies wholly inside at least one window.
    assert found == {qid for qid, _, _ in ANSWERS}


def test_packing_is_cls_question_sep_window_sep(tokenizer):
    example = SquadExample("q", QUESTION, CONTEXTS[0])
    features = squad_features([example], tokenizer, max_seq_length=64, max_query_length=8)
    question = tokenizer.tokenize(QUESTION).numpy().tolist()
    context = tokenizer.tokenize(CONTEXTS[0]).numpy().tolist()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    packed = [cls, *question, sep, *context, sep]
    assert features.token_ids[0, : len(packed)].tolist() == packed
    assert (features.token_ids[0, len(packed) :] == tokenizer.pad_token_id).all()
    assert features.segment_ids[0].tolist() == (
        [0] * (len(question) + 2) + [1] * (len(context) + 1) + [0] * (64 - len(packed))
    )
    assert features.padding_mask[0].sum() == len(packed)
    # Offsets only on context tokens.
    in_context = features.token_starts[0] >= 0
    assert np.flatnonzero(in_context).tolist() == list(range(len(question) + 2, len(packed) - 1))


def test_windows_slide_by_doc_stride_and_label_answers_inside_them(tokenizer):
    # "where is it ?" is 4 tokens: windows of 16 - 4 - 3 = 9 of the 30 context
    # tokens, starting every 4 tokens until one reaches the end: 0, 4, ..., 24.
    answer = SquadAnswer("t8 t9", LONG_CONTEXT.index("t8 t9"))
    example = SquadExample("q", QUESTION, LONG_CONTEXT, (answer,))
    features = squad_features(
        [example], tokenizer, max_seq_length=16, doc_stride=4, max_query_length=8, is_training=True
    )
    doc_offset = 6  # [CLS] where is it ? [SEP]
    starts = (0, 4, 8, 12, 16, 20, 24)
    for row, start in zip(features.token_ids, starts):
        expected = [f"t{i}" for i in range(start, min(start + 9, 30))] + ["[SEP]"]
        window = row[doc_offset : doc_offset + len(expected)]
        assert [tokenizer.id_to_token(int(i)) for i in window] == expected
    assert len(features) == len(starts) and features.padding_mask[-1].sum() == doc_offset + 7
    # t8 t9 is cut by the first window's border (t8 is its last token), whole
    # in the second and third, absent later.
    assert features.start_positions.tolist() == [0, doc_offset + 4, doc_offset + 0, 0, 0, 0, 0]
    assert features.end_positions.tolist() == [0, doc_offset + 5, doc_offset + 1, 0, 0, 0, 0]
    assert features.example_index.tolist() == [0] * 7


def test_each_token_has_max_context_in_exactly_one_window(tokenizer):
    example = SquadExample("q", QUESTION, LONG_CONTEXT)
    features = squad_features(
        [example], tokenizer, max_seq_length=16, doc_stride=4, max_query_length=8
    )
    doc_offset = 6
    owners = {}
    for window in range(len(features)):
        for position in np.flatnonzero(features.token_is_max_context[window]):
            token = int(features.token_starts[window, position])
            assert token not in owners
            owners[token] = (window, position - doc_offset)
    assert sorted(owners) == [match.start() for match in re.finditer(r"\S+", LONG_CONTEXT)]
    # t9 (windows 1 and 2 hold it): 5 tokens left and 3 right in window 1
    # beat 1 left and 7 right in window 2.
    assert owners[LONG_CONTEXT.index("t9 ")] == (1, 5)
    # t6: window 0 has 6 left and 2 right, window 1 2 and 6: a tie goes to the first.
    assert owners[LONG_CONTEXT.index("t6 ")] == (0, 6)


def _owning_window(spans, position):
    """The max-context rule as the original states it, one token at a time.

    Among the windows (start, length) holding `position`, the owner has the
    most context on its shorter side, plus 0.01 x its length; the first wins a tie.
    """
    scores = [
        (min(position - start, start + length - 1 - position) + 0.01 * length, -index)
        for index, (start, length) in enumerate(spans)
        if start <= position < start + length
    ]
    return -max(scores)[1]


@pytest.mark.parametrize(
    "spans",
    [
        [(0, 9), (4, 9), (8, 9), (12, 9), (16, 9), (20, 9), (24, 6)],  # doc_stride 4, short last
        [(0, 5), (5, 5), (10, 3)],  # no overlap
        [(0, 7), (1, 7), (2, 7), (3, 5)],  # doc_stride 1: many ties
        [(0, 3)],
    ],
)
def test_window_max_context_is_the_originals_check_for_every_token(spans):
    for span_index, (start, length) in enumerate(spans):
        expected = [
            _owning_window(spans, position) == span_index
            for position in range(start, start + length)
        ]
        assert window_max_context(spans, span_index).tolist() == expected


def test_long_questions_keep_their_first_max_query_length_tokens(tokenizer):
    example = SquadExample("q", LONG_CONTEXT, "t1 t2")
    features = squad_features([example], tokenizer, max_seq_length=16, max_query_length=5)
    assert [tokenizer.id_to_token(int(i)) for i in features.token_ids[0, :7]] == [
        "[CLS]",
        "t0",
        "t1",
        "t2",
        "t3",
        "t4",
        "[SEP]",
    ]


def test_version_2_impossible_questions_point_at_cls(tmp_path, tokenizer):
    context = CONTEXTS[0]
    impossible = {
        "id": "q_none",
        "question": QUESTION,
        "answers": [],
        "is_impossible": True,
        "plausible_answers": [{"text": "Zoë", "answer_start": context.index("Zoë")}],
    }
    path = _write(
        tmp_path,
        _squad_json([{"context": context, "qas": [impossible, _qa("q_some", context, "Seine")]}]),
    )
    examples = read_squad(path, version_2_with_negative=True, is_training=True)
    assert examples[0].is_impossible and examples[0].answers == ()
    features = squad_features(
        examples, tokenizer, max_seq_length=16, doc_stride=3, max_query_length=6, is_training=True
    )
    impossible_windows = features.example_index == 0
    assert impossible_windows.sum() > 1
    assert (features.start_positions[impossible_windows] == 0).all()
    assert (features.end_positions[impossible_windows] == 0).all()
    assert (features.start_positions[~impossible_windows] > 0).any()


def test_prediction_files_need_no_answers(tmp_path, tokenizer):
    path = _write(
        tmp_path,
        _squad_json([{"context": CONTEXTS[0], "qas": [{"id": "q_test", "question": QUESTION}]}]),
    )
    (example,) = read_squad(path)
    assert example.answers == ()
    features = squad_features([example], tokenizer, max_seq_length=64, max_query_length=8)
    assert features.start_positions.tolist() == [0]


def test_an_empty_context_still_gets_a_window(tokenizer):
    features = squad_features([SquadExample("q", QUESTION, "  ")], tokenizer, 16, 4, 6)
    assert len(features) == 1 and not features.token_is_max_context.any()


def _paragraph(qa, context="In Paris."):
    return _squad_json([{"context": context, "qas": [qa]}])


@pytest.mark.parametrize(
    "content, is_training, message",
    [
        ("{not json", False, "is not valid JSON"),
        ({"version": "1.1"}, False, 'has no "data" list'),
        (_squad_json([{"qas": []}]), False, 'data[0].paragraphs[0] has no "context"'),
        (_paragraph({"question": "Where?", "answers": []}), False, 'a question without an "id"'),
        (
            _paragraph({"id": 5, "question": "Where?", "answers": []}),
            False,
            "question id must be a string, got int 5",
        ),
        (_paragraph({"id": "q7", "answers": []}), False, "question 'q7' has no \"question\""),
        (
            _paragraph({"id": "q7", "question": "Where?", "answers": [{"text": "Paris"}]}),
            True,
            "question 'q7': answer {'text': 'Paris'} needs",
        ),
        (
            _paragraph({"id": "q7", "question": "Where?", "answers": [], "is_impossible": True}),
            False,
            "question 'q7' is marked is_impossible",
        ),
        (
            _paragraph({"id": "q7", "question": "Where?", "answers": [], "is_impossible": "false"}),
            False,
            "question 'q7': is_impossible must be true or false, got str 'false'",
        ),
        (
            _paragraph({"id": "q7", "question": "Where?", "answers": []}),
            True,
            "question 'q7' has no answer; every training question needs one",
        ),
        (
            _squad_json(
                [{"context": "a", "qas": [{"id": "q7", "question": "?", "answers": []}] * 2}]
            ),
            False,
            "question id 'q7' is repeated",
        ),
        ({"data": []}, False, "holds no questions"),
        ({"data": [{"title": "t"}, {"paragraphs": []}]}, True, 'has no "paragraphs" list'),
        ({"data": [{"title": "t", "paragraphs": []}]}, True, "holds no questions"),
        (_squad_json([{"context": "a", "qas": []}]), False, "holds no questions"),
    ],
)
def test_malformed_files_are_named_with_the_question(tmp_path, content, is_training, message):
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError) as error:
        read_squad(str(path), version_2_with_negative="true" in message, is_training=is_training)
    assert message in str(error.value) and str(path) in str(error.value)


def _bad_start_file(tmp_path):
    """q1's answer is not in the words at its answer_start (nor at a negative one); q2 is fine."""
    qas = [
        {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 13}]},
        {"id": "q2", "question": "Who?", "answers": [{"text": "Ada", "answer_start": 13}]},
        {"id": "q3", "question": "Where?", "answers": [{"text": "Paris", "answer_start": -23}]},
    ]
    return _write(tmp_path, _paragraph_of(qas))


def _paragraph_of(qas, context="In Paris, by Ada Lovelace."):
    return _squad_json([{"context": context, "qas": qas}])


def test_training_skips_an_answer_not_at_its_answer_start_as_the_original(tmp_path, caplog):
    path = _bad_start_file(tmp_path)
    examples = read_squad(path, is_training=True)
    assert [example.question_id for example in examples] == ["q2"]
    assert "answer 'Paris' is not in the words at answer_start 13" in caplog.text
    assert "question 'q1'" in caplog.text and "question 'q3'" in caplog.text
    assert "skipped 2 training questions" in caplog.text


@pytest.mark.parametrize(
    "context, text, start, kept",
    [
        ("In Paris, by Ada Lovelace.", "Paris", 1, ("Paris", 3)),  # "In Paris," holds it
        ("In Paris, by Ada Lovelace.", "Paris", 5, ("Paris", 3)),
        ("In Paris, by Ada Lovelace.", "Ada  Lovelace", 12, ("Ada Lovelace", 13)),
        ("In Paris, by Ada Lovelace.", "Ada", 9, None),  # "by": its words are "Paris, by"
        ("In Paris, by Ada Lovelace.", "Lovelace.", 20, None),  # past the context's end
    ],
)
def test_training_keeps_an_answer_off_its_start_within_its_words_as_the_original(
    tmp_path, context, text, start, kept
):
    """run_squad.py joins the words at the answer's first and last characters and finds it there."""
    qas = [{"id": "q1", "question": "Who?", "answers": [{"text": text, "answer_start": start}]}]
    qas.append({"id": "q2", "question": "Who?", "answers": [{"text": "Ada", "answer_start": 13}]})
    examples = read_squad(_write(tmp_path, _paragraph_of(qas, context)), is_training=True)
    answers = [(example.answers[0].text, example.answers[0].start) for example in examples]
    assert answers == ([kept] if kept else []) + [("Ada", 13)]


def test_a_training_file_of_only_misplaced_answers_holds_no_questions(tmp_path):
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 13}]}
    path = _write(tmp_path, _paragraph_of([qa]))
    with pytest.raises(ValueError, match="holds no questions to train on: all 1 are skipped"):
        read_squad(path, is_training=True)


def test_prediction_reads_answer_texts_without_their_answer_start(tmp_path):
    qas = [{"id": "q4", "question": "Who?", "answers": [{"text": "Ada"}, {"text": "Lovelace"}]}]
    examples = read_squad(_bad_start_file(tmp_path))
    examples += read_squad(_write(tmp_path, _paragraph_of(qas), "no_start.json"))
    assert [[answer.text for answer in example.answers] for example in examples] == [
        ["Paris"],
        ["Ada"],
        ["Paris"],
        ["Ada", "Lovelace"],
    ]
    assert examples[-1].answers[0].start is None


def test_a_bool_answer_start_is_not_read_as_an_offset(tmp_path):
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": True}]}
    path = _write(tmp_path, _paragraph_of([qa]))
    with pytest.raises(ValueError, match='needs a "text" string and an "answer_start" int'):
        read_squad(path, is_training=True)
    assert read_squad(path)[0].answers[0].start is None


def test_lengths_that_leave_no_context_are_refused(tokenizer):
    with pytest.raises(ValueError, match="max_seq_length 10 leaves no room"):
        squad_features([], tokenizer, max_seq_length=10, max_query_length=7)


_QA = {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 3}]}


@pytest.mark.parametrize(
    "data, message",
    [
        ([[]], r"data\[0\]: an article must be a JSON object, got list"),
        (
            [{"paragraphs": {"context": "x"}}],
            r'data\[0\]: its "paragraphs" must be a JSON list, got dict',
        ),
        (
            [{"paragraphs": ["In Paris."]}],
            r"paragraphs\[0\]: a paragraph must be a JSON object, got str",
        ),
        (
            [{"paragraphs": [{"context": "In Paris.", "qas": ["q1"]}]}],
            r"qas\[0\]: a question must be",
        ),
        (
            [
                {
                    "paragraphs": [
                        {
                            "context": "In Paris.",
                            "qas": [dict(_QA, answers={"text": ["Paris"], "answer_start": [3]})],
                        }
                    ]
                }
            ],
            r"question 'q1': its \"answers\" must be a JSON list, got dict \(Hugging Face datasets'",
        ),
        (
            [{"paragraphs": [{"context": "In Paris.", "qas": [dict(_QA, answers=["Paris"])]}]}],
            r"question 'q1': answer 'Paris' must be a JSON object",
        ),
    ],
)
def test_entries_of_the_wrong_kind_are_named(tmp_path, data, message):
    path = _write(tmp_path, {"data": data})
    for is_training in (False, True):
        with pytest.raises(ValueError, match=re.escape(path) + ", (data.*)?" + message):
            read_squad(path, is_training=is_training)


@pytest.mark.parametrize(
    "data, message",
    [
        (
            [{"paragraph": [{"context": "In Paris.", "qas": [_QA]}]}],
            r'data\[1\] has no "paragraphs" list \(its keys: \'paragraph\'\)',
        ),
        (
            [{"paragraphs": [{"context": "In Paris.", "qa": [_QA]}]}],
            r'data\[1\]\.paragraphs\[0\] has no "qas" list \(its keys: \'context\', \'qa\'\)',
        ),
    ],
    ids=["paragraphs misspelled", "qas misspelled"],
)
def test_a_missing_list_of_paragraphs_or_questions_is_named_not_skipped(tmp_path, data, message):
    # Beside a good article: its questions would otherwise be silently left out.
    good = {"paragraphs": [{"context": "In Paris.", "qas": [dict(_QA, id="q0")]}]}
    path = _write(tmp_path, {"data": [good, *data]})
    for is_training in (False, True):
        with pytest.raises(ValueError, match=re.escape(path) + ", " + message):
            read_squad(path, is_training=is_training)


def test_an_impossible_question_that_lists_answers_is_warned_of(tmp_path, caplog):
    qa = dict(_QA, is_impossible=True)
    path = _write(tmp_path, {"data": [{"paragraphs": [{"context": "In Paris.", "qas": [qa]}]}]})
    (example,) = read_squad(path, version_2_with_negative=True)
    assert example.is_impossible and example.answers == ()
    assert f"{path}, data[0].paragraphs[0], question 'q1' is marked is_impossible yet lists" in (
        caplog.text
    )


def test_a_byte_order_mark_before_the_json_is_read_past(tmp_path):
    path = tmp_path / "dev.json"
    text = json.dumps({"data": [{"paragraphs": [{"context": "In Paris.", "qas": [_QA]}]}]})
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    (example,) = read_squad(str(path))
    assert (example.question_id, example.answers) == ("q1", (SquadAnswer("Paris", 3),))


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "dev.json"
    path.write_bytes(b'{"data": [\n{"paragraphs": [{"context": "Caf\xe9"}]}]}')
    with pytest.raises(ValueError, match=f"{path}:2: .* is not UTF-8; save the file as UTF-8"):
        read_squad(str(path))


@pytest.mark.parametrize("field", ["context", "question", "answer"])
def test_half_a_surrogate_pair_is_named_where_it_is(tmp_path, field):
    """JSON may escape half of an emoji's pair ("\\ud83d"); it is not text, and TensorFlow refuses it."""
    texts = {"context": "In Paris.", "question": "Where?", "answer": "Paris"}
    texts[field] = texts[field].replace("P", "P\ud83d").replace("?", "?\ud83d")
    qa = {"id": "q1", "question": texts["question"]}
    qa["answers"] = [{"text": texts["answer"], "answer_start": 3}]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(_paragraph_of([qa], texts["context"])))  # "\ud83d" escaped
    with pytest.raises(ValueError, match=rf"its {field} holds '\\ud83d' at character \d+, half of"):
        read_squad(str(path))


def test_a_blank_training_answer_or_one_of_no_tokens_is_skipped_not_fatal(
    tmp_path, tokenizer, caplog
):
    """run_squad.py trains on both; here they are skipped, with a warning, as misplaced answers are."""
    context = CONTEXTS[0] + "\u200b"
    qas = [
        {"id": "blank", "question": "?", "answers": [{"text": " ", "answer_start": 0}]},
        {"id": "dropped", "question": "?", "answers": [{"text": "\u200b", "answer_start": 0}]},
        {"id": "fine", "question": "?", "answers": [{"text": context[:5], "answer_start": 0}]},
    ]
    qas[1]["answers"][0]["answer_start"] = len(context) - 1
    examples = read_squad(_write(tmp_path, _paragraph_of(qas, context)), is_training=True)
    assert [example.question_id for example in examples] == ["dropped", "fine"]
    assert "answer ' ' at 0 is blank; skipping the question" in caplog.text
    features = squad_features(examples, tokenizer, 64, 32, 8, is_training=True)
    assert set(features.example_index.tolist()) == {1}
    assert "Question 'dropped': answer '\\u200b' at character" in caplog.text
