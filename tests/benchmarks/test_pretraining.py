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
