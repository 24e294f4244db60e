"""heads.core.configs: harness config files on the Python side: YAML read with the line:col of every key
and value (for `file:line:col: message` errors), a config flattened to {'section.key': value},
and values compared and written the way the harness reads them after `--set section.key=`.

Knows nothing of experiments, sweeps or results files.
"""
import math
import os
import re

import yaml

from .cli import UserError


FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class Marked:
    """A YAML document as plain Python values, plus the line:col of every key and value."""

    def __init__(self, path, text):
        self.path = path
        self.key_marks = {}    # key path tuple -> yaml Mark of the key
        self.value_marks = {}  # key path tuple -> yaml Mark of the value
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            self.data = {} if root is None else self._walk(loader, root, ())
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            raise UserError(f"{path}:{mark.line + 1}:{mark.column + 1}: {e.problem or e}")
        finally:
            loader.dispose()

    def _walk(self, loader, node, keypath):
        self.value_marks[keypath] = node.start_mark
        if isinstance(node, yaml.MappingNode):
            out = {}
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    key = str(key)
                if key in out:
                    raise UserError(self.where_mark(key_node.start_mark) +
                                    f"duplicate key '{key}'; each key may appear once")
                self.key_marks[keypath + (key,)] = key_node.start_mark
                out[key] = self._walk(loader, value_node, keypath + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self._walk(loader, item, keypath + (i,)) for i, item in enumerate(node.value)]
        value = loader.construct_object(node, deep=True)
        if isinstance(value, str) and node.style is None and FLOAT.fullmatch(value):
            value = float(value)  # YAML 1.1 reads a plain 3e-3 as a string; the harness a number
        return value

    def where_mark(self, mark):
        return f"{self.path}:{mark.line + 1}:{mark.column + 1}: " if mark else f"{self.path}:1:1: "

    def where(self, keypath, value=False):
        """`file:line:col: ` of a key (or of its value), falling back to the nearest parent."""
        marks = self.value_marks if value else self.key_marks
        keypath = tuple(keypath)
        while keypath and keypath not in marks:
            keypath = keypath[:-1]
        return self.where_mark(marks.get(keypath))


def file_kind(path):
    """Why path cannot be read as a file, before opening it ('a FIFO', 'a directory', ...: a FIFO
    with no writer would block the reader), or '' for a regular file (or one not there: the
    open says so)."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "" if stat.S_ISREG(mode) else "not a regular file"


def read_text(path, what):
    """The text of a YAML file (UTF-8 whatever the locale), or UserError 'path:1:1: ...'."""
    kind = file_kind(path)
    if kind:
        raise UserError(f"{path}:1:1: cannot read the {what}: it is {kind}, not a regular file")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError as e:
        raise UserError(f"{path}:1:1: cannot read the {what}: {e.strerror}") from None


def read_config_file(path):
    """A harness config file flattened to {'section.key': value}."""
    data = yaml.safe_load(read_text(path, "config")) or {}
    flat = {}
    for section, keys in data.items():
        if isinstance(keys, dict):
            for key, value in keys.items():
                flat[f"{section}.{key}"] = value
    return flat


def format_value(value):
    """A value as the harness reads it after --set section.key= (and as a run name shows it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "%.10g" % value
    return str(value)


def values_equal(a, b):
    if isinstance(a, list) or isinstance(b, list):
        a = a if isinstance(a, list) else [a]
        b = b if isinstance(b, list) else [b]
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    a, b = (float(x) if isinstance(x, str) and FLOAT.fullmatch(x) else x for x in (a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return format_value(a) == format_value(b)
