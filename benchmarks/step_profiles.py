"""Where a training step's time goes: the framework's own profiler over a few steps, summarised.

`profile_table(step, steps, engine, directory)` runs `step` under jax's or
torch's profiler and returns the operations (GPU kernels when a GPU ran
them, else the host's XLA or torch operations) that took the most time, as
a text table: the explanation that an MFU gap needs. Each engine's trace
file stays in `directory` for a closer look (Perfetto, TensorBoard's profile
plugin or chrome://tracing).

    table = profile_table(lambda: model.train_on_batch(x, y), 3, "jax", "/tmp/profile")
"""

import collections
import glob
import gzip
import json
import os

ROWS = 15


def profile_table(step, calls, engine, directory, rows=ROWS, steps_per_call=1):
    """The `rows` costliest operations over `calls` calls of `step`, profiled by `engine`.

    Args:
        step: a function running `steps_per_call` training steps and waiting for them.
        calls: how many calls to profile (after the caller's warm-up).
        engine: "jax" or "torch", the framework whose profiler sees `step`'s work.
        directory: where the trace file goes (created).
        rows: operations listed.
        steps_per_call: training steps per call; the table is per step.

    Example:
    >>> import tempfile, torch
    >>> weight = torch.ones(64, 64, requires_grad=True)
    >>> table = profile_table(lambda: (weight @ weight).sum().backward(), 2, "torch",
    ...                       tempfile.mkdtemp())
    >>> "aten::mm" in table
    True
    """
    os.makedirs(directory, exist_ok=True)
    if engine == "jax":
        seconds = _jax_operation_seconds(step, calls, directory)
    elif engine == "torch":
        seconds = _torch_operation_seconds(step, calls, directory)
    else:
        raise ValueError(f"engine is {engine!r}; profiles exist for 'jax' and 'torch'.")
    return operation_table(seconds, calls * steps_per_call, rows)


def operation_table(seconds, steps, rows=ROWS):
    """A text table of the `rows` largest of `seconds` ({operation: total s}), per step.

    The last line sums every operation, listed or not: on a GPU, the time its
    kernels kept it busy, which the step's wall time exceeds by the gaps
    between kernels.

    Example:
    >>> print(operation_table({"matmul": 0.3, "softmax": 0.1, "add": 0.02}, steps=2, rows=2))
    ms/step  share  operation
       150.0  71.4%  matmul
        50.0  23.8%  softmax
       210.0 100.0%  all operations
    """
    total = sum(seconds.values())
    share = total or 1.0
    lines = ["ms/step  share  operation"]
    for name, value in sorted(seconds.items(), key=lambda item: -item[1])[:rows]:
        shown = name if len(name) <= 90 else name[:87] + "..."
        lines.append(f"{1000 * value / steps:>8.1f} {100 * value / share:>5.1f}%  {shown}")
    lines.append(f"{1000 * total / steps:>8.1f} {100 * total / share:>5.1f}%  all operations")
    return "\n".join(lines)


def _torch_operation_seconds(step, steps, directory):
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    on_gpu = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
    profiler.export_chrome_trace(os.path.join(directory, "torch_trace.json"))
    seconds = {}
    for average in profiler.key_averages():
        if on_gpu and average.device_type != DeviceType.CUDA:
            continue  # an operator's device time is its kernels', which have rows of their own
        # Self time: an operation's own, not its callees' (which have rows of their own).
        microseconds = average.self_device_time_total if on_gpu else average.self_cpu_time_total
        if microseconds > 0:
            seconds[average.key] = microseconds / 1e6
    return seconds


def _jax_operation_seconds(step, steps, directory):
    import jax

    with jax.profiler.trace(directory, create_perfetto_trace=True):
        for _ in range(steps):
            step()
    paths = sorted(
        glob.glob(os.path.join(directory, "**", "perfetto_trace.json.gz"), recursive=True)
    )
    with gzip.open(paths[-1], "rt") as file:
        return trace_operation_seconds(json.load(file))


def trace_operation_seconds(trace):
    """Total seconds per operation name of a Chrome/Perfetto trace from jax's profiler.

    Counts the kernels on the GPU's streams (threads named `Stream...` of
    the `/device:GPU:...` processes; all their threads if none is so named)
    when the trace has any, else the
    operations of XLA's host threads (`tf_XLA...`), its runtime's own events
    (`ThunkExecutor::Execute`, ...) left out.

    Example:
    >>> trace = {"traceEvents": [
    ...     {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
    ...     {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
    ...     {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "Stream #7"}},
    ...     {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "XLA Ops"}},
    ...     {"ph": "X", "pid": 1, "tid": 2, "name": "fusion.3", "dur": 50.0},
    ...     {"ph": "X", "pid": 1, "tid": 1, "name": "gemm", "dur": 30.0},
    ...     {"ph": "X", "pid": 1, "tid": 1, "name": "gemm", "dur": 20.0},
    ...     {"ph": "X", "pid": 2, "tid": 5, "name": "launch", "dur": 90.0}]}
    >>> trace_operation_seconds(trace)
    {'gemm': 5e-05}
    """
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif event.get("ph") == "M" and event.get("name") == "thread_name":
            threads[(event["pid"], event.get("tid"))] = event["args"]["name"]
    on_gpu = {key for key in threads if processes.get(key[0], "").startswith("/device:GPU")}
    gpu_streams = {key for key in on_gpu if threads[key].startswith("Stream")} or on_gpu
    host_compute = {key for key, name in threads.items() if name.startswith("tf_XLA")}
    counted = gpu_streams or host_compute

    seconds = collections.defaultdict(float)
    for event in events:
        if (
            event.get("ph") == "X"
            and (event["pid"], event.get("tid")) in counted
            # On the host, XLA's runtime marks its waits and calls as `Class::method`.
            and (gpu_streams or "::" not in event["name"])
        ):
            seconds[event["name"]] += event.get("dur", 0.0) / 1e6
    return dict(seconds)
