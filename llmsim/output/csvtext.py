"""CSV lines of a sweep frame at the speed of the I/O: the same bytes as ``DataFrame.to_csv`` (pandas'
number formatting, the ``csv`` module's minimal quoting, empty cells for missing values), with each
column's distinct values formatted once.

pandas formats every cell on its own: a float column through numpy's ``astype(str)`` (the shortest
string that reads back to the same double, which is also Python's ``repr``, the faster of the two), an
integer column through ``astype(str)``, a nullable
integer or string column value by value through ``str``; a missing value is an empty cell. A sweep's
columns repeat their values (the model's, the accelerator's, a split's shared numbers), so formatting
each distinct value once (a float's distinct bit patterns, so ``-0.0`` stays ``-0.0``) and gathering
the strings gives the same cells for a sixth of the work, and joining them row by row replaces the
``csv`` writer. A frame with a column of any other kind (or one column, where the ``csv`` module quotes
an empty row) returns None, and the caller uses pandas.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

_SPECIAL = (",", '"', "\n", "\r")
_PLAIN = (str, bool, int, np.bool_, np.int64)  # object cells written as str(value)
_BREAKS = re.compile(r"[\r\n]+")  # a text cell's line breaks become one space: one row, one line


def _quote(text: str) -> str:
    """The ``csv`` module's QUOTE_MINIMAL for one field (the line terminator is ``\\n``)."""
    if any(ch in text for ch in _SPECIAL):
        return '"' + text.replace('"', '""') + '"'
    return text


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first row of each code) of a numeric array by exact value (floats by bit pattern)."""
    key = values.view(np.int64) if values.dtype == np.float64 else values
    codes, uniques = pd.factorize(key, use_na_sentinel=False)
    first = np.empty(len(uniques), dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return codes, first


def _numeric(values: np.ndarray) -> np.ndarray | None:
    """Cells of a float, integer or boolean numpy column, as pandas writes them."""
    kind = values.dtype.kind
    if kind == "b":
        return np.where(values, "True", "False").astype(object)
    if kind not in "iuf" or values.dtype.byteorder not in "=|" or values.dtype.itemsize != 8 and kind == "f":
        return None
    codes, first = _factorize(np.ascontiguousarray(values))
    distinct = values[first]
    if kind == "f":  # repr: the digits of numpy's astype(str) (both the shortest round trip), twice as fast
        text = np.array(list(map(float.__repr__, distinct.tolist())), dtype=object)
        text[np.isnan(distinct)] = ""
    else:
        text = np.array(list(map(str, distinct.tolist())), dtype=object)
    return text[codes]


def _objects(column: pd.Series) -> np.ndarray | None:
    """Cells of a nullable-integer, string or object column of strings, booleans and integers (missing:
    empty), or None."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    values = np.asarray(uniques, dtype=object)
    dtype = column.dtype
    if isinstance(dtype, pd.Int64Dtype):
        text = [str(int(v)) for v in values]
    elif all(type(v) in _PLAIN for v in values):
        text = [_quote(_BREAKS.sub(" ", v)) if type(v) is str else str(v) for v in values]
    else:
        return None
    return np.array(text + [""], dtype=object)[codes]  # code -1 (missing) picks the last entry


def lines(frame: pd.DataFrame) -> str | None:
    """``frame.to_csv(index=False, header=False, lineterminator="\\n")`` after each text cell's line
    breaks became a space, or None where a column is of a kind this does not format."""
    if frame.shape[1] < 2 or not len(frame):
        return None
    cells = []
    for name in frame.columns:
        column = frame[name]
        values = column.to_numpy() if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iufb" else None
        out = _numeric(values) if values is not None else _objects(column)
        if out is None:
            return None
        cells.append(out.tolist())
    return "\n".join(map(",".join, zip(*cells, strict=True))) + "\n"
