"""Step profiles: the profilers' traces summarised into each operation's time per step."""

import doctest
import glob

import pytest

from benchmarks import step_profiles


@pytest.mark.one_backend
def test_docstring_examples_run():
    result = doctest.testmod(step_profiles, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.one_backend
def test_jax_profile_lists_the_compiled_steps_operations(tmp_path):
    import jax
    import jax.numpy as jnp

    matrix = jnp.ones((512, 512))
    step = jax.jit(lambda x: jnp.tanh(x @ x).sum())
    step(matrix).block_until_ready()

    def profiled():
        step(matrix).block_until_ready()

    table = step_profiles.profile_table(profiled, 3, "jax", str(tmp_path))
    assert glob.glob(str(tmp_path / "**" / "perfetto_trace.json.gz"), recursive=True)
    lines = table.splitlines()
    assert lines[0].split() == ["ms/step", "share", "operation"]
    rows = [line.split(maxsplit=2) for line in lines[1:-1]]
    assert rows, table
    total = lines[-1].split(maxsplit=2)
    assert total[2] == "all operations"
    assert float(total[0]) >= sum(float(value) for value, _, _ in rows) - 0.1 * len(rows)
    assert all("::" not in name for _, _, name in rows)  # the runtime's own events left out
    milliseconds = [float(value) for value, _, _ in rows]
    assert milliseconds == sorted(milliseconds, reverse=True) and milliseconds[0] > 0


@pytest.mark.one_backend
def test_torch_profile_counts_each_operations_own_time(tmp_path):
    import torch

    weight = torch.ones(256, 256)

    def step():
        torch.relu(weight @ weight)

    table = step_profiles.profile_table(step, 4, "torch", str(tmp_path))
    assert (tmp_path / "torch_trace.json").is_file()
    names = [line.split(maxsplit=2)[2] for line in table.splitlines()[1:-1]]
    assert "aten::mm" in names and "aten::relu" in names
    assert "aten::matmul" not in names[:1]  # self time: the caller does not outrank its matmul


@pytest.mark.one_backend
def test_a_call_of_several_steps_is_shown_per_step(tmp_path, monkeypatch):
    # The same profile read as 4 calls of one step and of two steps: timings of two
    # separate profiles would differ by the machine's noise.
    calls = []

    def profiled_seconds(step, steps, directory):
        calls.append(steps)
        return {"aten::mm": 0.008}

    def per_step_milliseconds(table):
        return float(table.splitlines()[-1].split()[0])

    monkeypatch.setattr(step_profiles, "_torch_operation_seconds", profiled_seconds)
    one = step_profiles.profile_table(lambda: None, 4, "torch", str(tmp_path))
    halved = step_profiles.profile_table(lambda: None, 4, "torch", str(tmp_path), steps_per_call=2)
    assert calls == [4, 4]  # the profiler sees calls, not steps
    assert per_step_milliseconds(one) == 2.0
    assert per_step_milliseconds(halved) == 1.0


def test_unknown_engine_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'tensorflow'"):
        step_profiles.profile_table(lambda: None, 1, "tensorflow", str(tmp_path))
