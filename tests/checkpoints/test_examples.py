"""The docstring examples of the checkpoint modules run and print what they show."""

import doctest

import pytest

from bert_keras import checkpoints
from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import original
from bert_keras.checkpoints import preset
from bert_keras.models.bert_backbone import BertBackbone


@pytest.mark.parametrize(
    "module", [checkpoints, huggingface, original, preset], ids=lambda m: m.__name__
)
def test_module_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


def test_save_to_preset_example():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(
        BertBackbone.save_to_preset, "save_to_preset", globs={"BertBackbone": BertBackbone}
    ):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
