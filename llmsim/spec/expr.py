"""Safe arithmetic/boolean expressions over a record's columns (sweep constraints).

The text is parsed with ``ast`` and only literals, column names, arithmetic, comparisons, boolean
operators and a few functions (min, max, abs) are allowed; nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import functools
import operator

import numpy as np

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS = ("min", "max", "abs")
_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp,
            ast.Compare, ast.Name, ast.Load, ast.Constant, ast.Call, *_BIN, *_CMP)


MAX_TEXT = 2000  # characters of one expression
MAX_BITS = 4096  # a constant (folded) is at most this large: 9**9**9 is refused, not computed


class Expr:
    """A compiled expression; ``names`` are the columns it reads. Evaluating it never changes a column."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_TEXT:
            raise ValueError(f"{text[:40]!r}...: {len(text):,} characters; at most {MAX_TEXT:,}")
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as err:
            raise ValueError(f"cannot parse {text!r}: {err.msg}") from None
        except (ValueError, RecursionError, MemoryError) as err:
            raise ValueError(f"cannot parse {text!r}: {err or type(err).__name__}") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ValueError(f"{text!r}: {type(node).__name__} is not allowed (arithmetic, comparisons, "  # noqa: TRY004
                                 "and/or/not, min/max/abs over column names only)")
            if isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords):
                    raise ValueError(f"{text!r}: only min(), max() and abs() may be called")
                name, n = node.func.id, len(node.args)
                if (name == "abs" and n != 1) or (name != "abs" and n < 2):
                    want = "one argument" if name == "abs" else "two or more arguments"
                    raise ValueError(f"{text!r}: {name}() takes {want}, got {n}")
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in _FUNCS and id(node) not in called:
                raise ValueError(f"{text!r}: {node.id} is a function: call it, e.g. {node.id}(tp, pp)")
        _fold(tree.body, text)
        self.text, self._tree = text, tree.body
        self.names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS))

    def __call__(self, row: dict) -> bool:
        """The expression over one row's values."""
        return bool(self.mask(row))

    def mask(self, columns: dict):
        """The expression over columns of numpy arrays (or one row's numbers), element by element; a value
        it cannot compare or compute (``tp <= 'x'``) is a ValueError naming the expression."""
        try:
            with np.errstate(all="ignore"):
                return np.asarray(_veval(self._tree, columns), dtype=bool)
        except (TypeError, ValueError, ArithmeticError, KeyError) as err:
            raise ValueError(f"{self.text!r} cannot be evaluated: {' '.join(str(err).split())[:120]}") from None


def _fold(node, text: str):
    """The value of a subtree made of constants only (None when it reads a column); a constant past
    ``MAX_BITS`` (``9**9**9``) is refused before Python would spend hours computing it."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, text)
        return None if v is None or isinstance(node.op, ast.Not) else _guard(v, text, node)
    if not isinstance(node, ast.BinOp):
        for kid in ast.iter_child_nodes(node):
            _fold(kid, text)
        return None
    left, right = _fold(node.left, text), _fold(node.right, text)
    if not all(isinstance(v, (int, float)) for v in (left, right)):
        return None
    if (isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and abs(left) > 1
            and right * abs(left).bit_length() > MAX_BITS):
        raise ValueError(f"{text!r}: {ast.unparse(node)} is too large a number")
    try:
        return _guard(_BIN[type(node.op)](left, right), text, node)
    except (ArithmeticError, TypeError, ValueError):  # 1/0, 10.0**400: left for the row evaluation to report
        return None


def _guard(value, text: str, node):
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise ValueError(f"{text!r}: {ast.unparse(node)} is too large a number")
    return value


_VFUNCS = {"min": np.minimum, "max": np.maximum, "abs": np.abs}


def _veval(node, cols: dict):
    """Evaluate a checked tree over numbers or arrays: and/or/not and chained comparisons element-wise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = cols[node.id]
        if type(value).__name__ == "Categorical":  # a sweep's constant text column: compared as text
            value = np.asarray(value, dtype=object)
        if isinstance(value, np.ndarray):  # read-only: no function may write into a column
            value = value.view()
            value.flags.writeable = False
        return value
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_veval(node.left, cols), _veval(node.right, cols))
    if isinstance(node, ast.UnaryOp):
        v = _veval(node.operand, cols)
        if isinstance(node.op, ast.Not):
            return np.logical_not(v)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BoolOp):
        vals = [np.asarray(_veval(v, cols), dtype=bool) for v in node.values]
        return functools.reduce(np.logical_and if isinstance(node.op, ast.And) else np.logical_or, vals)
    if isinstance(node, ast.Compare):
        left, out = _veval(node.left, cols), True
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _veval(comp, cols)
            out = np.logical_and(out, _CMP[type(op)](left, right))
            left = right
        return out
    if isinstance(node, ast.Call):
        args = [_veval(a, cols) for a in node.args]
        return functools.reduce(_VFUNCS[node.func.id], args) if len(args) > 1 else _VFUNCS[node.func.id](*args)
    raise ValueError(f"unsupported expression node {type(node).__name__}")
