"""PNG training curves from a run's history: losses, accuracies, learning rate, validation metrics.

Every training program writes its history to OUTPUT_DIR (see
`history_records`) and draws it to OUTPUT_DIR/history.png
with `write_history_plot`; `python -m tools.plot_history OUTPUT_DIR`
redraws it. One panel per kind of number, against the training step:

- losses (`loss`, `masked_lm_loss`, ...), on a log scale when they span
  more than a factor of ten;
- accuracies and ranking metrics (`accuracy`, `val_ndcg@10`, ...);
- the learning rate;
- throughput (`examples_per_second`).

Histories are read by `history_records.read_history_records`.

Validation metrics (`val_…`) share the panel of their training metric,
dashed. matplotlib is imported when a plot is drawn, with its file-only
"Agg" backend, so nothing here needs a display.
"""

import math
import os

from absl import logging

from bert_keras.atomic_files import atomic_file
from bert_keras.training.history_records import read_history_records

PLOT_FILE = "history.png"
_NOT_PLOTTED = {"step", "seconds", "epoch"}


def panels(records):
    """The metric names of each panel, in drawing order: `{title: [names]}`.

    Example:
    >>> panels([{"step": 1, "loss": 1.0, "val_loss": 1.2, "accuracy": 0.5,
    ...          "learning_rate": 1e-4, "examples_per_second": 90.0, "seconds": 3.0}])
    {'loss': ['loss', 'val_loss'], 'accuracy and ranking': ['accuracy'], 'learning rate': ['learning_rate'], 'examples per second': ['examples_per_second']}
    """  # noqa: E501
    names = []
    for record in records:
        names += [
            name
            for name, value in record.items()
            if name not in names and name not in _NOT_PLOTTED and _is_number(value)
        ]
    grouped = {
        "loss": [name for name in names if name.endswith("loss")],
        "accuracy and ranking": [
            name
            for name in names
            if not name.endswith("loss") and name not in ("learning_rate", "examples_per_second")
        ],
        "learning rate": [name for name in names if name == "learning_rate"],
        "examples per second": [name for name in names if name == "examples_per_second"],
    }
    return {title: sorted(group, key=_validation_last) for title, group in grouped.items() if group}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _validation_last(name):
    return (name.startswith("val_"), name.removeprefix("val_"))


def plot_history(records, path, title=None):
    """Draws `records` (dicts with a `step`) to the PNG file `path`, atomically.

    Args:
        records: history records, e.g. from `read_history_records`.
        path: the PNG file to write (replaced when present).
        title: a title over the panels (e.g. the output directory).

    Raises:
        ValueError: no records, none with a number to draw, or one that is
            not a dict with a `step`.

    Example:
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/history.png"
    >>> plot_history([{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.5}], path)
    >>> open(path, "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    for index, record in enumerate(records):
        if not isinstance(record, dict) or "step" not in record:
            raise ValueError(f"Cannot plot {path}: record {index} is not a dict with a step.")
    groups = panels(records)
    if not records:
        raise ValueError(f"No metrics to plot for {path}: the history has no records.")
    if not groups:
        raise ValueError(
            f"No metrics to plot for {path}: its records hold no numbers besides "
            f"{', '.join(sorted(_NOT_PLOTTED))}."
        )
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(
        1, len(groups), figsize=(4.2 * len(groups), 3.4), squeeze=False, layout="constrained"
    )
    for axis, (panel, names) in zip(axes[0], groups.items()):
        _draw_panel(axis, panel, names, records)
    if title:
        figure.suptitle(title, fontsize=10)
    with atomic_file(path) as partial_path:
        figure.savefig(partial_path, format="png", dpi=100)
    pyplot.close(figure)


def _draw_panel(axis, panel, names, records):
    """Draws each metric's finite values; a dotted line marks where one first is NaN or infinite."""
    values = []
    for name in names:
        points = [(r["step"], r[name]) for r in records if _is_number(r.get(name))]
        finite = [(step, value) for step, value in points if math.isfinite(value)]
        style = "--" if name.startswith("val_") else "-"
        if finite:
            steps, finite_values = zip(*finite)
            marker = "." if len(finite) < 30 else None
            axis.plot(steps, finite_values, style, marker=marker, label=name)
            values += finite_values
        not_finite = [(step, value) for step, value in points if not math.isfinite(value)]
        if not_finite:
            step, value = not_finite[0]
            label = f"{name} {value} at step {step:g} ({len(not_finite)} steps)"
            axis.axvline(step, color="red", linestyle=":", label=label)
            logging.warning(
                "%s is %s at step %g and %d steps in all.", name, value, step, len(not_finite)
            )
    if panel == "loss" and values and min(values) > 0 and max(values) > 10 * min(values):
        axis.set_yscale("log")
    axis.set_title(panel, fontsize=10)
    axis.set_xlabel("step")
    axis.grid(alpha=0.3)
    if len(axis.get_legend_handles_labels()[0]) > 1 or len(names) > 1:
        axis.legend(fontsize=7)


def write_history_plot(output_dir):
    """Draws OUTPUT_DIR's history to OUTPUT_DIR/history.png; returns that path.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(directory + "/history.jsonl", "w").write('{"step": 5, "loss": 2.0}\\n')
    >>> os.path.basename(write_history_plot(directory))
    'history.png'
    """
    path = os.path.join(output_dir, PLOT_FILE)
    plot_history(read_history_records(output_dir), path, title=os.path.abspath(output_dir))
    return path
