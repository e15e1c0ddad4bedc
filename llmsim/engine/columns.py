"""Column-at-a-time evaluation helpers: run an engine function once per distinct key and scatter the
results back to every row (a sweep's million rows have few distinct op shapes and parallel groups).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def factorize(*keys) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): ``codes[i]`` numbers row i's distinct key tuple, ``first[c]`` is a row with key c."""
    keys = np.broadcast_arrays(*(np.asarray(k) for k in keys))
    code, radix = _integer_code(keys)
    if code is not None and radix <= 4 * code.size + 1024:  # a table over the range: no hashing
        code = _first_seen_dense(code.ravel(), radix).reshape(code.shape)
    elif code is None:  # other dtypes: number each key, then the tuples, one key at a time
        import pandas as pd  # only here: a one-point estimate need not import pandas

        code = np.zeros(keys[0].shape, dtype=np.int64)
        for k in keys:
            c, uniq = pd.factorize(k.ravel())
            code = code * len(uniq) + c.reshape(k.shape)
            code, _ = pd.factorize(code.ravel())
            code = code.reshape(k.shape)
    else:
        code = _first_seen(code.ravel()).reshape(code.shape)
    first = np.full(code.max() + 1 if code.size else 0, -1, dtype=np.int64)
    first[code.ravel()[::-1]] = np.arange(code.size)[::-1]
    return code, first


def _first_seen_dense(code: np.ndarray, radix: int) -> np.ndarray:
    """``_first_seen`` of integers in 0 .. radix - 1, by a table over the range (no hashing, no sort of
    the rows): each value's first row, the values present ranked by it."""
    first = np.full(radix, code.size, dtype=np.int64)
    first[code[::-1]] = np.arange(code.size - 1, -1, -1)  # the last write of a value is its first row
    present = np.flatnonzero(first < code.size)
    table = np.empty(radix, dtype=np.int64)
    table[present[np.argsort(first[present], kind="stable")]] = np.arange(len(present))
    return table[code]


def _first_seen(code: np.ndarray) -> np.ndarray:
    """Integers renumbered 0, 1, ... in order of first appearance (``pandas.factorize``'s codes)."""
    if code.size <= 1:
        return np.zeros(code.shape, dtype=np.int64)
    if code.size > 1024:  # a sweep's columns: pandas hashes faster than numpy sorts
        import pandas as pd

        return pd.factorize(code)[0]
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.ravel()]


def _integer_code(keys: list[np.ndarray]) -> tuple[np.ndarray | None, int]:
    """(integer keys combined into one int64 by mixed radix over each key's range: one hashing pass
    instead of two per key, the number of values it spans), or (None, 0) when a key is not integer or
    the radix would overflow."""
    if not keys[0].size or any(k.dtype.kind not in "iub" for k in keys):
        return None, 0
    code, radix = np.zeros(keys[0].shape, dtype=np.int64), 1
    for k in keys:
        lo, span = int(k.min()), int(k.max()) - int(k.min()) + 1
        radix *= span
        if radix >= 2**62:
            return None, 0
        code = code * span + (k.astype(np.int64) - lo)
    return code, radix


def per_key(fn: Callable[..., tuple], *keys, dtype=None) -> tuple[np.ndarray, ...]:
    """``fn(*scalars)`` -> tuple of values, evaluated once per distinct row of ``keys`` and broadcast back
    (as ``dtype``: object keeps text as Python strings, one per distinct value, not one per row)."""
    code, first = factorize(*keys)
    flat = [np.broadcast_to(np.asarray(k), code.shape).ravel() for k in keys]
    results = [fn(*(f[i].item() for f in flat)) for i in first]
    return tuple(np.asarray(col, dtype=dtype)[code] for col in zip(*results, strict=True))


def first_row(cols: dict) -> dict:
    """Row 0 of a dict of column arrays as plain Python values (a one-point estimate)."""
    return {k: v[0].item() if isinstance(v[0], np.generic) else v[0] for k, v in cols.items()}


def on_distinct(fn: Callable[..., dict], *keys) -> dict:
    """``fn(*key_arrays)`` -> dict of arrays, evaluated on the distinct rows of ``keys`` only (numpy
    arrays of those rows) and broadcast back to every row."""
    code, first = factorize(*keys)
    small = [np.broadcast_to(np.asarray(k), code.shape).ravel()[first] for k in keys]
    return {k: np.broadcast_to(np.asarray(v, dtype=float), first.shape)[code] for k, v in fn(*small).items()}


def on_flag(fn: Callable[..., dict], flag, *keys) -> dict:
    """``fn(value, *key_arrays)`` -> dict of arrays, evaluated on the rows where ``flag`` is True (value
    True) and on those where it is False apart, for code that takes one branch per call; merged in row
    order."""
    flag = np.asarray(flag, dtype=bool)
    keys = tuple(np.asarray(k) for k in keys)
    if flag.all() or not flag.any():
        return fn(bool(flag.all() and flag.size), *keys)
    out: dict = {}
    for value in (True, False):
        rows = flag == value
        for name, col in fn(value, *(k[rows] for k in keys)).items():
            if name not in out:
                out[name] = np.zeros(flag.shape, dtype=np.result_type(col))
            out[name][rows] = col
    return out
