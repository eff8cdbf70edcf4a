"""Pretraining runs: records, a BertPretrainer, the paper's recipe, resumable checkpoints, logs, export."""
