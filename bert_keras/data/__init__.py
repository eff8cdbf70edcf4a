"""Record schemas and tf.data pipelines for pretraining and fine-tuning.

Pretraining records, from text to batches:

* `pretraining_instances`: the original BERT algorithm, documents -> masked
  sentence pairs (numpy only).
* `example_encoding`: those pairs -> `tf.train.Example` bytes (numpy only).
* `pretraining_worker`: the worker processes that run both for a shard, and
  the messages they exchange with the main process (numpy only).
* `pretraining_corpus`: a text corpus -> sharded records, streaming, in
  worker processes (behind `tools/create_pretraining_data.py`).
* `pretraining_records`: the original's record schema and a reader that
  yields `BertPretrainer` batches.
* `dynamic_masking`: batches straight from text, masked afresh every epoch.
* `offline_text`: real English prose and a real vocabulary that need no
  download, for demos, tests and benchmarks.

The fine-tuning data sets each have a module (`glue`, `squad`, `swag`,
`conll`, `classification_dataset`, `split_files`).

Recommendation: `interactions` reads user-item logs and splits them
leave-one-out (numpy only); `cloze_instances` makes BERT4Rec's masked
windows and next-item queries.

Modules are imported one by one (nothing here imports them), so that worker
processes can stay free of TensorFlow.
"""
