"""A sweep chunk's rows on disk, as an Arrow IPC file written and read by polars (columnar: a kept row
costs a gather, not a pickle round trip through pandas).

``to_polars`` converts an evaluated pandas frame a column at a time: numbers as they are (NaN as a
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


def to_polars(frame: pd.DataFrame) -> pl.DataFrame:
    return pl.DataFrame([_series(name, frame[name]) for name in frame.columns])


def _series(name: str, col: pd.Series) -> pl.Series:
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return pl.Series(name, col.to_numpy())
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return pl.Series(name, col.to_numpy(), nan_to_null=True)
    if isinstance(dtype, pd.Int64Dtype):  # the integers as they are (no float on the way), missing ones null
        values = pl.Series(name, col.to_numpy(dtype="int64", na_value=0))
        missing = col.isna().to_numpy()
        return values.scatter(np.flatnonzero(missing), None) if missing.any() else values
    if isinstance(dtype, pd.CategoricalDtype):
        codes, uniques = col.cat.codes.to_numpy(), list(dtype.categories)
    else:
        codes, uniques = pd.factorize(col.to_numpy(dtype=object))
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


def write(frame: pd.DataFrame, path: str) -> None:
    to_polars(frame).write_ipc(path, compression="uncompressed")


def read(path: str) -> pl.DataFrame:
    return pl.read_ipc(path)
