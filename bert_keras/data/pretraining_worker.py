"""Worker processes that make pretraining shards, and the messages they exchange.

`pretraining_corpus` tokenizes in its main process, which holds TensorFlow,
and hands each shard's token ids to a worker process: the worker makes the
shard's instances (`pretraining_instances`) and its records
(`example_encoding`) with numpy alone, so it holds a shard's instances but no
TensorFlow, and starts quickly. `WorkerPool` is the main process's side,
`serve` the worker's loop.

A message is a JSON header line, then the raw bytes of the numpy arrays that
the header names with their dtypes and shapes, read straight into new arrays.
No pickle: unpickling can run code, so nothing a worker sends can run code in
the main process. The main process sends a task (`write_shard_task`); the
worker answers with {"kind": "statistics"}, {"kind": "records"} messages
(arrays "data" and "lengths") and {"kind": "end"}, or {"kind": "error"}.
"""

import dataclasses
import json
import os
import queue
import subprocess
import sys
import threading
import traceback
from concurrent import futures

import numpy as np

from bert_keras.data import example_encoding
from bert_keras.data import pretraining_instances

_WORKER_MAIN = """
import sys
sys.path.insert(0, sys.argv[1])
from bert_keras.data.pretraining_worker import serve
serve(sys.stdin.buffer, sys.stdout.buffer)
"""


def worker_command():
    """The command line of a worker process: `serve` on its stdin and stdout.

    The worker imports this module from the copy of bert_keras that this
    process runs, whatever its working directory and PYTHONPATH.

    Example:
    >>> import subprocess
    >>> subprocess.run(worker_command(), input=b"", capture_output=True).returncode
    0
    """
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-c", _WORKER_MAIN, package_parent]


def shard_records(documents, special_tokens, options, shard_index, rows_per_batch=None):
    """A shard's statistics and its serialized records, batch by batch.

    A worker's whole job. The records are encoded lazily, `rows_per_batch`
    at a time (by default 2048 at `max_seq_length=128`, fewer for longer
    sequences: about 2 MB of records), so that whoever writes them holds one
    batch at a time.

    Returns:
        `(statistics, batches)`: a dict of counts and an iterator of
        `(data, lengths)` pairs: the bytes of serialized `tf.train.Example`s
        one after the other ([bytes] uint8) and the byte count of each
        ([records] int64).

    Example:
    >>> from bert_keras.data.pretraining_instances import Documents, InstanceOptions
    >>> from bert_keras.data.pretraining_instances import SpecialTokens
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
    >>> statistics, batches = shard_records(documents, SpecialTokens(2, 3, 4, 12),
    ...     InstanceOptions(max_seq_length=8, dupe_factor=1), shard_index=0)
    >>> sum(len(lengths) for _, lengths in batches) == statistics["examples"]
    True
    """
    if documents.num_documents == 0:
        return {}, iter([])
    instances = pretraining_instances.create_instances(
        documents, special_tokens, options, shard_index
    )
    rows_per_batch = rows_per_batch or max(1, (1 << 18) // options.max_seq_length)
    batches = (
        example_encoding.encode_example_batch(instances.take(slice(start, start + rows_per_batch)))
        for start in range(0, len(instances), rows_per_batch)
    )
    return instances.statistics(), batches


def write_message(stream, header, arrays=None):
    """Writes `header` (a dict of JSON values) and numpy `arrays` (by name).

    Example:
    >>> import io
    >>> stream = io.BytesIO()
    >>> write_message(stream, {"kind": "records"}, {"lengths": np.array([3, 4])})
    >>> _ = stream.seek(0)
    >>> read_message(stream)
    ({'kind': 'records'}, {'lengths': array([3, 4])})
    """
    arrays = {name: np.ascontiguousarray(array) for name, array in (arrays or {}).items()}
    layout = [[name, array.dtype.str, list(array.shape)] for name, array in arrays.items()]
    stream.write(json.dumps({**header, "arrays": layout}).encode() + b"\n")
    for array in arrays.values():
        stream.write(array.reshape(-1).view(np.uint8))
    stream.flush()


def read_message(stream):
    """Reads what `write_message` wrote: `(header, arrays)`.

    Raises EOFError when the stream ends before or inside a message, and
    ValueError for an array that is not of numbers.

    Example:
    >>> import io
    >>> read_message(io.BytesIO(b""))
    Traceback (most recent call last):
    ...
    EOFError: The stream ended before a message.
    """
    line = stream.readline()
    if not line.endswith(b"\n"):
        raise EOFError(
            "The stream ended before a message."
            if not line
            else "The stream ended inside a message."
        )
    header = json.loads(line)
    arrays = {}
    for name, dtype, shape in header.pop("arrays"):
        dtype = np.dtype(dtype)
        if dtype.kind not in "biuf":
            raise ValueError(
                f"Message array {name!r} has dtype {dtype}; messages hold numbers only."
            )
        array = np.empty(shape, dtype)
        buffer, filled = memoryview(array.reshape(-1).view(np.uint8)), 0
        while filled < len(buffer):
            count = stream.readinto(buffer[filled:])
            if not count:
                raise EOFError(f"The stream ended inside message array {name!r}.")
            filled += count
        arrays[name] = array
    return header, arrays


def write_shard_task(stream, documents, special_tokens, options, shard_index):
    """Sends a `shard_records` call to a worker process (see `serve`).

    Example:
    >>> import io
    >>> from bert_keras.data.pretraining_instances import Documents, InstanceOptions
    >>> from bert_keras.data.pretraining_instances import SpecialTokens
    >>> stream = io.BytesIO()
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
    >>> write_shard_task(stream, documents, SpecialTokens(2, 3, 4, 12), InstanceOptions(), 7)
    >>> _ = stream.seek(0)
    >>> header, arrays = read_message(stream)
    >>> header["shard_index"], arrays["tokens"].tolist()
    (7, [5, 6, 7, 8, 9, 10])
    """
    arrays = {
        "tokens": documents.tokens,
        "sentence_starts": documents.sentence_starts,
        "document_starts": documents.document_starts,
    }
    if special_tokens.is_continuation is not None:
        arrays["is_continuation"] = special_tokens.is_continuation
    ids = {
        name: int(getattr(special_tokens, name))
        for name in ("cls_id", "sep_id", "mask_id", "vocabulary_size")
    }
    header = {
        "shard_index": shard_index,
        "special_tokens": ids,
        "options": dataclasses.asdict(options),
    }
    write_message(stream, header, arrays)


def _run_task(header, arrays, send):
    """Runs a `write_shard_task` message, sending its replies with `send`."""
    statistics, batches = shard_records(
        pretraining_instances.Documents(
            arrays["tokens"], arrays["sentence_starts"], arrays["document_starts"]
        ),
        pretraining_instances.SpecialTokens(
            **header["special_tokens"], is_continuation=arrays.get("is_continuation")
        ),
        pretraining_instances.InstanceOptions(**header["options"]),
        header["shard_index"],
    )
    send({"kind": "statistics", "statistics": statistics})
    for data, lengths in batches:
        send({"kind": "records"}, {"lengths": lengths, "data": data})
    send({"kind": "end"})


def serve(tasks, results):
    """A worker process's loop: shard tasks in, records out, as messages.

    Reads `write_shard_task` messages from the binary stream `tasks` until it
    ends; for each writes {"kind": "statistics"}, then {"kind": "records"}
    messages (arrays "data" and "lengths", as `shard_records` batches) and
    {"kind": "end"}, or {"kind": "error", "traceback": ...} on failure. A
    thread keeps reading tasks while one is computed, so a sender never
    blocks on a full pipe while this process writes results. Once no one
    reads `results` (the main process was killed), the process exits at
    once, with status 0 and nothing on stderr.
    """
    inbox = queue.Queue()

    def read_tasks():
        while True:
            try:
                inbox.put(read_message(tasks))
            except (EOFError, OSError):
                inbox.put(None)
                return
            except Exception:  # a bad message: report it, then stop  # noqa: BLE001
                inbox.put(traceback.format_exc())
                inbox.put(None)
                return

    def send(header, arrays=None):
        write_message(results, header, arrays)

    threading.Thread(target=read_tasks, daemon=True).start()
    try:
        while (task := inbox.get()) is not None:
            _answer(task, send)
    except BrokenPipeError:  # the main process is gone (killed, say): no one reads on
        # Exit at once: the interpreter's shutdown would flush the results into
        # the broken pipe, and abort where the reading thread holds `tasks`.
        os._exit(0)


def _answer(task, send):
    """Sends a task's records, or the error it raised (unless the error is the reader's absence)."""
    try:
        if isinstance(task, str):
            raise ValueError(f"Unreadable task message:\n{task}")
        _run_task(*task, send)
    except BrokenPipeError:
        raise
    except Exception:  # the main process reports it with the shard  # noqa: BLE001
        send({"kind": "error", "traceback": traceback.format_exc()})


class WorkerPool:
    """Worker processes, one per thread of a thread pool that runs shards.

    Each shard goes to whichever worker is idle, so no worker waits while
    another has a backlog (shards differ in size: the last can be twice
    the others). The processes start at once, so that they load numpy
    while this one loads TensorFlow and builds the tokenizer. A single
    worker is a process too: this one holds TensorFlow already, and the
    peak memory of a shard's instances would come on top of it.

    Example:
    >>> from bert_keras.data.pretraining_instances import Documents, InstanceOptions
    >>> from bert_keras.data.pretraining_instances import SpecialTokens
    >>> def write(statistics, batches):  # what a shard writer does with a shard
    ...     return statistics["examples"] == sum(len(lengths) for _, lengths in batches)
    >>> pool = WorkerPool(num_workers=1)
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
    >>> shard = pool.executor.submit(pool.make_shard, documents, SpecialTokens(2, 3, 4, 12),
    ...     InstanceOptions(max_seq_length=8, dupe_factor=1), 0, write)
    >>> shard.result()
    True
    >>> pool.close()
    """

    def __init__(self, num_workers):
        self._processes = [
            subprocess.Popen(
                worker_command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            for _ in range(num_workers)
        ]
        unclaimed = list(self._processes)
        self._thread_state = threading.local()

        def claim_a_process():  # each thread of the pool owns one process
            self._thread_state.process = unclaimed.pop()

        self.executor = futures.ThreadPoolExecutor(num_workers, initializer=claim_a_process)

    def make_shard(self, documents, special_tokens, options, shard_index, write):
        """Has this thread's worker make a shard; returns `write(statistics, batches)`.

        `batches` yields `(data, lengths)` record batches and must be read to
        its end. After a failure the worker is stopped: its stream may be
        cut in the middle of a message.
        """
        process = self._thread_state.process
        if process is None:
            raise RuntimeError(
                f"Shard {shard_index}: the worker process was stopped after an earlier error."
            )
        try:
            write_shard_task(process.stdin, documents, special_tokens, options, shard_index)
            statistics = self._receive(process, shard_index)["statistics"]
            return write(statistics, self._batches(process, shard_index))
        except BaseException:
            process.kill()
            self._thread_state.process = None
            raise

    def _receive(self, process, shard_index):
        try:
            header, arrays = read_message(process.stdout)
        except EOFError:
            raise RuntimeError(
                f"A worker process exited (code {process.wait()}) while making shard {shard_index}."
            ) from None
        if header["kind"] == "error":
            raise RuntimeError(
                f"Shard {shard_index} failed in a worker process:\n{header['traceback']}"
            )
        return {**header, **arrays}

    def _batches(self, process, shard_index):
        while (message := self._receive(process, shard_index))["kind"] == "records":
            yield message["data"], message["lengths"]

    def close(self):
        """Waits for the running shards, drops the queued ones, ends the workers."""
        self.executor.shutdown(cancel_futures=True)
        for process in self._processes:
            process.stdin.close()
        for process in self._processes:
            process.stdout.close()
            process.wait()
