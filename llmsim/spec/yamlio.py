"""YAML loading that remembers the line of every key, so errors can point at it.

Only ``yaml.SafeLoader`` is used: no Python object construction from user files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmsim.spec.errors import SpecError

Path_ = tuple  # a location inside a document: ("parallel", "tp") or ("tiers", 0, "size")


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


def parse_yaml(text: str, source: str) -> Document:
    """Parse one YAML document from ``text``; ``source`` names it in errors."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Document(None, source, {})
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
    except RecursionError:
        raise SpecError("YAML document nests too deeply", file=source) from None
    finally:
        loader.dispose()
    return Document(data, source, lines)


def load_yaml(path: str | Path) -> Document:
    """Read and parse a YAML file, with a clean error if it cannot be read."""
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
