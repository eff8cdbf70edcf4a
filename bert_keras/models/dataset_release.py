"""tf.data datasets whose iterators Keras can drop at once: tf.data's autotuning off.

tf.data tunes a pipeline's `AUTOTUNE` knobs from a model thread that runs
beside each iterator and sleeps between rounds, for periods that double up
to a minute. When `fit`, `evaluate` or `predict` ends, Keras drops its
iterator, and the iterator's deletion waits for that thread to wake: seconds
to a minute, at random, after the last step, on every backend (seen with
TensorFlow 2.21). With autotuning off no such thread runs; `AUTOTUNE`
parallelism is then the machine's core count and `AUTOTUNE` prefetch buffers
still grow while their consumer waits (tf.data's own fallbacks).
"""

from bert_keras.models.text_inputs import holds_dataset


def without_autotuning_thread(data):
    """`data`; a `tf.data.Dataset` with tf.data's autotuning off, unless it sets autotuning.

    A dataset whose options already set `autotune.enabled` keeps them;
    anything else passes unchanged.

    Example:
    >>> import tensorflow as tf
    >>> dataset = without_autotuning_thread(tf.data.Dataset.range(3).prefetch(tf.data.AUTOTUNE))
    >>> dataset.options().autotune.enabled, [int(value) for value in dataset]
    (False, [0, 1, 2])
    >>> without_autotuning_thread([1, 2])
    [1, 2]
    """
    if not holds_dataset(data) or data.options().autotune.enabled is not None:
        return data
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return data.with_options(options)
