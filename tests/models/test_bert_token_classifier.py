import numpy as np
from keras import ops

from bert_keras.models.bert_token_classifier import IGNORED_LABEL
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from tests.models.task_inputs import INPUTS
from tests.models.task_inputs import tiny_backbone
from tests.test_case import TestCase

# First word pieces carry a tag; [CLS], continuation pieces and padding are ignored.
LABELS = np.full((4, 7), IGNORED_LABEL, "int32")
LABELS[:, 1:5] = [[1, 0, 2, 0], [3, 3, 0, 1], [0, 4, 0, IGNORED_LABEL], [2, 0, 0, 1]]


class TestBertTokenClassifier(TestCase):
    def test_shared_checks(self):
        self.run_task_test(
            lambda dtype: BertTokenClassifier(tiny_backbone(dtype), num_classes=5),
            INPUTS,
            LABELS,
            unused_weights=("pooler_dense",),
        )

    def test_ignored_positions_do_not_change_the_loss(self):
        tagger = BertTokenClassifier(tiny_backbone(), num_classes=5)
        tagger.compile()
        logits = tagger(INPUTS)
        loss = tagger.loss
        relabelled = np.where(LABELS == IGNORED_LABEL, IGNORED_LABEL, LABELS)
        np.testing.assert_allclose(
            ops.convert_to_numpy(loss(LABELS, logits)), ops.convert_to_numpy(loss(relabelled, logits))
        )
        real = LABELS != IGNORED_LABEL
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
        picked = np.take_along_axis(log_probs, np.maximum(LABELS, 0)[..., None], -1)[..., 0]
        np.testing.assert_allclose(
            float(ops.convert_to_numpy(loss(LABELS, logits))), -picked[real].mean(), rtol=1e-5
        )
