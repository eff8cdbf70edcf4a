"""benchmarks.pretraining's command line."""

import pytest

from tests.programs import program

_run = program("benchmarks.pretraining")


@pytest.mark.one_backend
def test_more_predictions_than_the_shortest_sequence_holds_is_refused_by_flag():
    completed = _run("--sequence_length=32", "--predictions=15")
    assert completed.returncode == 1
    assert (
        "--predictions is 15, but the shortest sequence of --sequence_length=32 has 14 "
        "positions to mask." in completed.stderr
    )


@pytest.mark.one_backend
def test_an_unknown_implementation_to_skip_is_refused_by_flag():
    completed = _run("--skip=bogus")
    assert completed.returncode == 1
    assert (
        "flag --skip=['bogus']: unknown bogus; known: keras_hub, transformers" in completed.stderr
    )


@pytest.mark.one_backend
def test_an_unknown_preset_is_refused_by_flag():
    completed = _run("--preset=bert_nano", "--sequence_length=16", "--predictions=2")
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert "--preset=bert_nano: Unknown preset 'bert_nano'. Known presets: [" in completed.stderr


@pytest.mark.one_backend
def test_a_sequence_longer_than_the_presets_positions_is_refused_by_flag():
    completed = _run("--preset=bert_tiny", "--sequence_length=1024", "--predictions=2")
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert (
        "--sequence_length is 1024, but --preset=bert_tiny has 512 positions." in completed.stderr
    )


@pytest.mark.one_backend
def test_a_sequence_with_no_position_to_mask_says_none_not_a_negative_count():
    completed = _run("--sequence_length=2", "--predictions=1")
    assert completed.returncode == 1
    assert (
        "--predictions is 1, but the shortest sequence of --sequence_length=2 has 0 "
        "positions to mask." in completed.stderr
    )
