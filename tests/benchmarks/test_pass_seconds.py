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
    # SST-2's plan: 125 steps a pass, 19 intervals of 13 steps and one of 3, a second a step.
    records = [{"epoch": 13 * k / 125, "seconds": 13.0} for k in range(1, 20)]
    records.append({"epoch": 2.0, "seconds": 3.0})
    assert seconds_per_pass(records, 2) == pytest.approx([125.0, 125.0])
    # Steps past the passes asked for (a last call of several steps) count in the last pass.
    records[-1] = {"epoch": 254 / 125, "seconds": 7.0}
    assert seconds_per_pass(records, 2) == pytest.approx([125.0, 129.0])
