"""Serving exports: SavedModels with the tokenizer in the graph, for stock TF Serving."""
