"""Seconds per pass over the data, from a fine-tuning program's history."""

import doctest

import pytest

from benchmarks import sst2_finetuning
from benchmarks.sst2_finetuning import seconds_per_pass


@pytest.mark.one_backend
def test_docstring_examples_run():
    result = doctest.testmod(sst2_finetuning)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.one_backend
def test_intervals_across_a_pass_boundary_are_shared_by_their_steps():
    # SST-2's plan: 125 steps a pass, intervals of 13 steps, one second a step.
    records = [{"epoch": 13 * k / 125, "seconds": 13.0} for k in range(1, 21)]
    passes = seconds_per_pass(records, 2)
    # Each pass has its own 125 steps; the 10 steps run past two passes count in the last.
    assert passes == pytest.approx([125.0, 135.0])
