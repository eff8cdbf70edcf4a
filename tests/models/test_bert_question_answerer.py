import numpy as np
from keras import ops

from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from tests.test_case import TINY_INPUTS
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

LABELS = {"start_logits": np.array([4, 0, 2, 5]), "end_logits": np.array([5, 0, 3, 5])}


def _cross_entropy(logits, labels):
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
    return -np.take_along_axis(log_probs, labels[:, None], -1).mean()


class TestBertQuestionAnswerer(TestCase):
    def test_shared_checks(self):
        self.run_task_test(
            BertQuestionAnswerer,
            {},
            TINY_INPUTS,
            LABELS,
            # Softmax over positions is shift-invariant: the bias gets no gradient.
            unused_weights=("pooler_dense", "span_logits/bias"),
        )

    def test_padding_can_never_hold_the_answer(self):
        outputs = BertQuestionAnswerer(tiny_backbone())(TINY_INPUTS)
        padding = TINY_INPUTS["padding_mask"] == 0
        for name in ("start_logits", "end_logits"):
            logits = ops.convert_to_numpy(outputs[name])
            assert np.all(logits[padding] < -1e8)
            assert np.all(logits[~padding] > -1e3)

    def test_loss_is_the_mean_of_start_and_end_cross_entropy(self):
        reader = BertQuestionAnswerer(tiny_backbone(dropout=0.0))
        reader.compile()
        outputs = reader(TINY_INPUTS)
        expected = 0.5 * (
            _cross_entropy(outputs["start_logits"], LABELS["start_logits"])
            + _cross_entropy(outputs["end_logits"], LABELS["end_logits"])
        )
        result = reader.evaluate(TINY_INPUTS, LABELS, verbose=0, return_dict=True)
        np.testing.assert_allclose(result["loss"], expected, rtol=1e-5)

    def test_start_and_end_logits_come_from_their_own_kernel_columns(self):
        backbone = tiny_backbone(dropout=0.0)
        reader = BertQuestionAnswerer(backbone)
        sequence_output = ops.convert_to_numpy(backbone(TINY_INPUTS)["sequence_output"])
        kernel, bias = (ops.convert_to_numpy(w) for w in reader.get_layer("span_logits").weights)
        outputs = reader(TINY_INPUTS)
        real = TINY_INPUTS["padding_mask"] == 1
        for column, name in enumerate(("start_logits", "end_logits")):
            expected = sequence_output @ kernel[:, column] + bias[column]
            np.testing.assert_allclose(
                ops.convert_to_numpy(outputs[name])[real], expected[real], atol=1e-5
            )
