"""Training: the optimizer recipe and schedules, callbacks, checkpoints, data parallelism, host memory,
and how programs tell usage errors.

Each module is imported by name; this package imports nothing, so a program
can reach `host_memory` before Keras and its backend are loaded.
"""
