"""The error of a fine-tuning run whose training loss became NaN or infinite."""


class TrainingDivergedError(ArithmeticError):
    """Training's loss became NaN or infinite (Keras' `TerminateOnNaN` stopped it).

    The programs report it as a usage error: the run's model is neither
    scored nor exported.

    Example:
    >>> raise TrainingDivergedError("The training loss is nan by step 2.")
    Traceback (most recent call last):
    ...
    bert_keras.finetuning.training_diverged.TrainingDivergedError: The training loss is nan by step 2.
    """
