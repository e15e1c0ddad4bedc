"""A sweep chunk's rows on disk, as an Arrow IPC file written and read by polars (columnar: a kept row
costs a gather, not a pickle round trip through pandas).

``to_polars`` converts a chunk's evaluated columns (``rowset.Rows``, or a pandas frame) one at a time: numbers as they are (NaN as a
missing value, an empty cell), nullable integers as integers, and text and other object columns by their
distinct values (a sweep's text columns repeat a few values), a text cell's line breaks as one space
(one row, one line).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import polars as pl

_BREAKS = re.compile(r"[\r\n]+")


def to_polars(rows) -> pl.DataFrame:
    """A chunk's rows (``rowset.Rows``, or a pandas frame) as a polars frame, a column at a time."""
    if isinstance(rows, pd.DataFrame):
        rows = {name: rows[name].values for name in rows.columns}
    return pl.DataFrame([_series(name, values) for name, values in rows.items()])


def _series(name: str, values) -> pl.Series:
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return pl.Series(name, values)
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return pl.Series(name, values, nan_to_null=True)
    if isinstance(dtype, pd.Int64Dtype):  # the integers as they are (no float on the way), missing ones null
        out = pl.Series(name, values.to_numpy(dtype="int64", na_value=0))
        absent = np.asarray(values.isna())
        return out.scatter(np.flatnonzero(absent), None) if absent.any() else out
    if isinstance(dtype, pd.CategoricalDtype):
        codes, uniques = values.codes, list(dtype.categories)
    else:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        uniques = list(uniques)
    table = pl.Series(name, _cells(uniques) + [None])  # the distinct values and a missing one, code -1
    return table.gather(np.where(codes < 0, len(uniques), codes).astype(np.int64))


def _cells(values: list) -> list:
    """Distinct values of an object column as polars takes them: all flags, all integers, all numbers,
    or else text (an empty text as a missing value: an empty cell, as pandas wrote it)."""
    if all(type(v) in (bool, np.bool_) for v in values):
        return [bool(v) for v in values]
    if all(type(v) in (int, np.int64) for v in values):
        return [int(v) for v in values]
    if all(type(v) in (float, np.float64) for v in values):
        return [None if np.isnan(v) else float(v) for v in values]
    return [(_BREAKS.sub(" ", v) or None) if isinstance(v, str) else str(v) for v in values]


def write(rows, path: str) -> None:
    """Rows (``rowset.Rows``, or a pandas frame) as an uncompressed Arrow IPC file at ``path``."""
    to_polars(rows).write_ipc(path, compression="uncompressed")


def read(path: str) -> pl.DataFrame:
    return pl.read_ipc(path)
