import jax
import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.layers import attention_in_steps as attention_steps
from bert_keras.layers import multi_head_self_attention
from bert_keras.layers.multi_head_self_attention import MultiHeadSelfAttention
from tests import reference
from tests.test_case import TestCase

INPUTS = np.random.RandomState(0).normal(size=(2, 5, 8)).astype("float32")
PADDING = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def _weights(layer):
    return [ops.convert_to_numpy(w) for w in layer.weights]


def _reference(layer, inputs, padding):
    qkv_kernel, qkv_bias, out_kernel, out_bias = _weights(layer)
    mask = reference.padding_to_attention_mask(padding)
    return reference.self_attention(
        inputs, qkv_kernel, qkv_bias, out_kernel, out_bias, layer.num_heads, mask
    )


def _call(layer, padding, **kwargs):
    return ops.convert_to_numpy(layer(INPUTS, attention_mask=padding[:, None, None, :], **kwargs))


class TestMultiHeadSelfAttention(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            MultiHeadSelfAttention,
            {"num_heads": 2, "dropout": 0.1},
            {"inputs": INPUTS},
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=4,
        )

    def test_matches_the_reference_with_padding(self):
        layer = MultiHeadSelfAttention(num_heads=2, dropout=0.1)
        actual = _call(layer, PADDING)
        np.testing.assert_allclose(actual, _reference(layer, INPUTS, PADDING), atol=1e-5)

    def test_compiled_float16_inference_matches_float32_on_every_backend(self):
        # XLA's fused CPU attention refuses float16 once compiled (jax); the layer must not.
        from bert_keras.models.bert_backbone import BertBackbone

        full = BertBackbone(50, 1, 2, 8, 16, max_sequence_length=16)
        keras.config.set_dtype_policy("mixed_float16")
        half = BertBackbone(50, 1, 2, 8, 16, max_sequence_length=16)
        half.set_weights(full.get_weights())
        inputs = {
            "token_ids": np.arange(16, dtype="int32").reshape(2, 8),
            "segment_ids": np.zeros((2, 8), "int32"),
            "padding_mask": np.arange(8) < np.array([[8], [5]]),
        }
        outputs = half.predict(inputs, verbose=0)["sequence_output"]
        assert outputs.dtype == np.float16
        expected = full.predict(inputs, verbose=0)["sequence_output"]
        np.testing.assert_allclose(outputs, expected, atol=2e-2)

    def test_inference_uses_the_fused_op_even_with_dropout(self, monkeypatch):
        calls = []
        fused = ops.dot_product_attention
        monkeypatch.setattr(
            keras.ops,
            "dot_product_attention",
            lambda *a, **k: calls.append(1) or fused(*a, **k),
        )
        layer = MultiHeadSelfAttention(num_heads=2, dropout=0.1)
        _call(layer, PADDING)
        assert calls, "inference did not go through keras.ops.dot_product_attention"
        calls.clear()
        _call(layer, PADDING, training=True)
        assert not calls, "training with dropout must use the explicit path"

    def test_training_draws_attention_dropout_from_the_layer_on_the_cpu(self, monkeypatch):
        if keras.backend.backend() == "torch" and _torch_gpu():
            pytest.skip("torch's fused GPU kernel drops attention itself")
        layer = MultiHeadSelfAttention(num_heads=2, dropout=0.1)
        _call(layer, PADDING)
        calls = []
        dropout_call = layer.dropout_layer.call
        monkeypatch.setattr(
            layer.dropout_layer,
            "call",
            lambda *a, **k: calls.append(1) or dropout_call(*a, **k),
        )
        _call(layer, PADDING, training=True)
        assert calls, "attention dropout did not go through the layer's Dropout"

    @pytest.mark.parametrize(
        "length, positions, expected_mask_shape, expected_fused",
        [
            (6, None, (2, 1, 6, 6), None),
            (5, None, (2, 1, 1, 5), False),
            (6, [[3], [0]], None, False),
        ],
    )
    def test_jax_hands_cudnn_a_mask_it_takes_or_none_at_all(
        self, monkeypatch, length, positions, expected_mask_shape, expected_fused
    ):
        # JAX's cuDNN kernel takes a [batch, 1, queries, keys] mask and even lengths only.
        if keras.backend.backend() != "jax":
            pytest.skip("the mask is reshaped for JAX's cuDNN kernel only")
        seen = {}
        fused = ops.dot_product_attention

        def recording(query, key, value, mask=None, flash_attention=None, **kwargs):
            seen.update(mask_shape=tuple(mask.shape), fused=flash_attention)
            return fused(query, key, value, mask=mask, flash_attention=flash_attention, **kwargs)

        monkeypatch.setattr(keras.ops, "dot_product_attention", recording)
        inputs = np.ones((2, length, 8), "float32")
        padding = (np.arange(length) < np.array([[length], [3]]))[:, None, None, :]
        query_positions = None if positions is None else np.array(positions, "int32")
        layer = MultiHeadSelfAttention(num_heads=2)
        layer(inputs, attention_mask=padding, query_positions=query_positions)
        assert seen["fused"] is expected_fused
        if expected_mask_shape is not None:
            assert seen["mask_shape"] == expected_mask_shape

    @pytest.mark.parametrize("training", [False, True])
    def test_jax_on_a_cpu_attends_in_steps_in_inference_only(self, monkeypatch, training):
        monkeypatch.setattr(attention_steps, "STEPS_FROM_SCORES_BYTES", 64)
        monkeypatch.setattr(attention_steps, "STEP_SCORES_BYTES", 64)  # 2 heads of 5 keys
        steps = []
        stepped = attention_steps.attention_in_steps
        monkeypatch.setattr(
            multi_head_self_attention,
            "attention_in_steps",
            lambda *a, **k: steps.append(1) or stepped(*a, **k),
        )
        layer = MultiHeadSelfAttention(num_heads=2)
        actual = _call(layer, PADDING, training=training)
        np.testing.assert_allclose(actual, _reference(layer, INPUTS, PADDING), atol=1e-5)
        on_a_jax_cpu = keras.backend.backend() == "jax" and jax.default_backend() == "cpu"
        assert bool(steps) == (on_a_jax_cpu and not training)

    def test_explicit_training_path_matches_the_reference(self):
        # A rate this small drops nothing in practice but selects the explicit path.
        layer = MultiHeadSelfAttention(num_heads=2, dropout=1e-9)
        actual = _call(layer, PADDING, training=True)
        np.testing.assert_allclose(actual, _reference(layer, INPUTS, PADDING), atol=1e-5)

    def test_attention_dropout_is_active_in_training(self):
        layer = MultiHeadSelfAttention(num_heads=2, dropout=0.5)
        assert not np.allclose(_call(layer, PADDING, training=True), _call(layer, PADDING))

    @pytest.mark.parametrize("training", [False, True])
    def test_query_positions_are_the_full_outputs_rows(self, training):
        # Training with a tiny dropout rate takes the explicit (or torch's) path.
        layer = MultiHeadSelfAttention(num_heads=2, dropout=1e-9)
        positions = np.array([[3, 0], [2, 2]], "int32")
        full = _call(layer, PADDING, training=training)
        rows = _call(layer, PADDING, training=training, query_positions=positions)
        expected = np.take_along_axis(full, positions[:, :, None], axis=1)
        np.testing.assert_allclose(rows, expected, atol=1e-5)

    def test_padded_keys_do_not_change_real_positions(self):
        layer = MultiHeadSelfAttention(num_heads=2)
        changed = INPUTS.copy()
        changed[1, 3:] = 100.0
        before = _call(layer, PADDING)
        after = ops.convert_to_numpy(layer(changed, attention_mask=PADDING[:, None, None, :]))
        np.testing.assert_allclose(before[1, :3], after[1, :3], atol=1e-5)

    def test_hidden_size_not_divisible_by_heads(self):
        with pytest.raises(ValueError, match=r"hidden size \(8\).*heads \(3\)"):
            MultiHeadSelfAttention(num_heads=3)(INPUTS)


def _torch_gpu():
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize(
    "xla_flags, outside",
    [
        ("", False),
        ("--xla_gpu_enable_command_buffer=", True),
        ("--xla_gpu_enable_command_buffer=FUSION,CUBLAS", True),
        ("--xla_gpu_enable_command_buffer=FUSION,cudnn", False),
        ("--xla_gpu_enable_command_buffer=-CUDNN --xla_gpu_autotune_level=0", True),
        ("--xla_gpu_enable_command_buffer=-CUDNN,+CUDNN", False),
        ("--xla_gpu_enable_command_buffer=-FUSION", False),
        ("--xla_gpu_enable_command_buffer=-CUDNN --xla_gpu_enable_command_buffer=+WHILE", False),
    ],
)
def test_cudnn_dropout_waits_for_cudnn_outside_cuda_graphs(xla_flags, outside):
    from bert_keras.layers.multi_head_self_attention import cudnn_outside_cuda_graphs

    assert cudnn_outside_cuda_graphs(xla_flags) is outside


def _jax_gpu():
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "gpu"


@pytest.mark.skipif(not _jax_gpu(), reason="cuDNN's attention dropout runs on JAX's GPU only")
def test_cudnn_attention_dropout_uses_one_mask_forward_and_backward_and_a_new_one_each_step():
    import jax
    import jax.numpy as jnp

    from bert_keras.layers import multi_head_self_attention as attention

    batch, length, heads, rate = 2, 64, 2, 0.25
    rng = np.random.default_rng(0)
    query, key = (
        jnp.asarray(rng.normal(size=(batch, length, heads, length)), "bfloat16") for _ in range(2)
    )
    # Values of one-hot rows: each output row is its row of dropped probabilities.
    value = jnp.broadcast_to(jnp.eye(length, dtype="bfloat16")[None, :, None], query.shape)
    mask = np.ones((batch, 1, length, length), bool)
    mask[1, ..., 50:] = False

    @jax.jit
    def step(value, output_gradient):
        outputs, backward = jax.vjp(
            lambda v: attention._cudnn_attention_with_dropout(query, key, v, mask, rate, seed=7),
            value,
        )
        return outputs, backward(output_gradient)[0]

    gradient = jnp.asarray(rng.normal(size=query.shape), "bfloat16")
    first, value_gradient = (np.asarray(array, "float32") for array in step(value, gradient))
    second = np.asarray(step(value, gradient)[0], "float32")
    # dV = D(P)^T dO with the forward's D(P): the backward dropped what the forward did.
    expected = np.einsum("btns,btnh->bsnh", first, np.asarray(gradient, "float32"))
    np.testing.assert_allclose(value_gradient, expected, atol=0.01, rtol=0.02)
    undropped = np.asarray(
        jax.nn.softmax(
            jnp.where(
                mask.transpose(0, 2, 1, 3),
                jnp.einsum("btnh,bsnh->btns", query.astype("float32"), key.astype("float32"))
                / length**0.5,
                -1e9,
            ),
            axis=-1,
        ),
        "float32",
    )
    kept = first != 0
    assert abs(1 - kept[0].mean() - rate) < 0.02
    np.testing.assert_allclose(first[kept], undropped[kept] / (1 - rate), rtol=0.02, atol=1e-3)
    assert not kept[1, ..., 50:].any()  # padded keys get no probability
    assert 0.2 < (kept != (second != 0))[0].mean() < 0.5  # a new mask each step
