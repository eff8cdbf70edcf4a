import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.models.bert_classifier import BertClassifier
from tests.test_case import TINY_INPUTS
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

LABELS = np.array([0, 2, 1, 2], "int32")


class TestBertClassifier(TestCase):
    def test_shared_checks(self):
        self.run_task_test(BertClassifier, {"num_classes": 3}, TINY_INPUTS, LABELS)

    def test_logits_are_a_dense_layer_on_the_pooled_output(self):
        backbone = tiny_backbone()
        classifier = BertClassifier(backbone, num_classes=3)
        pooled = ops.convert_to_numpy(backbone(TINY_INPUTS)["pooled_output"])
        dense = classifier.get_layer("logits")
        expected = pooled @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
        np.testing.assert_allclose(
            ops.convert_to_numpy(classifier(TINY_INPUTS)), expected, atol=1e-5
        )

    @pytest.mark.one_backend  # a learning run; every backend's fit is in the shared checks
    def test_learns_a_separable_task(self):
        backbone = tiny_backbone(dropout=0.0, hidden_dim=32, intermediate_dim=64)
        classifier = BertClassifier(backbone, num_classes=3, dropout=0.0)
        classifier.compile(learning_rate=1e-2)
        history = classifier.fit(TINY_INPUTS, LABELS, epochs=30, verbose=0).history
        assert history["accuracy"][-1] == 1.0

    def test_regression_defaults_to_mean_squared_error(self):
        regressor = BertClassifier(tiny_backbone(), num_classes=1)
        regressor.compile()
        assert isinstance(regressor.loss, keras.losses.MeanSquaredError)
        assert tuple(regressor(TINY_INPUTS).shape) == (4, 1)

    def test_compile_defaults_follow_the_paper(self):
        classifier = BertClassifier(tiny_backbone(), num_classes=2)
        classifier.compile(num_train_steps=100)
        assert isinstance(classifier.optimizer, keras.optimizers.AdamW)
        schedule = classifier.optimizer.get_config()["learning_rate"]["config"]
        assert schedule == {
            "peak_learning_rate": 2e-5,
            "total_steps": 100,
            "warmup_steps": 10,
            "batches_per_step": 1,
        }


@pytest.mark.one_backend("jax")  # XLA counts the FLOPs
def test_the_last_block_runs_its_feed_forward_net_on_cls_only():
    import jax

    def flops(model):
        def forward(trainable, non_trainable, inputs):
            return model.stateless_call(trainable, non_trainable, inputs)[0]

        weights = [
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
        ]
        return jax.jit(forward).lower(*weights, TINY_INPUTS).cost_analysis()["flops"]

    backbone = tiny_backbone()
    classifier = BertClassifier(backbone, num_classes=3)
    batch, seq = TINY_INPUTS["token_ids"].shape
    feed_forward_rows_skipped = batch * (seq - 1) * 2 * 2 * backbone.hidden_dim
    feed_forward_rows_skipped *= backbone.intermediate_dim
    assert flops(classifier) < flops(backbone) - feed_forward_rows_skipped
