"""One BERT pretraining run: records in, a resumable `fit`, history and TensorBoard logs, a checkpoint out.

Layout of `output_dir`:

- `checkpoints/ckpt-{step}.weights.h5` + `.json`: model and optimizer state
  every `save_checkpoints_steps` (see `CheckpointManager`), the last
  `keep_checkpoint_max` kept;
- `history.jsonl`, `history.png`: a line per checkpoint interval (step, loss, masked-LM
  loss and accuracy, next-sentence loss and accuracy, learning rate,
  examples/s), appended across resumptions, each step once;
- `tensorboard/`: the same scalars for TensorBoard, at the training step;
- `export/`: the final backbone and both pretraining heads in the project's
  checkpoint format (what `BertBackbone.save_to_preset` writes, plus the
  heads; `BertBackbone.from_preset` and `transformers.BertForPreTraining`
  both read it).

Started again with the same settings, a run continues from its newest
checkpoint: weights, optimizer moments and iterations (so the learning-rate
schedule), and the data position: the input pipeline is seeded and
deterministic, and skips the batches the checkpointed steps consumed.

Two-phase pretraining (Devlin et al. §A.2: 90% of the steps at 128 tokens,
then 10% at 512) is two runs: phase 2 has its own `output_dir`, records made
with `--max_seq_length=512` and `init_checkpoint` set to phase 1's
`export/`, which holds the heads too. Every preset has 512 learned positions
from the start, so nothing is resized: phase 1 trains the first 128 and
phase 2 all of them. `max_seq_length` above the backbone's
`max_sequence_length` is refused before training.
"""

import contextlib
import dataclasses
import inspect
import os
import re

import keras
from absl import logging

from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import original
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.config_arguments import SIZE_ARGUMENTS
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.checkpoints.vocabulary import upper_case_warning
from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.pretraining_corpus import check_shards_finished
from bert_keras.data.pretraining_corpus import resolve_input_files
from bert_keras.data.pretraining_records import pretraining_dataset
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import PRETRAINING_HEADS
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.checkpoint_weights import exported_backbone_config
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.models.layout_map import bert_layout_map
from bert_keras.models.layout_map import check_model_splits
from bert_keras.models.presets import backbone_preset_config
from bert_keras.training.callbacks import HistoryPlot
from bert_keras.training.callbacks import JsonLinesHistory
from bert_keras.training.callbacks import PeriodicCheckpoint
from bert_keras.training.callbacks import StepTensorBoard
from bert_keras.training.callbacks import TrainingProgress
from bert_keras.training.checkpoint_manager import CheckpointManager
from bert_keras.training.checkpoint_manager import check_same
from bert_keras.training.checkpoint_manager import differing_values
from bert_keras.training.data_parallel import DataParallel
from bert_keras.training.execution import Execution
from bert_keras.training.history_records import read_history
from bert_keras.training.optimizers import GLOBAL_CLIPNORM
from bert_keras.training.optimizers import OPTIMIZERS
from bert_keras.training.optimizers import create_optimizer

CHECKPOINT_DIR = "checkpoints"
HISTORY_FILE = "history.jsonl"
TENSORBOARD_DIR = "tensorboard"
EXPORT_DIR = "export"
# The precision whose optimizer (loss scaling) holds more variables than the others'.
LOSS_SCALED_PRECISION = "float16"
# What makes two backbones' weights interchangeable: their sizes.
ARCHITECTURE_KEYS = SIZE_ARGUMENTS


def resolve_backbone_config(preset=None, bert_config_file=None):
    """`BertBackbone` arguments from a preset name or a config file (or None for neither).

    Args:
        preset: a name in `bert_keras.models.presets.BACKBONE_PRESETS`.
        bert_config_file: the original release's `bert_config.json` or a
            Hugging Face `config.json` (told apart by the file name).

    Example:
    >>> resolve_backbone_config(preset="bert_tiny")["num_layers"]
    2
    >>> resolve_backbone_config(preset="bert_tiny", bert_config_file="bert_config.json")
    Traceback (most recent call last):
    ...
    ValueError: Give a preset or a bert_config_file, not both.
    """
    if preset and bert_config_file:
        raise ValueError("Give a preset or a bert_config_file, not both.")
    if preset:
        return backbone_preset_config(preset)
    if not bert_config_file:
        return None
    if not os.path.isfile(bert_config_file):
        raise FileNotFoundError(f"bert_config_file {bert_config_file!r} does not exist.")
    directory, name = os.path.split(os.path.abspath(bert_config_file))
    if name == original.CONFIG_FILE:
        return original.read_config(directory)
    if name == huggingface.CONFIG_FILE:
        return huggingface.read_config(directory)[0]
    raise ValueError(
        f"bert_config_file {bert_config_file!r}: expected a file named {original.CONFIG_FILE} "
        f"(original BERT) or {huggingface.CONFIG_FILE} (Hugging Face)."
    )


@dataclasses.dataclass
class PretrainingConfig:
    """The settings of a pretraining run (the flags of `tasks/pretrain.py`).

    Attributes:
        input_file: pretraining records: globs, comma separated.
        output_dir: checkpoints, history, TensorBoard logs and the export.
        backbone_config: `BertBackbone` arguments; None takes
            `init_checkpoint`'s.
        init_checkpoint: a checkpoint directory (any format
            `load_checkpoint` reads) whose backbone, and heads when it has
            them, start a fresh run. Ignored when resuming.
        vocab_file: vocab.txt copied into the export (optional).
        do_lower_case: the vocabulary's casing, for the export.
        max_seq_length: the records' sequence length.
        max_predictions_per_seq: the records' masked positions per sequence.
        train_batch_size: sequences per batch.
        num_train_steps: optimizer steps of the run.
        num_warmup_steps: optimizer steps of linear warmup.
        learning_rate: peak learning rate.
        save_checkpoints_steps: optimizer steps between checkpoints (and
            history lines).
        optimizer: "adamw" or "lamb".
        weight_decay: decoupled weight decay (not on layer norms or biases).
        mixed_precision: "none", "bfloat16" or "float16" (with loss scaling).
        gradient_accumulation_steps: batches per optimizer step.
        steps_per_execution: batches per compiled call.
        jit_compile: XLA-compile the training step where XLA can run it
            (`DataParallel.jit_compile`): None or True compile unless this is
            False (to debug eagerly); on tensorflow, Keras' "auto" would leave
            XLA off on CPUs, where the compiled step is faster. Keras' torch
            backend runs eagerly either way (True there is warned about as
            ignored; None is not).
        seed: seeds the weights, dropout and the data order.
        keep_checkpoint_max: checkpoints kept.
        distribution: "none", "data_parallel" (every local device trains
            on a slice of each `train_batch_size` batch; jax and tensorflow)
            or "model_parallel" (jax: the weights split as
            `bert_layout_map` says, too); see `DataParallel`.
        mesh_shape: (batch, model) device counts of "model_parallel".
        bucket_by_length: batch records of one rounded length together
            (`pretraining_dataset(bucket_by_length=True)`): for records of
            short and long sequences mixed.
        compilation_cache_dir: where XLA's compiled programs stay for later
            runs (jax; `Execution.use_compilation_cache`), or None.
    """

    input_file: str
    output_dir: str
    backbone_config: dict = None
    init_checkpoint: str = None
    vocab_file: str = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    train_batch_size: int = 32
    num_train_steps: int = 100_000
    num_warmup_steps: int = 10_000
    learning_rate: float = 1e-4
    save_checkpoints_steps: int = 1000
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    mixed_precision: str = "none"
    gradient_accumulation_steps: int = 1
    steps_per_execution: int = 1
    jit_compile: bool | None = None
    seed: int = 12345
    keep_checkpoint_max: int = 5
    distribution: str = "none"
    mesh_shape: tuple = None
    bucket_by_length: bool = False
    compilation_cache_dir: str = None

    @property
    def execution(self):
        """The distribution, precision and compilation settings, as an `Execution`."""
        return Execution(
            self.distribution,
            self.mixed_precision,
            self.jit_compile,
            self.steps_per_execution,
            self.mesh_shape,
            self.compilation_cache_dir,
        )

    def validate(self):
        """Raises ValueError naming the first setting out of range.

        Example:
        >>> PretrainingConfig("records", "out", num_train_steps=0).validate()
        Traceback (most recent call last):
        ...
        ValueError: num_train_steps is 0 but must be at least 1.
        """
        for name in (
            "max_seq_length",
            "max_predictions_per_seq",
            "train_batch_size",
            "num_train_steps",
            "save_checkpoints_steps",
            "gradient_accumulation_steps",
            "steps_per_execution",
            "keep_checkpoint_max",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is {getattr(self, name)} but must be at least 1.")
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(
                f"num_warmup_steps is {self.num_warmup_steps} but must be in "
                f"[0, num_train_steps={self.num_train_steps}]."
            )
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate is {self.learning_rate} but must be > 0.")
        if not self.weight_decay >= 0:  # NaN too
            raise ValueError(f"weight_decay is {self.weight_decay} but must be >= 0.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer is {self.optimizer!r} but must be one of {list(OPTIMIZERS)}."
            )
        self.execution.validate()
        for name in ("save_checkpoints_steps", "num_train_steps"):
            batches = getattr(self, name) * self.gradient_accumulation_steps
            if batches % self.steps_per_execution:
                raise ValueError(
                    f"{name} x gradient_accumulation_steps is {batches} batches, not a multiple "
                    f"of steps_per_execution={self.steps_per_execution}."
                )
        if self.backbone_config is None and not self.init_checkpoint:
            raise ValueError(
                "Give a backbone config (a preset or bert_config_file) or an init_checkpoint."
            )
        if self.vocab_file and not os.path.isfile(self.vocab_file):
            raise FileNotFoundError(f"vocab_file {self.vocab_file!r} does not exist.")


class PretrainingRun:
    """Builds, resumes, trains and exports a `BertPretrainer` on pretraining records.

    Everything is checked in the constructor, before training: the settings,
    the records' lengths, an `init_checkpoint`'s or a resumed checkpoint's
    architecture, and the data-order settings of a resumed run.

    Args:
        config: a `PretrainingConfig`.

    Example:
    >>> import os, tempfile
    >>> import tensorflow as tf
    >>> from bert_keras.data.pretraining_records import original_feature_spec
    >>> directory = tempfile.mkdtemp()
    >>> example = tf.train.Example()
    >>> for name, spec in original_feature_spec(8, 2).items():
    ...     values = example.features.feature[name]
    ...     (values.float_list if spec.dtype == tf.float32 else values.int64_list).value.extend(
    ...         [1] * spec.shape[0])
    >>> with tf.io.TFRecordWriter(os.path.join(directory, "records.tfrecord")) as writer:
    ...     for _ in range(4):
    ...         writer.write(example.SerializeToString())
    >>> tiny = {"vocabulary_size": 10, "num_layers": 1, "num_heads": 2, "hidden_dim": 8,
    ...         "intermediate_dim": 16, "max_sequence_length": 8}
    >>> config = PretrainingConfig(
    ...     input_file=os.path.join(directory, "*.tfrecord"), output_dir=os.path.join(directory, "run"),
    ...     backbone_config=tiny, max_seq_length=8, max_predictions_per_seq=2,
    ...     train_batch_size=2, num_train_steps=3, num_warmup_steps=1, save_checkpoints_steps=2)
    >>> history = PretrainingRun(config).train(verbose=0)
    >>> [record["step"] for record in history]
    [2, 3]
    >>> {"checkpoints", "export", "history.jsonl"} <= set(os.listdir(config.output_dir))
    True
    """

    def __init__(self, config):
        config.validate()
        config.execution.use_compilation_cache()
        self.config = config
        self.replicas = DataParallel(config.distribution, config.mesh_shape, bert_layout_map)
        self.replicas.check_batch_size(config.train_batch_size)
        keras.utils.set_random_seed(config.seed)
        self.checkpoints = CheckpointManager(
            os.path.join(config.output_dir, CHECKPOINT_DIR),
            config.keep_checkpoint_max,
            writes_files=self.replicas.is_chief,
        )
        if os.path.isdir(self.checkpoints.directory) and self.replicas.is_chief:
            self.checkpoints.remove_partial_files()
        self.resumed = self.checkpoints.latest()
        if not self.resumed:
            _check_no_other_export(config.output_dir)
        self.input_files = _matching_files(config.input_file)
        initial = None if self.resumed else self._init_checkpoint()
        backbone_config = self._backbone_config(initial)
        self._check_resumable(backbone_config)
        self._check_sequence_length(backbone_config)
        check_model_splits(_architecture(backbone_config), self.replicas.model_splits)
        self.vocabulary_size = _architecture(backbone_config)["vocabulary_size"]
        self.id_limit, self.id_source = self._id_limit(backbone_config)
        self.dataset(skip_batches=0)  # checks the records' lengths against the settings
        self.initial_step = self.resumed.step if self.resumed else 0
        if self.initial_step > config.num_train_steps:
            raise ValueError(
                f"{self.resumed.weights_path} is at step {self.initial_step}, past "
                f"num_train_steps={config.num_train_steps}."
            )
        with self.replicas.scope():
            self.model = self._build_model(backbone_config, initial)
            if self.resumed:
                self.checkpoints.restore(self.model, self.resumed)
        self.replicas.prepare(self.model)

    def _init_checkpoint(self):
        if not self.config.init_checkpoint:
            return None
        return read_checkpoint(self.config.init_checkpoint)

    def _backbone_config(self, initial):
        config = self.config.backbone_config
        if initial is not None:
            if config is not None:
                check_same(
                    _architecture(initial.backbone_config),
                    _architecture(config),
                    "architecture",
                    f"init_checkpoint {self.config.init_checkpoint}",
                )
            config = config or initial.backbone_config
        elif config is None:
            config = self.resumed.metadata["backbone_config"]
        return {**config, "dtype": self.config.execution.dtype_policy}

    def _data_order(self):
        """The settings that decide which examples form which batch at which step."""
        return {
            "save_checkpoints_steps": self.config.save_checkpoints_steps,
            "input_files": self.input_files,
            # Records made again under the same names (another seed, say) differ in size.
            "input_file_bytes": [os.path.getsize(path) for path in self.input_files],
            "train_batch_size": self.config.train_batch_size,
            "gradient_accumulation_steps": self.config.gradient_accumulation_steps,
            "max_seq_length": self.config.max_seq_length,
            "max_predictions_per_seq": self.config.max_predictions_per_seq,
            "seed": self.config.seed,
            # Only when set: checkpoints of runs before the setting existed still resume.
            **({"bucket_by_length": True} if self.config.bucket_by_length else {}),
        }

    def _check_resumable(self, backbone_config):
        if not self.resumed:
            return
        source = self.resumed.weights_path
        if "architecture" not in self.resumed.metadata:
            raise ValueError(
                f"{source} is not a pretraining checkpoint (another program, tasks.recommend "
                "say, wrote it into this output_dir); choose another output_dir."
            )
        check_same(
            self.resumed.metadata["architecture"],
            _architecture(backbone_config),
            "architecture",
            source,
        )
        # A checkpoint of an unbucketed run records no bucket_by_length.
        unset = {"bucket_by_length": False}
        saved_order = {**unset, **self.resumed.metadata["data_order"]}
        order = {**unset, **self._data_order()}
        if "input_file_bytes" not in saved_order:  # a checkpoint of an earlier version
            del order["input_file_bytes"]
        check_same(
            saved_order,
            order,
            "data order (resuming needs the same records and batching)",
            source,
        )
        self._check_precision(source)
        changed = differing_values(self.resumed.metadata.get("schedule", {}), self._schedule())
        if "schedule" in self.resumed.metadata and changed:
            logging.warning(
                "Resuming %s with another learning-rate schedule from step %d on: %s.",
                source,
                self.resumed.step,
                "; ".join(changed),
            )

    def _check_precision(self, source):
        """Refuses a change to or from float16: its loss-scaling optimizer holds other variables.

        Keras would skip the checkpoint's optimizer state, restarting the
        moments and the step count (so the learning-rate schedule). Between
        "none" and "bfloat16" the optimizer state is the same and carries
        over. Checkpoints written before the setting was recorded are
        checked as they load (`CheckpointManager.restore`).
        """
        saved = self.resumed.metadata.get("mixed_precision")
        current = self.config.mixed_precision
        if saved is None or saved == current:
            return
        change = f"mixed_precision is {saved!r} there but {current!r} here"
        if LOSS_SCALED_PRECISION in (saved, current):
            raise ValueError(
                f"{source} was written with another mixed_precision: {change}. float16's "
                "loss-scaling optimizer holds other variables, so the optimizer state (moments, "
                f"step, learning-rate schedule) would restart: resume with mixed_precision={saved}."
            )
        logging.warning(
            "Resuming %s with another precision from step %d on: %s.",
            source,
            self.resumed.step,
            change,
        )

    def _schedule(self):
        """The settings of the learning rate at each step, which a resumed run may change."""
        config = self.config
        return {
            "learning_rate": config.learning_rate,
            "num_train_steps": config.num_train_steps,
            "num_warmup_steps": config.num_warmup_steps,
            "optimizer": config.optimizer,
            "weight_decay": config.weight_decay,
        }

    def _check_sequence_length(self, backbone_config):
        positions = _architecture(backbone_config)["max_sequence_length"]
        if self.config.max_seq_length > positions:
            raise ValueError(
                f"max_seq_length is {self.config.max_seq_length} but the backbone has only "
                f"{positions} position embeddings (max_sequence_length)."
            )

    def _id_limit(self, backbone_config):
        """(The ids the records may hold, what sets them): the vocab file's tokens, or the table's.

        Each token of the vocab file needs a word embedding: ids past the
        table read none (on jax and tensorflow NaN, and the run trains on NaN
        losses to the end; on torch it fails in the embedding). And the
        records' ids must be the vocab file's, which the export ships.
        """
        embeddings = _architecture(backbone_config)["vocabulary_size"]
        if not self.config.vocab_file:
            return embeddings, f"the vocabulary_size {embeddings} of the backbone"
        vocabulary = read_vocabulary(self.config.vocab_file)
        if self.config.do_lower_case and (
            warning := upper_case_warning(vocabulary, self.config.vocab_file)
        ):
            logging.warning("%s The export's tokenizer would lower-case its text.", warning)
        tokens = len(vocabulary)
        if tokens > embeddings:
            raise ValueError(
                f"vocab_file {self.config.vocab_file} holds {tokens} tokens but the backbone's "
                f"vocabulary_size is {embeddings}: give a config with vocab_size {tokens}."
            )
        return tokens, f"the {tokens} tokens of vocab_file {self.config.vocab_file}"

    def _build_model(self, backbone_config, initial):
        model = BertPretrainer(BertBackbone.from_config(backbone_config))
        if initial is not None:
            heads = apply_checkpoint(model, initial, heads=PRETRAINING_HEADS)
            logging.info("Initialised from %s (heads: %s).", self.config.init_checkpoint, heads)
        config = self.config
        accumulation = config.gradient_accumulation_steps
        model.compile(
            optimizer=create_optimizer(
                config.learning_rate,
                num_train_steps=config.num_train_steps,
                num_warmup_steps=config.num_warmup_steps,
                optimizer=config.optimizer,
                weight_decay=config.weight_decay,
                global_clipnorm=self.replicas.clipnorm(GLOBAL_CLIPNORM),
                gradient_accumulation_steps=accumulation if accumulation > 1 else None,
            ),
            steps_per_execution=config.steps_per_execution,
            jit_compile=self.replicas.jit_compile(config.jit_compile is not False),
        )
        return model

    def dataset(self, skip_batches):
        """The shuffled, repeated training batches from batch `skip_batches` on."""
        config = self.config
        dataset = pretraining_dataset(
            self.input_files,
            config.max_seq_length,
            config.max_predictions_per_seq,
            config.train_batch_size,
            shuffle=True,
            repeat=True,
            seed=config.seed,
            skip_batches=skip_batches,
            bucket_by_length=config.bucket_by_length,
        )
        return self.replicas.local_share(dataset.map(self._ids_checked))

    def _ids_checked(self, features, labels):
        """The batch, failing on a token id past `id_limit` (no word embedding, or no vocab token)."""
        import tensorflow as tf

        largest = tf.maximum(
            tf.reduce_max(features["token_ids"]), tf.reduce_max(labels["masked_lm_ids"])
        )
        check = tf.debugging.assert_less(
            largest,
            tf.cast(self.id_limit, largest.dtype),
            message=(
                f"The records ({self.config.input_file}) hold a token id past {self.id_source}: "
                f"{_LARGER_VOCABULARY}"
            ),
        )
        with tf.control_dependencies([check]):
            return tf.nest.map_structure(tf.identity, (features, labels))

    def train(self, verbose=1):
        """Trains from the current step to `num_train_steps`, then exports; returns the history.

        Returns:
            The records of `history.jsonl` (every step of this run and the
            runs it resumed).
        """
        config = self.config
        metadata = {
            "architecture": _architecture(self.model.backbone.get_config()),
            "backbone_config": self.model.backbone.get_config(),
            "data_order": self._data_order(),
            "schedule": self._schedule(),
            "mixed_precision": config.mixed_precision,
        }
        callbacks = [
            TrainingProgress(
                config.train_batch_size, self.initial_step, config.gradient_accumulation_steps
            ),
        ]
        if self.replicas.is_chief:  # one process writes the logs
            callbacks += [
                # A run that starts afresh (no checkpoint to resume) has a history of its own.
                JsonLinesHistory(
                    os.path.join(config.output_dir, HISTORY_FILE), replace=self.resumed is None
                ),
                HistoryPlot(config.output_dir),
                StepTensorBoard(log_dir=os.path.join(config.output_dir, TENSORBOARD_DIR)),
            ]
        else:
            verbose = 0
        callbacks.append(PeriodicCheckpoint(self.checkpoints, metadata))
        for first_step, initial_epoch, epochs, steps_per_epoch in fit_plan(
            self.initial_step, config.save_checkpoints_steps, config.num_train_steps
        ):
            self._fit(first_step, initial_epoch, epochs, steps_per_epoch, callbacks, verbose)
        self.export()
        self.replicas.wait_for_all_processes("exported")
        return read_history(os.path.join(config.output_dir, HISTORY_FILE))

    def _fit(self, step, initial_epoch, epochs, steps_per_epoch, callbacks, verbose):
        import tensorflow as tf

        accumulation = self.config.gradient_accumulation_steps
        with self.replicas.scope(), _records_check_named(tf.errors.InvalidArgumentError):
            self.model.fit(
                self.dataset(skip_batches=step * accumulation),
                initial_epoch=initial_epoch,
                epochs=epochs,
                steps_per_epoch=steps_per_epoch * accumulation,
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,  # the records pipeline shuffles
            )

    def export(self):
        """Writes the backbone and both heads to `output_dir/export` (replacing it).

        Every process reads the weights; only the chief writes them.
        """
        checkpoint = model_checkpoint(
            self.model,
            heads=PRETRAINING_HEADS,
            backbone_config=exported_backbone_config(self.model.backbone),
            vocabulary_file=self.config.vocab_file,
            tokenizer_settings=tokenizer_settings(lowercase=self.config.do_lower_case),
        )
        if not self.replicas.is_chief:
            return None
        directory = os.path.join(self.config.output_dir, EXPORT_DIR)
        write_checkpoint(checkpoint, directory, overwrite=True)
        logging.info("Exported the backbone and pretraining heads to %s.", directory)
        return directory


def _check_no_other_export(output_dir):
    """Refuses an `output_dir` whose export holds another program's model, which a run would replace.

    A pretraining run's own export (both pretraining heads) is replaced, as
    a rerun of the run that wrote it.
    """
    directory = os.path.join(output_dir, EXPORT_DIR)
    if not os.path.isdir(directory):
        return
    # Its config.json names the transformers class of its heads: no weights are read.
    heads_of = {
        architecture: list(heads) for heads, architecture in huggingface.ARCHITECTURES.items()
    }
    heads_of[huggingface.MULTIPLE_CHOICE_ARCHITECTURE] = ["classifier"]
    try:
        heads = heads_of.get(huggingface.read_config(directory)[1])
    except (OSError, ValueError):
        heads = None
    if heads == sorted(PRETRAINING_HEADS):
        return
    held = "no checkpoint it can read" if heads is None else f"a model with the heads {heads}"
    raise ValueError(
        f"{directory} holds {held}, which this run would replace (another program, "
        "tasks.classify say, wrote it into this output_dir); choose another output_dir, "
        "or remove it."
    )


def fit_plan(initial_step, save_checkpoints_steps, num_train_steps):
    """The `fit` calls that take a run from `initial_step` to `num_train_steps`.

    One Keras epoch per checkpoint interval: epochs end at the multiples of
    `save_checkpoints_steps` and at `num_train_steps`; consecutive epochs of
    one length share a call.

    Returns:
        A list of `(first_step, initial_epoch, epochs, steps_per_epoch)`.

    Example:
    >>> fit_plan(0, 100, 250)
    [(0, 0, 2, 100), (200, 2, 3, 50)]
    >>> fit_plan(200, 100, 250)
    [(200, 2, 3, 50)]
    """
    ends = sorted(
        {
            *range(save_checkpoints_steps, num_train_steps + 1, save_checkpoints_steps),
            num_train_steps,
        }
    )
    epoch = sum(end <= initial_step for end in ends)
    step, remaining, plan = initial_step, ends[epoch:], []
    while remaining:
        length = remaining[0] - step
        count = 1
        while count < len(remaining) and remaining[count] - remaining[count - 1] == length:
            count += 1
        plan.append((step, epoch, epoch + count, length))
        step, epoch, remaining = remaining[count - 1], epoch + count, remaining[count:]
    return plan


def _matching_files(input_file):
    """Absolute paths, so a resumed run's check does not depend on the working directory."""
    paths = [os.path.abspath(path) for path in resolve_input_files(input_file)]
    check_shards_finished(paths)
    return paths


_LARGER_VOCABULARY = "they were made with a larger vocab.txt"


@contextlib.contextmanager
def _records_check_named(pipeline_error):
    """Raises `_ids_checked`'s failure, which `pipeline_error` carries inside TensorFlow's text, as an
    `InputFileError` of its own message and the id that failed it."""
    try:
        yield
    except pipeline_error as error:
        found = re.search(
            rf"\[(The records .*?{_LARGER_VOCABULARY})\].*?\[x \(\w+:0\) = \] \[(\d+)\]",
            str(error),
            flags=re.DOTALL,
        )
        if found is None:
            raise
        raise InputFileError(f"{found[1]} (one holds the id {found[2]}).") from None


def _architecture(backbone_config):
    defaults = inspect.signature(BertBackbone.__init__).parameters
    return {key: backbone_config.get(key, defaults[key].default) for key in ARCHITECTURE_KEYS}
