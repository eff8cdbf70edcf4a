"""One fine-tuning run for token tagging (CoNLL NER, POS): data, model, conlleval scores, files."""

import time

import tensorflow as tf
from absl import logging

from bert_keras.data.conll import SPLIT_FILES
from bert_keras.data.conll import has_split
from bert_keras.data.conll import is_entity_tag
from bert_keras.data.conll import read_conll
from bert_keras.data.conll import split_path
from bert_keras.data.conll import tag_scheme
from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.length_batching import batch_by_length
from bert_keras.evaluation.conll_metrics import entity_scores
from bert_keras.finetuning.run import STEP_FLAGS
from bert_keras.finetuning.run import FineTuningRun
from bert_keras.finetuning.run import seconds_since
from bert_keras.finetuning.word_windows import tokenize_words
from bert_keras.finetuning.word_windows import word_windows
from bert_keras.models.bert_token_classifier import IGNORED_LABEL
from bert_keras.models.bert_token_classifier import BertTokenClassifier

HEAD_NAME = "token_classifier"


class TaggingRun(FineTuningRun):
    """Reads CoNLL files, builds a `BertTokenClassifier` from a checkpoint, trains, scores.

    Tags are learned and predicted per word on its first word piece; long
    sentences are split into overlapping windows, so every word is tagged
    (see `bert_keras.finetuning.word_windows`). Any tag set is learned:
    entity tags (IOB1, IOB2, IOBES, BILOU) are scored by entities exactly as
    conlleval does, and by tag accuracy; others, such as part of speech, by
    tag accuracy.

    The tags, and the head, come from the checkpoint where it holds a
    token-classification head whose config names its tags (Hugging Face
    `id2label`) and the run does not train or the train file's tags are all
    among them; otherwise from the train file ("O" first, then sorted), with
    a new head (a warning says when it replaces the checkpoint's). A
    fine-tuned tagger thus scores and predicts with its own head and tags;
    a dev tag it does not know is never predicted and counts as wrong, as
    conlleval counts it (a warning names the tag and its first line).

    Args:
        data_dir: directory of train.txt, valid.txt (or dev.txt), test.txt
            (see `bert_keras.data.conll.SPLIT_FILES`); test.txt may hold
            words alone.
        init_checkpoint: checkpoint directory; its vocab.txt and casing are
            used.
        output_dir: eval_results.json and predictions go here.
        max_seq_length: tokens per window.
        seed: seeds Keras, shuffling and dropout.
        execution: an `Execution` (see `FineTuningRun`).
        bucket_by_length: batch training texts by length (see `FineTuningRun`).
        splits: the splits the program's steps read ("train", "dev", "test"
            for --do_train, --do_eval, --do_predict). Without "train" the
            checkpoint's head is kept (train.txt, if there, is not read),
            and a checkpoint without a head naming its tags is refused: it
            would score random weights. The dev and test files among them are
            read and checked at once, before any training. None: "train"
            where train.txt is there, and scoring random weights is only
            warned about.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> import tempfile
    >>> checkpoint, data = tempfile.mkdtemp() + "/tiny", tempfile.mkdtemp()
    >>> vocab = data + "/vocab.txt"
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "is"]
    >>> _ = open(vocab, "w").write("\\n".join(tokens))
    >>> BertBackbone(7, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> for split in ("train", "valid"):
    ...     _ = open(f"{data}/{split}.txt", "w").write("EU B-ORG\\nis O\\n")
    >>> run = TaggingRun(data, checkpoint, tempfile.mkdtemp())
    >>> run.label_names
    ['O', 'B-ORG']
    >>> _ = run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    >>> results = run.evaluate("dev", batch_size=2)
    >>> results["entities"], results["words"], results["tag_scheme"]
    (1, 2, 'IOB2')
    """

    def __init__(
        self, data_dir, init_checkpoint, output_dir, max_seq_length=None, splits=None, **options
    ):
        super().__init__(data_dir, init_checkpoint, output_dir, max_seq_length, **options)
        self._sentences = {}  # split, or (split, "words") -> its sentences (`_read`, `_read_words`)
        for split in splits or ():
            if not has_split(data_dir, split):
                raise ValueError(
                    f"{STEP_FLAGS[split]} reads {' or '.join(SPLIT_FILES[split])}, but {data_dir} "
                    "has none of them."
                )
        for split in splits or ():  # a bad file is an error before training, not after it
            if split == "dev":
                self._read(split)
            elif split == "test":
                self._read_words(split)
        checkpoint_tags = self.checkpoint_label_names(HEAD_NAME)
        if splits is None:
            trains = has_split(data_dir, "train")
        else:
            trains = "train" in splits
        if trains:
            train_tags = self._tags("train")
            self.head_loaded = bool(checkpoint_tags) and train_tags <= set(checkpoint_tags)
            if checkpoint_tags and not self.head_loaded:
                logging.warning(
                    "%s's %s head tags %s, not the train file's %s: a new head, for the train "
                    "file's tags, is trained in its place.",
                    init_checkpoint,
                    HEAD_NAME,
                    checkpoint_tags,
                    sorted(train_tags - set(checkpoint_tags)),
                )
            if not self.head_loaded and len(train_tags) == 1:
                raise InputFileError(
                    f"{split_path(data_dir, 'train')}: every word's tag is "
                    f"{next(iter(train_tags))!r}; a tagger needs two tags or more (the tag is "
                    "the last column)."
                )
            self.label_names = checkpoint_tags if self.head_loaded else _ordered(train_tags)
        elif checkpoint_tags:  # a fine-tuned tagger, to score or predict with: its head, its tags
            self.head_loaded, self.label_names = True, checkpoint_tags
        elif splits is not None and HEAD_NAME in self.checkpoint.head_weights:
            raise ValueError(
                f"{init_checkpoint} has a {HEAD_NAME} head but no names of its tags (config.json "
                "id2label), which --do_eval and --do_predict write: give a checkpoint that names "
                "them (`save_to_preset(..., label_names=tags)`), or --do_train."
            )
        elif splits is not None:
            raise ValueError(
                f"{init_checkpoint} has no {HEAD_NAME} head naming its tags (config.json "
                "id2label), so --do_eval and --do_predict without --do_train would tag with "
                "random weights; --do_train trains one, or give a fine-tuned checkpoint."
            )
        else:  # tags for a head with random weights, scored with a warning
            self.head_loaded = False
            self.label_names = _ordered(self._tags("dev")) if has_split(data_dir, "dev") else []
        if not self.label_names:
            raise ValueError(
                f"No tags: {data_dir} has no train or dev file, and "
                f"{init_checkpoint} names no labels of a {HEAD_NAME} head."
            )
        self._trained = False
        num_classes = len(self.label_names)
        self.model = self.build_model(
            lambda backbone: BertTokenClassifier(backbone, num_classes=num_classes),
            HEAD_NAME if self.head_loaded else None,
            reads_pooler=False,
        )

    def _tags(self, split):
        return {tag for sentence in self._read(split) for tag in sentence.tags}

    def _read(self, split, limit=None):
        """A split's tagged sentences; a whole split is read once (its tags pick the head first)."""
        if limit is not None:
            return read_conll(split_path(self.data_dir, split), limit=limit)
        if split not in self._sentences:
            self._sentences[split] = read_conll(split_path(self.data_dir, split))
        return self._sentences[split]

    def _read_words(self, split):
        """A split's sentences as words, tags ignored (text to tag); read once."""
        if (split, "words") not in self._sentences:
            sentences = read_conll(split_path(self.data_dir, split), tagged=False)
            self._sentences[split, "words"] = sentences
        return self._sentences[split, "words"]

    def train(
        self, batch_size, learning_rate, num_epochs, warmup_proportion=0.1, limit=None, verbose=2
    ):
        """Fine-tunes on train.txt with the paper's AdamW recipe; returns the history.

        The model, with its tag names, goes to OUTPUT_DIR/export (see
        `FineTuningRun.export`).
        """
        sentences = self._read("train", limit=limit)
        label_ids = {name: index for index, name in enumerate(self.label_names)}
        for sentence in sentences:
            for tag, line_number in zip(sentence.tags, sentence.line_numbers):
                if tag not in label_ids:  # a run built without "train" among its splits
                    raise InputFileError(
                        f"{split_path(self.data_dir, 'train')}:{line_number}: tag {tag!r} is not "
                        f"among the head's tags {self.label_names}: a run built with 'train' "
                        "among its splits trains a head for the train file's tags."
                    )
        self._trained = True
        windows = self._windows(
            sentences, [[label_ids[tag] for tag in sentence.tags] for sentence in sentences]
        )
        dataset = batch_by_length(
            tf.data.Dataset.from_tensor_slices((windows.features, windows.labels)).shuffle(
                len(windows), seed=self.seed, reshuffle_each_iteration=True
            ),
            batch_size,
            token_labels_fill=IGNORED_LABEL,
            **self.training_batching(num_epochs),
        )
        history = self.fit(
            self.model,
            dataset,
            len(windows),
            batch_size,
            learning_rate,
            num_epochs,
            warmup_proportion,
            verbose,
        )
        self.export(self.model, HEAD_NAME, label_names=self.label_names)
        return history

    def evaluate(self, split, batch_size):
        """Scores the split's tags; writes the scores and the predicted tags.

        Tag accuracy (conlleval's "accuracy": words tagged right / words)
        always; where every gold tag is an entity tag (`tag_scheme` names a
        scheme), entity precision, recall and F1 as conlleval counts them,
        the entity counts and the scheme. Part-of-speech and other tag sets
        have no entities to count; a file mixing entity tags with others
        (a typo such as "B_PER") is scored by accuracy alone, with a warning
        naming the first odd tag's line.
        """
        start = time.perf_counter()
        self.warn_if_head_untrained(HEAD_NAME)
        path = split_path(self.data_dir, split)
        sentences = self._read(split)
        _warn_of_unknown_tags(path, sentences, self.label_names)
        predicted = self._predict_tags(sentences, batch_size)
        gold = [sentence.tags for sentence in sentences]
        words = sum(len(tags) for tags in gold)
        correct_tags = sum(
            g == p for tags, guesses in zip(gold, predicted) for g, p in zip(tags, guesses)
        )
        scheme = tag_scheme(gold)
        if scheme is None:  # no entities: part of speech, say, or a typo among entity tags
            _warn_of_mixed_tags(path, sentences)
            entity_results = {}
        else:
            scores = entity_scores(gold, predicted)
            entity_results = {
                "precision": scores.precision,
                "recall": scores.recall,
                "f1": scores.f1,
                "entities": scores.gold,
                "predicted_entities": scores.predicted,
                "correct_entities": scores.correct,
                "tag_scheme": scheme,
            }
        results = {
            **entity_results,
            "accuracy": correct_tags / words if words else 0.0,
            "sentences": len(sentences),
            "words": words,
            "seconds": seconds_since(start),
        }
        self.write_results(results)
        self._write_predictions(split, sentences, predicted)
        return results

    def predict(self, split, batch_size):
        """Writes OUTPUT_DIR/predictions_{split}.txt: each line with its predicted tag appended.

        The tag follows a tab where the line's columns are tab-separated,
        else a space (conlleval reads either).

        The split's file may be words alone, one a line (text to tag), or
        tagged as train's: its words are read, any tags ignored.
        """
        self.warn_if_head_untrained(HEAD_NAME)
        sentences = self._read_words(split)
        self._write_predictions(split, sentences, self._predict_tags(sentences, batch_size))

    def _windows(self, sentences, word_labels=None):
        tokenizer = self.tokenizer
        return word_windows(
            tokenize_words(tokenizer, [sentence.words for sentence in sentences]),
            self.max_seq_length,
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            tokenizer.pad_token_id,
            word_labels=word_labels,
        )

    def _predict_tags(self, sentences, batch_size):
        windows = self._windows(sentences)
        logits = self.predict_features(
            self.model, windows.features, batch_size, per_token_outputs=True
        )
        return [
            [self.label_names[index] for index in sentence]
            for sentence in windows.word_predictions(logits)
        ]

    def _write_predictions(self, split, sentences, predicted):
        blocks = [
            "".join(f"{line}{_separator(line)}{tag}\n" for line, tag in zip(sentence.lines, tags))
            for sentence, tags in zip(sentences, predicted)
        ]
        self.write_file(f"predictions_{split}.txt", "\n".join(blocks))


def _ordered(tags):
    """ "O" first, then entity tags sorted by type then prefix (B-PER, I-PER), others sorted."""
    if all(map(is_entity_tag, tags)):
        others = sorted(tags - {"O"}, key=lambda tag: (tag[2:], tag[0]))
    else:
        others = sorted(tags - {"O"})
    return (["O"] if "O" in tags else []) + others


def _separator(line):
    """What joins the line's columns: a tab-separated file stays one for a TSV reader.

    Lines come without trailing blanks (`read_conll`), so a tab after the last column does not count.
    """
    return "\t" if "\t" in line else " "


def _warn_of_unknown_tags(path, sentences, label_names):
    """Warns of gold tags the model never predicts: conlleval counts their words as wrong."""
    known, first_lines, words = set(label_names), {}, 0
    for sentence in sentences:
        for tag, line_number in zip(sentence.tags, sentence.line_numbers):
            if tag not in known:
                first_lines.setdefault(tag, line_number)
                words += 1
    if first_lines:
        tag, line_number = min(first_lines.items(), key=lambda item: item[1])
        logging.warning(
            "%s:%d: tag %r is not among the model's tags %s: the %d words tagged %s count "
            "as wrong, as conlleval counts them.",
            path,
            line_number,
            tag,
            label_names,
            words,
            " or ".join(map(repr, sorted(first_lines))),
        )


def _warn_of_mixed_tags(path, sentences):
    """Warns when entity tags ("B-PER") and others share a file: a typo rather than a tag set."""
    entity_tags, other_tags = set(), {}
    for sentence in sentences:
        for tag, line_number in zip(sentence.tags, sentence.line_numbers):
            if not is_entity_tag(tag):
                other_tags.setdefault(tag, line_number)
            elif tag != "O":
                entity_tags.add(tag)
    if entity_tags and other_tags:
        tag, line_number = min(other_tags.items(), key=lambda item: item[1])
        logging.warning(
            "%s:%d: tag %r is neither 'O' nor PREFIX-TYPE (prefix B, I, E, S, L or U), though the "
            "file has entity tags such as %r: no entities are scored, only tag accuracy (the "
            "tags of neither kind: %s).",
            path,
            line_number,
            tag,
            min(entity_tags),
            sorted(other_tags),
        )
