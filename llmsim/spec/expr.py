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


class Expr:
    """A compiled expression; ``names`` are the columns it reads."""

    def __init__(self, text: str) -> None:
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as err:
            raise ValueError(f"cannot parse {text!r}: {err.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ValueError(f"{text!r}: {type(node).__name__} is not allowed (arithmetic, comparisons, "  # noqa: TRY004
                                 "and/or/not, min/max/abs over column names only)")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS
                                                   and not node.keywords):
                raise ValueError(f"{text!r}: only min(), max() and abs() may be called")
        self.text, self._tree = text, tree.body
        self.names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS))

    def __call__(self, row: dict) -> bool:
        """The expression over one row's values."""
        return bool(self.mask(row))

    def mask(self, columns: dict):
        """The expression over columns of numpy arrays (or one row's numbers), element by element."""
        return np.asarray(_veval(self._tree, columns), dtype=bool)


_VFUNCS = {"min": np.minimum, "max": np.maximum, "abs": np.abs}


def _veval(node, cols: dict):
    """Evaluate a checked tree over numbers or arrays: and/or/not and chained comparisons element-wise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return cols[node.id]
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_veval(node.left, cols), _veval(node.right, cols))
    if isinstance(node, ast.UnaryOp):
        v = _veval(node.operand, cols)
        if isinstance(node.op, ast.Not):
            return np.logical_not(v)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BoolOp):
        vals = [np.asarray(_veval(v, cols), dtype=bool) for v in node.values]
        return (np.logical_and if isinstance(node.op, ast.And) else np.logical_or).reduce(vals)
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
