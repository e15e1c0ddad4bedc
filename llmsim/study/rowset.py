"""A sweep chunk's rows as columns: a dict from column name to a numpy array (or a pandas Categorical for
a text input column), every column of one length.

A worker's groups each give such a dict; ``concat`` joins them a column at a time and the chunk goes to
its part file (``partfile.py``) without a pandas frame on the way; ``to_pandas`` makes the frame where a
caller wants one (``sweep.run``, ``search``). The rules are pandas' own (``pandas.concat``, a scalar set
as a column), so a chunk reads the same either way.
"""

from __future__ import annotations

import numpy as np

Rows = dict  # column name -> numpy array or pandas Categorical, all of one length


def length(rows: Rows) -> int:
    return len(next(iter(rows.values()))) if rows else 0


def broadcast(value, n: int) -> np.ndarray:
    """``n`` copies of ``value`` as pandas stores a scalar set as a column: numbers and flags in their numpy
    dtype, anything else (text, None) as objects."""
    kind = np.asarray(value).dtype.kind if value is not None and not isinstance(value, str) else "O"
    return np.full(n, value) if kind in "biuf" else np.full(n, value, dtype=object)


def of(columns: dict, n: int) -> Rows:
    """``columns`` (arrays, categoricals, scalars or lists, as a pandas frame takes them) as ``Rows`` of
    ``n`` rows: scalars broadcast, lists typed as pandas types them."""
    out = {}
    for k, v in columns.items():
        if isinstance(v, np.ndarray) and v.ndim == 1:
            out[k] = v
        elif np.ndim(v) == 0:
            out[k] = broadcast(v, n)
        else:
            import pandas as pd

            out[k] = v if isinstance(v, pd.Categorical) else pd.Series(v, copy=False).values
    return out


def take(rows: Rows, index) -> Rows:
    """The rows at ``index`` (positions or a boolean mask), every column."""
    return {k: v[index] for k, v in rows.items()}


def concat(parts: list[Rows]) -> Rows:
    """The parts one after the other, as ``pandas.concat(ignore_index=True)`` joins their frames: a column
    whose pieces share a numpy dtype is concatenated as numpy; any other column (categoricals, mixed
    dtypes) or parts with different columns go through pandas, which decides its dtype as before."""
    parts = [p for p in parts if p]  # a part without rows still names its columns, as an empty frame did
    if len(parts) <= 1:
        return parts[0] if parts else {}
    names = list(parts[0])
    if any(list(p) != names for p in parts[1:]):
        import pandas as pd

        frame = pd.concat([to_pandas(p) for p in parts], ignore_index=True)
        return {c: frame[c].values for c in frame.columns}
    out = {}
    for name in names:
        pieces = [p[name] for p in parts]
        first = pieces[0]
        if isinstance(first, np.ndarray) and all(isinstance(x, np.ndarray) and x.dtype == first.dtype
                                                 for x in pieces[1:]):
            out[name] = np.concatenate(pieces)
        elif all(_categorical(x) for x in pieces):  # pandas: one categorical when they share categories
            same = all(x.categories.equals(first.categories) for x in pieces[1:])
            out[name] = (type(first).from_codes(np.concatenate([x.codes for x in pieces]), dtype=first.dtype,
                                                validate=False) if same
                         else np.concatenate([np.asarray(x, dtype=object) for x in pieces]))
        else:
            import pandas as pd

            # one-column frames: a frame's concat types a column as the whole-frame concat does (int and
            # bool pieces give int64 there, object as Series)
            out[name] = pd.concat([to_pandas({name: x}) for x in pieces], ignore_index=True)[name].values
    return out


def _categorical(values) -> bool:
    return type(values).__name__ == "Categorical" and hasattr(values, "codes")


def _objects(values) -> bool:
    return isinstance(values, np.ndarray) and values.dtype == object


def in_point_order(rows: Rows) -> Rows:
    """The rows sorted by ``point`` (stable), or as they are when they already are."""
    point = rows.get("point")
    if point is None or len(point) < 2 or bool(np.all(point[1:] >= point[:-1])):
        return rows
    return take(rows, np.argsort(point, kind="stable"))


def to_pandas(rows: Rows):
    """The rows as a pandas frame, without copying; object columns (names, tiers, reasons: text with None)
    kept as objects, not checked cell by cell into pandas' string dtype."""
    import pandas as pd

    return pd.DataFrame({k: pd.Series(v, dtype=object, copy=False) if _objects(v) else v for k, v in rows.items()},
                        copy=False)


def numeric(rows: Rows, name: str) -> np.ndarray:
    """Column ``name`` as floats (NaN where missing or not a number; all NaN when there is no such column)."""
    values = rows.get(name)
    if values is None:
        return np.full(length(rows), np.nan)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iufb":
        return values.astype(float)
    import pandas as pd

    return pd.to_numeric(pd.Series(np.asarray(values, dtype=object)), errors="coerce").to_numpy(float)


def missing(values) -> np.ndarray:
    """Mask of the missing cells (None, NaN) of a column."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return np.isnan(values)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iub":
        return np.zeros(len(values), bool)
    import pandas as pd

    return np.asarray(pd.isna(values), dtype=bool)
