"""Interaction logs: the three formats, time order, frequency ids, leave-one-out, bad lines."""

import csv

import numpy as np
import pytest

from bert_keras.data.interactions import Interactions
from bert_keras.data.interactions import LeaveOneOutSplit
from bert_keras.data.interactions import UserSequences
from bert_keras.data.interactions import load_item_ids
from bert_keras.data.interactions import read_interactions

# The same six interactions in each format: user 1 rated b, then a and c at
# the same second (file order kept), user 2 rated a then c, user 3 only a.
MOVIELENS = "1::a::5::20\n1::c::3::30\n2::a::4::10\n1::b::1::10\n2::c::2::15\n3::a::5::1\n"
RECBOLE = (
    "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
    "1\ta\t5\t20\n1\tc\t3\t30\n2\ta\t4\t10\n1\tb\t1\t10\n2\tc\t2\t15\n3\ta\t5\t1\n"
)
CSV = "timestamp,item,user\n20,a,1\n30,c,1\n10,a,2\n10,b,1\n15,c,2\n1,a,3\n"


@pytest.mark.parametrize(
    "input_format, text", [("movielens", MOVIELENS), ("recbole", RECBOLE), ("csv", CSV)]
)
def test_every_format_reads_the_same_log(tmp_path, input_format, text):
    path = tmp_path / "log"
    path.write_text(text)
    log = read_interactions(path, input_format)
    assert log.users == ["1", "1", "2", "1", "2", "3"]
    assert log.items == ["a", "c", "a", "b", "c", "a"]
    np.testing.assert_array_equal(log.timestamps, [20, 30, 10, 10, 15, 1])


def test_sequences_are_in_time_order_with_ids_by_frequency():
    log = Interactions(
        ["1", "1", "2", "1", "2", "3"],
        ["a", "c", "a", "b", "c", "a"],
        np.array([20, 30, 10, 10, 15, 1.0]),
    )
    sequences = UserSequences.from_interactions(log, min_interactions=2)
    # a occurs twice among the kept users, c twice, b once; a is named first.
    assert sequences.item_ids == ["a", "c", "b"]
    assert sequences.user_ids == ["2", "1"]  # in order of first interaction
    assert [s.tolist() for s in sequences.sequences] == [[1, 2], [3, 1, 2]]
    assert sequences.dropped_users == 1


def test_ties_keep_file_order():
    log = Interactions(["u"] * 4, ["x", "y", "z", "w"], np.array([5.0, 5.0, 5.0, 1.0]))
    sequences = UserSequences.from_interactions(log, min_interactions=1)
    ordered = [sequences.item_ids[i - 1] for i in sequences.sequences[0]]
    assert ordered == ["w", "x", "y", "z"]


def test_item_ids_round_trip(tmp_path):
    sequences = UserSequences([np.array([1, 2])], ["u"], ["é", "b"])
    sequences.save_item_ids(tmp_path / "items.json")
    assert load_item_ids(tmp_path / "items.json") == ["é", "b"]


def test_leave_one_out_keeps_the_last_two_items_out_of_training():
    split = LeaveOneOutSplit.from_sequences([np.arange(1, 8), np.array([9, 8, 7])])
    assert [s.tolist() for s in split.train] == [[1, 2, 3, 4, 5], [9]]
    assert split.validation_targets.tolist() == [6, 8]
    assert split.test_targets.tolist() == [7, 7]
    assert [h.tolist() for h in split.test_histories] == [[1, 2, 3, 4, 5, 6], [9, 8]]


def test_leave_one_out_refuses_short_sequences():
    with pytest.raises(ValueError, match="at least 3 items.*index 1"):
        LeaveOneOutSplit.from_sequences([np.arange(1, 5), np.array([1, 2])])


@pytest.mark.parametrize(
    "input_format, text, message",
    [
        (
            "movielens",
            "1::a::5::20\n1::a::5\n",
            r"log:2: expected UserID::MovieID::Rating::Timestamp",
        ),
        ("movielens", "1::a::5::noon\n", r"log:1: the timestamp 'noon' is not a number"),
        (
            "recbole",
            "user_id:token\titem_id:token\ttimestamp:float\n1\ta\t3\n1\tb\n",
            r"log:3: expected at least 3 fields",
        ),
        (
            "recbole",
            "user_id:token\tmovie:token\ttimestamp:float\n",
            r"log:1: the header .* names no item column",
        ),
        ("csv", "user,item,timestamp\n1,a,2\n,b,3\n", r"log:3: empty user or item id"),
        ("csv", "user,item,timestamp\n,b,3\n", r"log:2: empty user or item id"),
        ("csv", "user,item,timestamp\n1,a,2\n1,b,nan\n", r"log:3: .*'nan' is not a finite number"),
        ("movielens", "1::a::5::2\n1::b::5::inf\n", r"log:2: .*'inf' is not a finite number"),
        ("csv", "user,item,timestamp\n", r"log holds no interactions"),
        (
            "recbole",
            "user_id:token item_id:token timestamp:float\n1 a 3\n",
            r"log:1: the header .* has no tabs; RecBole's .inter files are tab-separated",
        ),
        ("parquet", "", r"Unknown input_format 'parquet'"),
    ],
)
def test_bad_input_names_the_file_and_line(tmp_path, input_format, text, message):
    path = tmp_path / "log"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_interactions(path, input_format)


def test_a_line_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"user,item,timestamp\n1,a,2\n1,caf\xe9,3\n")
    with pytest.raises(ValueError, match=r"log:3: b'1,caf\\xe9,3' is not UTF-8"):
        read_interactions(path, "csv")


@pytest.mark.parametrize(
    "input_format, header",
    [("csv", "user,item,timestamp"), ("recbole", "user_id:token\titem_id:token\ttimestamp:float")],
)
def test_ids_past_csv_s_default_field_limit_are_read(tmp_path, input_format, header):
    csv.field_size_limit(131_072)  # csv's default, as a process that imported no other reader
    long_id = "i" * 200_000
    separator = "," if input_format == "csv" else "\t"
    rows = [("1", long_id, "2"), ("1", "b", "3")]
    path = tmp_path / "log"
    path.write_text("\n".join([header] + [separator.join(row) for row in rows]) + "\n")
    assert read_interactions(path, input_format).items == [long_id, "b"]


def test_a_binary_file_is_named_with_a_short_excerpt(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"user,item,timestamp\n" + b"x" * 5000 + b"\xe9" + b"y" * 5000 + b"\n")
    with pytest.raises(ValueError) as raised:
        read_interactions(path, "csv")
    assert str(raised.value).startswith(f"{path}:2: b'xxxxxxxxxxxxxxxxxxxx\\xe9yyy")
    assert "(from byte 4981 of 10001) is not UTF-8" in str(raised.value)
    assert len(str(raised.value)) < 200 + len(str(path))


def test_a_stray_quote_is_named_at_the_line_it_opens(tmp_path):
    path = tmp_path / "log"
    path.write_text('user,item,timestamp\n1,a,2\n1,"b,3\n2,c,4\n2,d,5\n')
    with pytest.raises(ValueError, match=r"log:3: expected at least 3 fields, got 2"):
        read_interactions(path, "csv")


def test_integer_timestamps_order_exactly_at_nanosecond_scale(tmp_path):
    path = tmp_path / "log"
    path.write_text(
        "user,item,timestamp\n"
        "u,b,1700000000000000001\nu,a,1700000000000000000\nu,c,1700000000000000300\n"
    )
    log = read_interactions(path, "csv")
    assert log.timestamps.dtype == np.int64
    sequences = UserSequences.from_interactions(log, min_interactions=1)
    assert [sequences.item_ids[i - 1] for i in sequences.sequences[0]] == ["a", "b", "c"]
    with open(path, "a") as file:  # one fractional timestamp, another user's, anywhere in the log
        file.write("v,d,0.5\n")
    sequences = UserSequences.from_interactions(read_interactions(path, "csv"), min_interactions=1)
    user = sequences.user_ids.index("u")
    assert [sequences.item_ids[i - 1] for i in sequences.sequences[user]] == ["a", "b", "c"]


def test_spreadsheet_and_movielens_csv_headers_are_read(tmp_path):
    path = tmp_path / "ratings.csv"
    # A byte-order mark, and MovieLens-20M's own column names.
    path.write_bytes("userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n".encode("utf-8-sig"))
    log = read_interactions(path, "csv")
    assert (log.users, log.items, log.timestamps.tolist()) == (["1"], ["31"], [1260759144])


def test_a_trained_models_ids_renumber_another_log():
    sequences = UserSequences([np.array([1, 2, 1])], ["u"], ["a", "b"])
    renumbered = sequences.renumbered(["c", "b", "a"])
    assert renumbered.item_ids == ["c", "b", "a"] and renumbered.sequences[0].tolist() == [3, 2, 3]
    with pytest.raises(ValueError, match=r"1 items that the saved ids lacks \(\['b'\]\)"):
        sequences.renumbered(["a"], source="the saved ids")


def test_item_ids_saved_for_one_model_are_refused_for_another(tmp_path):
    (tmp_path / "model.keras").write_bytes(b"model one")
    UserSequences([], [], ["a"]).save_item_ids(tmp_path / "ids.json", tmp_path / "model.keras")
    assert load_item_ids(tmp_path / "ids.json", tmp_path / "model.keras") == ["a"]
    (tmp_path / "model.keras").write_bytes(b"model two")
    with pytest.raises(ValueError, match="holds the item ids of another model"):
        load_item_ids(tmp_path / "ids.json", tmp_path / "model.keras")
