"""GLUE's metrics: accuracy, F1, Matthews correlation, Pearson and Spearman.

Plain numpy, a few lines each, so the task programs need no scikit-learn or
SciPy; tests compare them with hand-computed values.
"""

import numpy as np

# Which metrics GLUE reports for each task (Wang et al. 2019, Table 1).
TASK_METRICS = {
    "cola": ("matthews_correlation",),
    "sst-2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "sts-b": ("pearson", "spearman"),
    "qqp": ("accuracy", "f1"),
    "mnli": ("accuracy",),
    "mnli-mm": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}


def accuracy(labels, predictions):
    """Fraction of equal entries.

    Example:
    >>> accuracy([1, 0, 1, 1], [1, 1, 1, 0])
    0.5
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float((labels == predictions).mean()) if labels.size else 0.0


def f1(labels, predictions, positive=1):
    """F1 of the positive class (MRPC, QQP); 0.0 when nothing is predicted or true.

    Example:
    >>> round(f1([1, 1, 0, 0], [1, 0, 1, 0]), 3)
    0.5
    """
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positives = float((labels & predictions).sum())
    if true_positives == 0:
        return 0.0
    precision = true_positives / float(predictions.sum())
    recall = true_positives / float(labels.sum())
    return 2 * precision * recall / (precision + recall)


def matthews_correlation(labels, predictions):
    """Matthews correlation of binary labels (CoLA); 0.0 when undefined, as scikit-learn gives it.

    Example:
    >>> matthews_correlation([1, 1, 0, 0], [1, 1, 0, 0])
    1.0
    """
    labels, predictions = np.asarray(labels) == 1, np.asarray(predictions) == 1
    tp = float((labels & predictions).sum())
    tn = float((~labels & ~predictions).sum())
    fp = float((~labels & predictions).sum())
    fn = float((labels & ~predictions).sum())
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(labels, predictions):
    """Pearson correlation (STS-B); NaN where undefined: under two examples, or constant values.

    Example:
    >>> round(pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.5]), 4)
    0.9979
    >>> pearson([1.0, 2.0], [3.0, 3.0])
    nan
    """
    labels, predictions = np.asarray(labels, float), np.asarray(predictions, float)
    if labels.size < 2 or np.ptp(labels) == 0 or np.ptp(predictions) == 0:
        return float("nan")
    return float(np.corrcoef(labels, predictions)[0, 1])


def spearman(labels, predictions):
    """Spearman correlation: Pearson of ranks, ties sharing their mean rank (STS-B).

    Example:
    >>> spearman([1.0, 2.0, 3.0], [10.0, 20.0, 35.0])
    1.0
    """
    return pearson(_average_ranks(labels), _average_ranks(predictions))


def _average_ranks(values):
    values = np.asarray(values, float)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def glue_metrics(task_name, labels, predictions):
    """The metrics GLUE reports for `task_name`, as a dict.

    Example:
    >>> glue_metrics("mrpc", [1, 0, 1], [1, 0, 0])
    {'accuracy': 0.6666666666666666, 'f1': 0.6666666666666666}
    """
    functions = {
        "accuracy": accuracy,
        "f1": f1,
        "matthews_correlation": matthews_correlation,
        "pearson": pearson,
        "spearman": spearman,
    }
    names = TASK_METRICS.get(task_name.lower())
    if names is None:
        raise ValueError(f"Unknown GLUE task {task_name!r}; known: {sorted(TASK_METRICS)}.")
    return {name: functions[name](labels, predictions) for name in names}
