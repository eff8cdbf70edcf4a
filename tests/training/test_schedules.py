import numpy as np
import pytest
from keras import ops

from bert_keras.training.schedules import LinearWarmupLinearDecay


def test_schedule_warms_up_then_decays_linearly_to_zero():
    schedule = LinearWarmupLinearDecay(2e-4, total_steps=110, warmup_steps=10)
    rates = [float(ops.convert_to_numpy(schedule(step))) for step in (0, 1, 10, 60, 109, 110, 500)]
    np.testing.assert_allclose(rates, [0, 2e-5, 2e-4, 1e-4, 2e-6, 0, 0], atol=1e-12)


def test_schedule_round_trips_and_rejects_bad_steps():
    schedule = LinearWarmupLinearDecay(1e-3, 50, 5)
    assert (
        LinearWarmupLinearDecay.from_config(schedule.get_config()).get_config()
        == schedule.get_config()
    )
    with pytest.raises(ValueError, match="warmup_steps=60, total_steps=50"):
        LinearWarmupLinearDecay(1e-3, 50, 60)
