"""Record schemas and tf.data pipelines for pretraining.

* `pretraining_instances`: the original BERT algorithm, documents -> masked
  sentence pairs -> `tf.train.Example` bytes (numpy only).
* `pretraining_corpus`: a text corpus -> sharded records, streaming, in
  worker processes (behind `tools/create_pretraining_data.py`).
* `pretraining_records`: the original's record schema and a reader that
  yields `BertPretrainer` batches.
* `dynamic_masking`: batches straight from text, masked afresh every epoch.

Modules are imported one by one (nothing here imports them), so that worker
processes can stay free of TensorFlow.
"""
