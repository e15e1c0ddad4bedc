"""YAML loading that remembers the line of every key, so errors can point at it.

Only the safe constructor is used (``yaml.CSafeLoader``, or ``yaml.SafeLoader`` without libyaml): no Python
object construction from user files.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmsim.spec.errors import SpecError

# libyaml's parser under the same safe constructor where PyYAML was built with it (15x faster on the
# bundled presets and data: 0.13 against 1.9 CPU-s for 0.6 MB), else PyYAML's own. libyaml builds the node
# tree by recursing in C, so a text deep in flow brackets ("[[[[..." tens of thousands deep) would overflow
# the C stack before MAX_DEPTH is checked: a text with more than C_FLOW_OPENERS "[" or "{" (the bundled
# files have at most 32) goes to PyYAML's parser, whose recursion Python stops with a clean error
_C_LOADER = getattr(yaml, "CSafeLoader", None)
C_FLOW_OPENERS = 2000


def _loader(text: str):
    if _C_LOADER is not None and text.count("[") + text.count("{") <= C_FLOW_OPENERS:
        return _C_LOADER(text)
    return yaml.SafeLoader(text)

MAX_NODES = 100_000  # values in a document with its aliases expanded: far above any scenario, sweep or preset
MAX_DEPTH = 100  # nesting of lists and mappings
STDIN = "-"  # the file name that means standard input


@dataclass
class Document:
    """A parsed YAML document and the 1-based line of each dotted location in it."""

    data: Any
    source: str
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, loc: tuple) -> int | None:
        """Line of the longest prefix of ``loc`` that was recorded."""
        for n in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:n]))
            if line is not None:
                return line
        return None


def _record_lines(loader: yaml.SafeLoader, node: yaml.Node, loc: tuple, out: dict, stack: set) -> None:
    if id(node) in stack or len(loc) > 64:  # recursive aliases or absurd nesting: stop recording
        return
    out.setdefault(loc, node.start_mark.line + 1)
    stack.add(id(node))
    try:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = loader.construct_object(key_node)
                try:
                    child = loc + (key,)
                    hash(child)
                except TypeError:
                    continue
                out.setdefault(child, key_node.start_mark.line + 1)
                _record_lines(loader, value_node, child, out, stack)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                _record_lines(loader, item, loc + (i,), out, stack)
    finally:
        stack.discard(id(node))


def _check_size(root: yaml.Node, source: str) -> None:
    """Refuse a document whose aliases expand past ``MAX_NODES`` values (an alias bomb), nest deeper than
    ``MAX_DEPTH`` or refer to themselves, before anything walks the expanded data. Each node's expanded size
    is computed once (iteratively: no recursion on hostile input), so this costs the document's text."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    active: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise SpecError(f"the document expands to more than {MAX_NODES:,} values (anchors and aliases "
                                "repeating one another?)", file=source, line=node.start_mark.line + 1)
            continue
        if key in size:
            continue
        if key in active:
            raise SpecError("an alias refers to a collection that contains it (a recursive alias)", file=source,
                            line=node.start_mark.line + 1)
        if depth > MAX_DEPTH:
            raise SpecError(f"the document nests more than {MAX_DEPTH} levels deep", file=source,
                            line=node.start_mark.line + 1)
        active.add(key)
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in _children(node) if id(k) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def parse_yaml(text: str, source: str) -> Document:
    """Parse one YAML document from ``text``; ``source`` names it in errors."""
    loader = None
    try:
        loader = _loader(text)  # it already refuses control characters
        node = loader.get_single_node()
        if node is None:
            return Document(None, source, {})
        _check_size(node, source)
        data = loader.construct_document(node)
        lines: dict[tuple, int] = {}
        _record_lines(loader, node, (), lines, set())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = err.problem or err.context or "invalid YAML"
        raise SpecError(f"YAML syntax error: {problem}", file=source, line=line) from None
    except yaml.YAMLError as err:
        raise SpecError(f"YAML error: {err}", file=source) from None
    except (ValueError, TypeError, OverflowError) as err:  # a value its tag cannot make: !!int 1e3, 5,000 digits
        raise SpecError(f"YAML value cannot be read: {' '.join(str(err).split())[:120]}", file=source) from None
    except RecursionError:
        raise SpecError("YAML document nests too deeply", file=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    return Document(data, source, lines)


_STDIN: list[str] = []  # standard input, read once: a command may load its scenario twice


def _stdin_text() -> str:
    if not _STDIN:
        try:
            data = sys.stdin.buffer.read()
        except (OSError, AttributeError, ValueError) as err:
            raise SpecError(f"cannot read standard input: {err}", file="<stdin>") from None
        try:
            _STDIN.append(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise SpecError(f"cannot read standard input: {err}", file="<stdin>") from None
    return _STDIN[0]


def load_yaml(path: str | Path) -> Document:
    """Read and parse a YAML file (``-``: standard input), with a clean error if it cannot be read."""
    if str(path) == STDIN:
        return parse_yaml(_stdin_text(), "<stdin>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise SpecError("is a directory, expected a YAML file", file=str(p)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read file: {err}", file=str(p)) from None
    return parse_yaml(text, str(p))
