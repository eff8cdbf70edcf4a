"""How every benchmark hands back its measurements as data: `--json_output`.

Importing this module defines the `--json_output` flag. A benchmark builds
one row per number it prints beside a peer's (`measurement`), or a row that
says why a number is missing (`failure`), and passes them to
`write_measurements`, which writes them as a JSON list when the flag is set
and does nothing otherwise. `benchmarks.report` runs the benchmarks with the
flag and gathers the rows into one report.

This is its own module rather than part of `benchmarks.common` because
common's flags (`--batch_size`, `--sequence_length`) clash with the tokenizer's
and the serving benchmark's own flags of those names.

    from benchmarks import measurements

    measurements.write_measurements([measurements.measurement(...)])
"""

import json

from absl import flags

from benchmarks import flag_checks
from bert_keras.atomic_files import write_text

JSON_OUTPUT = flags.DEFINE_string(
    "json_output", None, "Also write the measurements as a JSON list of rows to this file."
)
flag_checks.require_writable_path(JSON_OUTPUT)


def measurement(
    benchmark,
    measure,
    ours,
    peer,
    peer_value,
    *,
    backend=None,
    higher_is_better=True,
    settings="",
):
    """One row: our value of `measure` beside `peer`'s, and the ratio ours / peer.

    Example:
    >>> row = measurement("backbone", "train step seq/s", 30.0, "keras-hub", 20.0, backend="jax")
    >>> row["ratio"], row["higher_is_better"]
    (1.5, True)
    """
    return {
        "benchmark": benchmark,
        "backend": backend,
        "measure": measure,
        "ours": float(ours),
        "peer": peer,
        "peer_value": None if peer_value is None else float(peer_value),
        "ratio": float(ours) / float(peer_value) if peer_value else None,
        "higher_is_better": higher_is_better,
        "settings": settings,
    }


def failure(benchmark, error, *, backend=None, measure=None, peer=None, settings=""):
    """A row for a measurement that did not happen (the benchmark failed, the peer is missing).

    Example:
    >>> failure("create_pretraining_data", "Model Garden not installed", peer="Model Garden")["error"]
    'Model Garden not installed'
    """
    return {
        "benchmark": benchmark,
        "backend": backend,
        "measure": measure,
        "ours": None,
        "peer": peer,
        "peer_value": None,
        "ratio": None,
        "higher_is_better": True,
        "settings": settings,
        "error": str(error),
    }


def write_measurements(rows, path=None):
    """Writes `rows` as JSON to `path` (default `--json_output`), atomically; no path: nothing.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.json")
    >>> write_measurements([failure("tokenizer", "no vocabulary")], path)
    >>> json.load(open(path))[0]["error"]
    'no vocabulary'
    """
    path = path or JSON_OUTPUT.value
    if path:
        write_text(path, json.dumps(rows, indent=1) + "\n")
