"""The sampled softmax: its loss against numpy, its sampler, and Bert4Rec trained with it."""

import keras
import numpy as np
from keras import ops

from bert_keras.models.bert4rec import Bert4Rec
from bert_keras.models.sampled_softmax import log_uniform_candidates
from bert_keras.models.sampled_softmax import log_uniform_log_probability
from bert_keras.models.sampled_softmax import sampled_softmax_loss
from tests.test_case import TestCase


def log_q(ids, num_items):
    ranks = np.asarray(ids, "float64") - 1
    return np.log((np.log(ranks + 2) - np.log(ranks + 1)) / np.log(num_items + 1))


def reference_loss(labels, hidden, embeddings, bias, negatives, num_items):
    total, count = 0.0, 0
    k = len(negatives)
    for row in range(labels.shape[0]):
        for column in range(labels.shape[1]):
            target = labels[row, column]
            if target == 0:
                continue
            h = hidden[row, column]
            logits = [h @ embeddings[target] + bias[target] - np.log(k) - log_q(target, num_items)]
            for negative in negatives:
                if negative != target:
                    logits.append(
                        h @ embeddings[negative]
                        + bias[negative]
                        - np.log(k)
                        - log_q(negative, num_items)
                    )
            logits = np.array(logits)
            total += np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[0]
            count += 1
    return total / count


def test_loss_equals_numpy_with_accidental_hits_and_padding():
    rng = np.random.default_rng(0)
    num_items = 9
    embeddings = rng.normal(size=(num_items + 2, 4)).astype("float32")
    bias = rng.normal(size=num_items + 2).astype("float32")
    hidden = rng.normal(size=(2, 3, 4)).astype("float32")
    labels = np.array([[3, 5, 0], [7, 3, 1]])
    negatives = np.array([3, 2, 8, 8, 1])  # 3 and 1 are targets too: accidental hits
    loss = sampled_softmax_loss(labels, hidden, embeddings, bias, negatives, num_items)
    expected = reference_loss(labels, hidden, embeddings, bias, negatives, num_items)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_the_sampler_draws_ids_with_its_stated_probabilities():
    num_items = 50
    ids = ops.convert_to_numpy(log_uniform_candidates(num_items, 200_000, seed=3))
    frequencies = np.bincount(ids, minlength=num_items + 1)[1:] / len(ids)
    probabilities = np.exp(ops.convert_to_numpy(log_uniform_log_probability(np.arange(1, 51), 50)))
    np.testing.assert_allclose(frequencies[:10], probabilities[:10], rtol=0.05)
    np.testing.assert_allclose(probabilities, np.exp(log_q(np.arange(1, 51), 50)), rtol=1e-5)


class TestBert4RecWithSampledSoftmax(TestCase):
    def test_trains_on_vectors_and_scores_every_item_at_inference(self):
        num_items = 40
        model = Bert4Rec(
            num_items=num_items,
            num_layers=1,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=8,
            dropout=0.0,
            sampled_negatives=16,
        )
        rng = np.random.default_rng(0)
        sequences = (rng.integers(1, num_items - 8, 128)[:, None] + np.arange(8)).astype("int32")
        positions = rng.integers(1, 8, (128, 1)).astype("int32")
        labels = np.take_along_axis(sequences, positions, axis=1)
        masked = sequences.copy()
        np.put_along_axis(masked, positions, num_items + 1, axis=1)
        features = {"item_ids": masked, "masked_positions": positions}
        assert tuple(model(features, training=True).shape) == (128, 1, 16)
        assert tuple(model(features).shape) == (128, 1, num_items + 2)

        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        model.fit(features, labels, epochs=150, batch_size=64, verbose=0)
        predicted = ops.convert_to_numpy(model(features)).argmax(axis=-1)
        # Each item is followed by the next: the full softmax at inference finds it.
        assert (predicted == labels).mean() > 0.8
        restored = self.run_saving_test(model, features)
        assert restored.sampled_negatives == 16
