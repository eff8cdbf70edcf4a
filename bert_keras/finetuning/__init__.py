"""Fine-tuning runs: a task's data, a model from a checkpoint, training and the task's metrics."""
