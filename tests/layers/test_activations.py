import numpy as np
import pytest
from keras import ops

from bert_keras.layers.activations import ACTIVATIONS
from bert_keras.layers.activations import get_activation
from tests import reference

X = np.linspace(-6, 6, 101).astype("float32")


def test_gelu_is_the_exact_erf_form():
    actual = ops.convert_to_numpy(get_activation("gelu")(X))
    np.testing.assert_allclose(actual, reference.gelu_exact(X), atol=1e-6)


def test_gelu_approximate_is_the_tanh_form_of_the_original():
    actual = ops.convert_to_numpy(get_activation("gelu_approximate")(X))
    np.testing.assert_allclose(actual, reference.gelu_tanh(X), atol=1e-6)


def test_the_two_gelus_differ():
    exact = ops.convert_to_numpy(get_activation("gelu")(X))
    tanh = ops.convert_to_numpy(get_activation("gelu_approximate")(X))
    assert np.abs(exact - tanh).max() > 1e-4


def test_unknown_activation_lists_the_known_ones():
    with pytest.raises(ValueError, match="Unknown activation 'gelu_fast'") as error:
        get_activation("gelu_fast")
    for name in ACTIVATIONS:
        assert name in str(error.value)
