"""Reader for CoNLL-format tagging files (CoNLL-2003 NER and the like).

One word per line, whitespace-separated columns, the tag in the last one
(`EU NNP B-NP B-ORG`); a blank line ends a sentence; `-DOCSTART-` lines mark
documents and are skipped, as is a UTF-8 byte-order mark. Any tag set is
read: entity (chunk) tags, "O" or a prefix (B, I, E, S; L, U) and a type
("B-PER") in IOB1, IOB2, IOBES or BILOU, or others such as part-of-speech tags
("NNP"). Text to
tag may be words alone, one a line. A line without a tag where tags are read,
or with other columns than the file's first word line, is an error naming
the file and the line.
"""

import dataclasses
import os
import re

from bert_keras.data import split_files
from bert_keras.data.delimited_text import utf8_records
from bert_keras.data.input_file_error import InputFileError

DOCUMENT_START = "-DOCSTART-"
BYTE_ORDER_MARK = "\ufeff"
# Names the splits go by: CoNLL-2003's own (eng.testa), the common copies'.
SPLIT_FILES = {
    "train": ("train.txt", "eng.train"),
    "dev": ("valid.txt", "dev.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}
_ENTITY_TAG = re.compile(r"O|[BIESLU]-\S+")


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """A sentence's words, their tags and the file lines they came from.

    Attributes:
        words: the words (first column).
        tags: the tags (last column), or None when read untagged.
        lines: the lines as read, without the line break and trailing blanks.
        line_numbers: 1-based line number of each word.
    """

    words: tuple
    tags: tuple | None
    lines: tuple
    line_numbers: tuple


def read_conll(path, limit=None, tagged=True):
    """Reads the sentences of a CoNLL file.

    Args:
        path: the file, UTF-8 (with or without a byte-order mark).
        limit: read at most this many sentences.
        tagged: whether each word has its tag (the last column). When False
            the words alone are read (the first column), from text to tag
            with or without tags; `tags` is then None.

    Returns:
        A list of `TaggedSentence`.

    Raises:
        InputFileError: `tagged` and a line has fewer than two columns, or a
            line has other columns than the first word line, naming the file
            and the line; a line is not UTF-8; or the file holds no sentence.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> _ = open(path, "w").write(
    ...     "-DOCSTART- -X- O O\\n\\nEU NNP B-ORG\\nrejects VBZ O\\n\\nPeter NNP B-PER\\n")
    >>> [(s.words, s.tags) for s in read_conll(path)]
    [(('EU', 'rejects'), ('B-ORG', 'O')), (('Peter',), ('B-PER',))]
    >>> _ = open(path, "w").write("EU\\nrejects\\n\\nPeter\\n")
    >>> [(s.words, s.tags) for s in read_conll(path, tagged=False)]
    [(('EU', 'rejects'), None), (('Peter',), None)]
    """
    sentences, current, first_columns = [], [], None
    # utf-8-sig: a byte-order mark (Windows editors write one) would join the first word.
    with open(path, encoding="utf-8-sig") as file:
        for line_number, line in enumerate(utf8_records(file, path), start=1):
            line = line.rstrip().lstrip(BYTE_ORDER_MARK)  # of each file joined into this one
            columns = line.split()
            if columns and columns[0] == DOCUMENT_START:
                columns = []
            if columns:
                tag = _tag(columns, path, line_number) if tagged else None
                first_columns = first_columns or (len(columns), line_number)
                _check_columns(columns, first_columns, path, line_number)
                current.append((columns[0], tag, line, line_number))
                continue
            if current:
                sentences.append(_sentence(current, tagged))
                current = []
            if limit is not None and len(sentences) >= limit:
                return sentences
    if current:
        sentences.append(_sentence(current, tagged))
    if not sentences:
        what = "one word and its tag" if tagged else "one word"
        raise InputFileError(f"{path} holds no sentences: {what} per line.")
    return sentences[:limit] if limit is not None else sentences


def split_path(data_dir, split):
    """The file of `split` ("train", "dev" or "test") in `data_dir`.

    Looks for the names in `SPLIT_FILES`, in order.

    Raises:
        FileNotFoundError: naming the directory and the names looked for.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "valid.txt"), "w").write("EU B-ORG\\n")
    >>> os.path.basename(split_path(directory, "dev"))
    'valid.txt'
    """
    return split_files.split_path(data_dir, split, SPLIT_FILES)


def has_split(data_dir, split):
    """Whether `data_dir` holds a file for `split`.

    Example:
    >>> has_split("/nonexistent", "train")
    False
    """
    return any(os.path.isfile(os.path.join(data_dir, name)) for name in SPLIT_FILES[split])


def is_entity_tag(tag):
    """Whether `tag` is "O" or PREFIX-TYPE with a prefix B, I, E, S (conlleval's) or BILOU's L, U.

    Example:
    >>> is_entity_tag("B-PER"), is_entity_tag("O"), is_entity_tag("NNP"), is_entity_tag("B-")
    (True, True, False, False)
    """
    return _ENTITY_TAG.fullmatch(tag) is not None


def tag_scheme(tag_sequences):
    """Names the scheme of tag sequences: "IOBES", "BILOU", "IOB1", "IOB2", "O" or None.

    IOB1 begins entities with I- and uses B- only between two entities of one
    type; IOB2 begins every entity with B-; IOBES has E- and S- tags too,
    BILOU L- and U- in their place. "O": no entities.
    None: a tag is not an entity tag (`is_entity_tag`), as part-of-speech
    tags are not, so the tags mark no entities.

    Example:
    >>> tag_scheme([["I-PER", "O", "B-LOC"]]), tag_scheme([["B-PER", "I-PER"]])
    ('IOB1', 'IOB2')
    >>> print(tag_scheme([["NNP", "VBZ"]]))
    None
    """
    prefixes, starts_with_inside = set(), False
    for tags in tag_sequences:
        if not all(map(is_entity_tag, tags)):
            return None
        previous = "O"
        for tag in tags:
            prefixes.add(tag[0])
            if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
                starts_with_inside = True
            previous = tag
    if prefixes & {"L", "U"}:
        return "BILOU"
    if prefixes & {"E", "S"}:
        return "IOBES"
    if starts_with_inside:
        return "IOB1"
    return "IOB2" if prefixes & {"B", "I"} else "O"


def _tag(columns, path, line_number):
    if len(columns) < 2:
        raise InputFileError(
            f"{path}:{line_number}: expected a word and a tag (whitespace-separated, tag last), "
            f"found {len(columns)} column: {columns[0]!r}."
        )
    return columns[-1]


def _check_columns(columns, first_columns, path, line_number):
    """Refuses a word line of other columns than the file's first, as conlleval does.

    Its tag or word would be another column's: a line without its tag would
    be tagged with its chunk tag, and a word holding a space would be cut.
    """
    count, first_line = first_columns
    if len(columns) != count:
        raise InputFileError(
            f"{path}:{line_number}: {len(columns)} columns ({' '.join(columns)!r}) where line "
            f"{first_line} has {count}: every word's line has the same columns (the word first, "
            "the tag last), as conlleval reads them."
        )


def _sentence(rows, tagged):
    words, tags, lines, line_numbers = zip(*rows)
    return TaggedSentence(words, tags if tagged else None, lines, line_numbers)
