"""Column-at-a-time evaluation helpers: run a scalar engine function once per distinct key and scatter
the results back to every row (a sweep's million rows have few distinct collective sizes and op shapes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from llmsim.engine.collectives import collective
from llmsim.engine.topology import path_of
from llmsim.values import Network


def factorize(*keys) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): ``codes[i]`` numbers row i's distinct key tuple, ``first[c]`` is a row with key c."""
    keys = np.broadcast_arrays(*(np.asarray(k) for k in keys))
    code = np.zeros(keys[0].shape, dtype=np.int64)
    for k in keys:
        c, uniq = pd.factorize(k.ravel())
        code = code * len(uniq) + c.reshape(k.shape)
        code, _ = pd.factorize(code.ravel())
        code = code.reshape(k.shape)
    first = np.full(code.max() + 1 if code.size else 0, -1, dtype=np.int64)
    first[code.ravel()[::-1]] = np.arange(code.size)[::-1]
    return code, first


def per_key(fn: Callable[..., tuple], *keys) -> tuple[np.ndarray, ...]:
    """``fn(*scalars)`` -> tuple of values, evaluated once per distinct row of ``keys`` and broadcast back."""
    code, first = factorize(*keys)
    flat = [np.broadcast_to(np.asarray(k), code.shape).ravel() for k in keys]
    results = [fn(*(f[i].item() for f in flat)) for i in first]
    return tuple(np.asarray(col)[code] for col in zip(*results, strict=True))


def collective_times(net: Network, op: str, nbytes, ranks, stride, path_ranks=None) -> np.ndarray:
    """``collective_time(op, nbytes, ranks, path_of(net, stride, path_ranks))`` for every row (path_ranks
    defaults to ranks): groups of one rank, or nothing to send, take no time."""
    return collective_calls(net, op, nbytes, ranks, stride, path_ranks)[0]


def collective_calls(net: Network, op: str, nbytes, ranks, stride, path_ranks=None, named: bool = False):
    """(times, names): names are "OP ALGORITHM/PROTOCOL on TIERS" (None for one rank) when ``named``."""
    path_ranks = ranks if path_ranks is None else path_ranks

    def one(size: float, n: int, st: int, pn: int):
        if n <= 1:
            return 0.0, None
        r = collective(op, size, path_of(net, st, pn).resized(n))
        return r.time_s, (f"{op} {r.algorithm}/{r.protocol} on {r.tiers}" if named else None)

    return per_key(one, nbytes, ranks, stride, path_ranks)


def on_distinct(fn: Callable[..., dict], *keys) -> dict:
    """``fn(*key_arrays)`` -> dict of arrays, evaluated on the distinct rows of ``keys`` only (numpy
    arrays of those rows) and broadcast back to every row."""
    code, first = factorize(*keys)
    small = [np.broadcast_to(np.asarray(k), code.shape).ravel()[first] for k in keys]
    return {k: np.broadcast_to(np.asarray(v, dtype=float), first.shape)[code] for k, v in fn(*small).items()}
