"""Where BERT's weights live on a device mesh: the `keras.distribution.LayoutMap` of model parallelism.

Megatron-style tensor parallelism for every model built on `BertBackbone`
(and `Bert4Rec`): the fused query/key/value projection and the first
feed-forward kernel are split by output columns along the mesh's model
axis, the attention output and second feed-forward kernels by input rows,
so each block needs one reduction per half; the embedding tables and the
masked-LM transform are split along the hidden axis. Everything else (layer
norms, biases that follow a row split, the small heads) is replicated.
`keras.distribution.ModelParallel` shards each batch along the other,
"batch", axis; XLA (GSPMD) inserts the collectives, so the numbers are
those of one device.

Example:
>>> import keras
>>> mesh = keras.distribution.DeviceMesh((1, 1), ("batch", "model"), ["cpu:0"])
>>> layout_map = bert_layout_map(mesh)
>>> layout_map["transformer_layer_3/intermediate_dense/kernel"].axes
(None, 'model')
>>> layout_map["transformer_layer_3/output_dense/kernel"].axes
('model', None)
"""

import keras

from bert_keras.training.data_parallel import MESH_AXES


def bert_layout_map(device_mesh, model_axis=MESH_AXES[1]):
    """The `keras.distribution.LayoutMap` that splits BERT's large weights along `model_axis`.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh` with an axis named
            `model_axis` (and one for the batch).
        model_axis: the mesh axis the weights are split along.

    Returns:
        A `LayoutMap` keyed by variable-path patterns (Keras matches them
        against whole paths); any number of layers
        and any sizes match, as long as the hidden, intermediate and fused
        query/key/value widths divide by the model axis' size.
    """
    column, row, hidden = (None, model_axis), (model_axis, None), (None, model_axis)
    layout_map = keras.distribution.LayoutMap(device_mesh)
    layout_map[r".*embedding/embeddings"] = hidden
    layout_map[r".*query_key_value/kernel"] = column
    layout_map[r".*query_key_value/bias"] = (model_axis,)
    layout_map[r".*attention_output/kernel"] = row
    layout_map[r".*intermediate_dense/kernel"] = column
    layout_map[r".*intermediate_dense/bias"] = (model_axis,)
    layout_map[r".*output_dense/kernel"] = row
    layout_map[r".*transform_dense/kernel"] = column
    layout_map[r".*transform_dense/bias"] = (model_axis,)
    return layout_map


# The backbone's widths that `bert_layout_map` splits along the model axis.
SPLIT_WIDTHS = ("hidden_dim", "intermediate_dim")


def check_model_splits(backbone_config, model_splits):
    """Refuses a model axis of `model_splits` devices that does not divide a width `bert_layout_map` splits.

    Example:
    >>> check_model_splits({"hidden_dim": 128, "intermediate_dim": 512}, 2)
    >>> try:
    ...     check_model_splits({"hidden_dim": 128, "intermediate_dim": 512}, 3)
    ... except ValueError as error:
    ...     print(str(error)[:98])
    mesh_shape splits the model's weights among 3 devices, which must divide the widths hidden_dim=128
    """
    widths = {name: backbone_config[name] for name in SPLIT_WIDTHS}
    if all(width % model_splits == 0 for width in widths.values()):
        return
    named = ", ".join(f"{name}={width}" for name, width in widths.items())
    raise ValueError(
        f"mesh_shape splits the model's weights among {model_splits} devices, which must divide "
        f"the widths {named}: give a (batch, model) mesh_shape whose model count divides them "
        "(the default mesh puts every device on the model axis)."
    )


def check_distributed_widths(backbone_config):
    """`check_model_splits` against the model axis of the `ModelParallel` in scope, if there is one.

    Example:
    >>> check_distributed_widths({"hidden_dim": 128, "intermediate_dim": 512})  # none in scope
    """
    distribution = keras.distribution.distribution()
    if not isinstance(distribution, keras.distribution.ModelParallel):
        return
    mesh = distribution.device_mesh
    if MESH_AXES[1] in mesh.axis_names:
        check_model_splits(backbone_config, mesh.shape[mesh.axis_names.index(MESH_AXES[1])])
