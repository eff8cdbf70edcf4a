import numpy as np
import pytest
from keras import ops

from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.checkpoint_weights import model_checkpoint
from tests.test_case import TINY_INPUTS
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

# Two examples with four choices each: [2, 4, seq].
CHOICES = {name: value[None].repeat(2, 0) for name, value in TINY_INPUTS.items()}
CHOICES["token_ids"] = CHOICES["token_ids"].copy()
CHOICES["token_ids"][1] = CHOICES["token_ids"][1, ::-1]
LABELS = np.array([2, 0], "int32")


class TestBertMultipleChoice(TestCase):
    def test_shared_checks(self):
        self.run_task_test(
            BertMultipleChoice,
            {"num_choices": 4},
            CHOICES,
            LABELS,
            # Softmax across choices is shift-invariant: the bias gets no gradient.
            unused_weights=("choice_score/bias",),
        )

    def test_each_choice_is_scored_alone_through_cls(self):
        backbone = tiny_backbone()
        chooser = BertMultipleChoice(backbone, num_choices=4)
        logits = ops.convert_to_numpy(chooser(CHOICES))
        dense = chooser.get_layer("choice_score")
        for example in range(2):
            one = {name: value[example] for name, value in CHOICES.items()}
            pooled = ops.convert_to_numpy(backbone(one)["pooled_output"])
            scores = pooled @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
            np.testing.assert_allclose(logits[example], scores[:, 0], atol=1e-5)

    def test_permuting_choices_permutes_logits(self):
        chooser = BertMultipleChoice(tiny_backbone(), num_choices=4)
        order = [3, 1, 0, 2]
        permuted = {name: value[:, order] for name, value in CHOICES.items()}
        np.testing.assert_allclose(
            ops.convert_to_numpy(chooser(permuted)),
            ops.convert_to_numpy(chooser(CHOICES))[:, order],
            atol=1e-5,
        )


def test_from_preset_takes_the_num_choices_the_checkpoint_records(tmp_path):
    chooser = BertMultipleChoice(tiny_backbone(), num_choices=4)
    heads = {"classifier": "choice_score"}
    task = {"task": "multiple_choice", "num_choices": 4}  # as tasks.multiple_choice records
    write_checkpoint(model_checkpoint(chooser, heads, task_config=task), tmp_path / "swag")
    loaded = BertMultipleChoice.from_preset(str(tmp_path / "swag"), preprocessor=None)
    assert loaded.num_choices == 4
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(CHOICES)), ops.convert_to_numpy(chooser(CHOICES)), atol=1e-5
    )
    write_checkpoint(model_checkpoint(chooser, heads), tmp_path / "unrecorded")
    with pytest.raises(ValueError, match="unrecorded records no num_choices .* give num_choices"):
        BertMultipleChoice.from_preset(str(tmp_path / "unrecorded"), preprocessor=None)


@pytest.mark.parametrize("method", ["predict", "fit"])
def test_ids_of_another_number_of_choices_are_named_before_any_step(method):
    chooser = BertMultipleChoice(tiny_backbone(), num_choices=3)
    chooser.compile()
    arguments = (CHOICES,) if method == "predict" else (CHOICES, LABELS)
    with pytest.raises(ValueError, match=r"x\['token_ids'\] has the shape \(2, 4, 7\), but the"):
        getattr(chooser, method)(*arguments, verbose=0)
