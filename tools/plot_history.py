"""Redraws the training curves of one or more runs: OUTPUT_DIR/history.png from its history.

Every training program (tasks.pretrain, tasks.classify, tasks.tag,
tasks.squad, tasks.multiple_choice, tasks.recommend, tasks.demo) draws
OUTPUT_DIR/history.png as it trains; this tool redraws it, for example
after a run was killed or while one is still going (see
`bert_keras.training.history_plots`). Imports neither TensorFlow nor Keras.

Example:
    python -m tools.plot_history /runs/sst2 /runs/pretraining
"""

import sys

from absl import app

from bert_keras.training.history_plots import write_history_plot
from bert_keras.training.usage_errors import run_program


def main(argv):
    """Draws each directory's curves; one it cannot draw is named and the others still drawn."""
    output_dirs = argv[1:]
    if not output_dirs:
        raise app.UsageError("Give one or more OUTPUT_DIRs of training runs.")
    failed = 0
    for output_dir in output_dirs:
        try:
            print(write_history_plot(output_dir))
        except (OSError, ValueError) as error:
            print(f"plot_history: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    run_program(main)
