"""BertSentenceEncoder: MiniLM's sentence embeddings equal transformers + mean pooling."""

import keras
import numpy as np
import pytest
import torch
import transformers
from keras import ops

from bert_keras.models.bert_sentence_encoder import BertSentenceEncoder
from tests.checkpoints import MINILM_DIRECTORY
from tests.test_case import TINY_INPUTS
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

TOLERANCE = 1e-5
# Different lengths, so every batch has padding.
SENTENCES = [
    "A man is eating food.",
    "Hello",
    "The new movie is awesome, everybody in the theatre loved every single minute of it.",
    "A man is eating a piece of bread.",
    "Checkpoints map weights by name.",
]


def _reference_embeddings(normalize):
    """transformers AutoModel, then the mean over real tokens (and L2 normalisation)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM_DIRECTORY)
    model = transformers.AutoModel.from_pretrained(MINILM_DIRECTORY, dtype=torch.float32).eval()
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        token_vectors = model(**encoded).last_hidden_state  # [batch, seq, hidden]
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    embeddings = (token_vectors * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if normalize:
        embeddings = torch.nn.functional.normalize(embeddings, p=2, dim=1)
    return embeddings.numpy()


@pytest.fixture(scope="module")
def minilm_encoder():
    return BertSentenceEncoder.from_preset(MINILM_DIRECTORY)


@pytest.mark.parametrize("normalize", [True, False])
def test_minilm_embeddings_match_transformers_mean_pooling(minilm_encoder, normalize):
    expected = _reference_embeddings(normalize)
    actual = minilm_encoder.encode(SENTENCES, normalize=normalize, batch_size=3)
    assert actual.shape == (len(SENTENCES), 384) and actual.dtype == np.float32
    difference = float(np.abs(actual - expected).max())
    print(f"MiniLM embeddings (normalize={normalize}) max |difference|: {difference:.2e}")
    assert difference <= TOLERANCE
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(actual, axis=-1), 1.0, atol=1e-6)


def test_long_texts_are_cut_where_sentence_transformers_cuts_them(minilm_encoder):
    assert minilm_encoder.preprocessor.sequence_length == 256  # sentence_bert_config.json
    text = " ".join(["Checkpoints map weights by name, and the model reads them."] * 30)
    tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM_DIRECTORY)
    model = transformers.AutoModel.from_pretrained(MINILM_DIRECTORY, dtype=torch.float32).eval()
    encoded = tokenizer([text], truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded).last_hidden_state.mean(1)[0].numpy()
    np.testing.assert_allclose(
        minilm_encoder.encode(text, normalize=False), expected, atol=TOLERANCE
    )


def test_a_sentence_transformers_length_that_is_not_a_count_is_named(tmp_path):
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": "long"}')
    with pytest.raises(ValueError, match="max_seq_length is 'long' but must be a whole number"):
        BertSentenceEncoder.from_preset(str(tmp_path))


def test_the_paraphrase_is_the_nearest(minilm_encoder):
    embeddings = minilm_encoder.encode(SENTENCES)
    similarities = embeddings @ embeddings.T
    np.fill_diagonal(similarities, -1.0)
    assert similarities[0].argmax() == 3  # "A man is eating food." ~ "... a piece of bread."


def test_a_single_string_gives_one_vector(minilm_encoder):
    single = minilm_encoder.encode("Hello")
    np.testing.assert_allclose(single, minilm_encoder.encode(["Hello"])[0], atol=1e-6)


def test_padding_does_not_change_an_embedding():
    encoder = BertSentenceEncoder(tiny_backbone(dropout=0.0))
    inputs = {name: value[2:3] for name, value in TINY_INPUTS.items()}  # 5 real tokens of 7
    trimmed = {name: value[:, :5] for name, value in inputs.items()}
    np.testing.assert_allclose(
        ops.convert_to_numpy(encoder(inputs)), ops.convert_to_numpy(encoder(trimmed)), atol=1e-6
    )


def test_an_all_padding_input_embeds_as_zeros():
    encoder = BertSentenceEncoder(tiny_backbone(dropout=0.0))
    inputs = dict(
        TINY_INPUTS, padding_mask=TINY_INPUTS["padding_mask"] * np.array([[1], [0], [1], [1]])
    )
    embeddings = ops.convert_to_numpy(encoder(inputs))
    # As sentence-transformers' mean pooling, whose count of tokens is at least 1e-9.
    np.testing.assert_array_equal(embeddings[1], np.zeros(8, "float32"))
    np.testing.assert_allclose(
        embeddings[[0, 2, 3]], ops.convert_to_numpy(encoder(TINY_INPUTS))[[0, 2, 3]], atol=1e-6
    )


def test_text_without_a_preprocessor_is_refused():
    with pytest.raises(ValueError, match="needs a preprocessor"):
        BertSentenceEncoder(tiny_backbone()).encode(["hello"])


class TestBertSentenceEncoder(TestCase):
    def test_config_and_saving(self):
        encoder = BertSentenceEncoder(tiny_backbone())
        config = encoder.get_config()
        assert BertSentenceEncoder.from_config(config).get_config() == config
        self.run_saving_test(encoder, TINY_INPUTS)

    @pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
    def test_embeddings_are_float32_under_mixed_precision(self, policy):
        encoder = BertSentenceEncoder(tiny_backbone(policy))
        output = encoder(TINY_INPUTS)
        assert keras.backend.standardize_dtype(output.dtype) == "float32"
        assert tuple(output.shape) == (4, 8)
