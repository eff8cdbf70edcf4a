"""benchmarks.pretraining's command line."""

import pytest

from tests.programs import program

_run = program("benchmarks.pretraining")


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--sequence_length=32", "--predictions=15"],
            "--predictions is 15, but the shortest sequence of --sequence_length=32 has 14 "
            "positions to mask.",
        ),
        (
            ["--sequence_length=2", "--predictions=1"],  # none, not a negative count
            "--predictions is 1, but the shortest sequence of --sequence_length=2 has 0 "
            "positions to mask.",
        ),
        (["--skip=bogus"], "flag --skip=['bogus']: unknown bogus; known: keras_hub, transformers"),
        (
            ["--preset=bert_nano", "--sequence_length=16", "--predictions=2"],
            "--preset=bert_nano: Unknown preset 'bert_nano'. Known presets: [",
        ),
        (
            ["--preset=bert_tiny", "--sequence_length=1024", "--predictions=2"],
            "--sequence_length is 1024, but --preset=bert_tiny has 512 positions.",
        ),
    ],
    ids=["too many predictions", "no position", "unknown skip", "unknown preset", "too long"],
)
def test_bad_flags_are_refused_by_name_without_a_traceback(flags, message):
    completed = _run(*flags)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert message in completed.stderr
