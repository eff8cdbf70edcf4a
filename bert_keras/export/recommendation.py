"""The serving signatures of a `Bert4Rec`: item histories in, the top-k next items out.

- `serving_default`: `items`, string `[batch, length]`, each row a user's raw
  item ids (those of the run's item_ids.json) in time order, right-padded
  with "" -> `items` string `[batch, top_k]`, `scores` float32 `[batch,
  top_k]`, best first. Ids the model does not know are left out of the
  history (a new item says nothing yet); a history with no known item gets
  the most likely items after [MASK] alone.
- `serve_ids`: `item_ids`, int32 `[batch, length]`, model ids (1..`num_items`)
  right-padded with 0 -> `item_ids` int32 and `scores` float32 `[batch, top_k]`.

Both append [MASK] after each history's last `max_sequence_length - 1` items,
as `Bert4Rec.recommend` does, and never return an item of the history: where
fewer than `top_k` items are unseen, the rest of the row is "" (id 0) with
score -inf. An empty batch gets empty answers, `[0, top_k]`.

Example:
>>> import tensorflow as tf
>>> from bert_keras.models.bert4rec import Bert4Rec
>>> model = Bert4Rec(num_items=4, max_sequence_length=6, hidden_dim=8, intermediate_dim=16)
>>> signatures = recommender_signatures(model, ["a", "b", "c", "d"], top_k=2)
>>> answer = signatures["serving_default"](tf.constant([["a", "b", "zz"], ["c", "", ""]]))
>>> answer["items"].shape.as_list(), bool(set(answer["items"].numpy()[0]) & {b"a", b"b"})
([2, 2], False)
"""

import tensorflow as tf

from bert_keras.data.interactions import PAD_ID
from bert_keras.export.signatures import REQUIRED_BACKEND
from bert_keras.export.signatures import check_backend
from bert_keras.export.signatures import checked_shape

__all__ = ["DEFAULT_TOP_K", "REQUIRED_BACKEND", "recommender_signatures"]

DEFAULT_TOP_K = 10


def recommender_signatures(model, item_ids, top_k=None):
    """`serving_default` (raw item ids) and `serve_ids` (model ids) of a `Bert4Rec`.

    Args:
        model: a `Bert4Rec` on Keras' TensorFlow backend.
        item_ids: the raw id of each model id: `item_ids[i - 1]` is item `i`.
        top_k: items returned per history; when None, `DEFAULT_TOP_K` or
            the number of items if that is fewer.

    Raises:
        ValueError: `item_ids` does not match the model's items, or `top_k`
            is not in 1..`num_items`.
    """
    check_backend()
    if len(item_ids) != model.num_items:
        raise ValueError(
            f"The model has {model.num_items} items but the item id list {len(item_ids)}."
        )
    if top_k is None:
        top_k = min(DEFAULT_TOP_K, model.num_items)
    if not 1 <= top_k <= model.num_items:
        raise ValueError(
            f"top_k must be in 1..{model.num_items} (the model's number of items), got {top_k}."
        )
    ids_of_items = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(item_ids)), tf.range(1, model.num_items + 1, dtype=tf.int32)
        ),
        default_value=PAD_ID,
    )
    items_of_ids = tf.constant([""] + list(item_ids))

    def ranked(ids):
        kept = _compacted(ids)  # [batch, (items)], known ids only
        scores = _next_item_scores(model, kept)  # [batch, num_items + 1]
        best_scores, best_ids = tf.math.top_k(scores, k=top_k)
        # Past a history's unseen items: [PAD], as `Bert4Rec.recommend` returns.
        return tf.where(tf.math.is_inf(best_scores), PAD_ID, best_ids), best_scores

    def top_items(ids):
        # An empty batch gets empty answers; the model's gathers refuse 0 rows.
        return tf.cond(
            tf.shape(ids)[0] > 0,
            lambda: ranked(ids),
            lambda: (tf.zeros([0, top_k], tf.int32), tf.zeros([0, top_k], tf.float32)),
        )

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="item_ids")],
        autograph=False,
    )
    def serve_ids(item_ids):
        item_ids = checked_shape(item_ids, [None, None])
        out_of_range = tf.logical_or(item_ids < 0, item_ids > model.num_items)
        check = tf.debugging.assert_equal(
            tf.reduce_any(out_of_range),
            False,
            message=f"item_ids must be model ids in 1..{model.num_items} (0 pads)",
        )
        with tf.control_dependencies([check]):
            best_ids, best_scores = top_items(tf.identity(item_ids))
        return {"item_ids": best_ids, "scores": best_scores}

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.string, name="items")],
        autograph=False,
    )
    def serve_items(items):
        items = checked_shape(items, [None, None])
        best_ids, best_scores = top_items(ids_of_items.lookup(items))
        return {"items": tf.gather(items_of_ids, best_ids), "scores": best_scores}

    serve_items.item_table = ids_of_items  # for the export to track (and initialise on load)
    return {"serving_default": serve_items, "serve_ids": serve_ids}


def _compacted(ids):
    """Each row's nonzero ids, in order, as a ragged tensor."""
    known = tf.not_equal(ids, PAD_ID)
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids, known), tf.reduce_sum(tf.cast(known, tf.int64), axis=1)
    )


def _next_item_scores(model, histories):
    """The model's logits after each ragged history, seen items at -inf."""
    kept = histories[:, -(model.max_sequence_length - 1) :]
    batch_size = kept.nrows()
    masks = tf.fill([batch_size, 1], model.mask_id)
    item_ids = tf.concat([kept, tf.RaggedTensor.from_tensor(masks)], axis=1).to_tensor(PAD_ID)
    positions = tf.cast(kept.row_lengths(), tf.int32)[:, None]
    logits = model({"item_ids": item_ids, "masked_positions": positions}, training=False)
    scores = logits[:, 0, : model.mask_id]  # [batch, num_items + 1], column 0 is [PAD]
    rows = tf.cast(histories.value_rowids(), tf.int32)
    seen = tf.scatter_nd(
        tf.stack([rows, histories.flat_values], axis=1),
        tf.ones_like(histories.flat_values),
        tf.shape(scores, out_type=tf.int32),
    )
    never = tf.logical_or(seen > 0, tf.range(model.mask_id)[None, :] == PAD_ID)
    return tf.where(never, tf.constant(float("-inf"), scores.dtype), scores)
