"""The standard metrics of the fine-tuning benchmarks, computed as their official scripts do."""
