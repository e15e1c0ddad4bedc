"""Column-at-a-time evaluation helpers: run a scalar engine function once per distinct key and scatter
the results back to every row (a sweep's million rows have few distinct collective sizes and op shapes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from llmsim.engine import calibration as cal
from llmsim.engine.collectives import AUTO, Path, _flat, _hierarchical, _in_network_tree, collective
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


def first_row(cols: dict) -> dict:
    """Row 0 of a dict of column arrays as plain Python values (a one-point estimate)."""
    return {k: v[0].item() if isinstance(v[0], np.generic) else v[0] for k, v in cols.items()}


def on_distinct(fn: Callable[..., dict], *keys) -> dict:
    """``fn(*key_arrays)`` -> dict of arrays, evaluated on the distinct rows of ``keys`` only (numpy
    arrays of those rows) and broadcast back to every row."""
    code, first = factorize(*keys)
    small = [np.broadcast_to(np.asarray(k), code.shape).ravel()[first] for k in keys]
    return {k: np.broadcast_to(np.asarray(v, dtype=float), first.shape)[code] for k, v in fn(*small).items()}


def best_columns(op: str, sizes: np.ndarray, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``collectives._best`` for an array of sizes on one path (each > 0; path.ranks > 1): (times, names
    "ALGORITHM/PROTOCOL"). Every candidate of the tuner is timed on all sizes at once (the flat
    algorithms by ``collectives._flat`` itself, whose arithmetic takes arrays) and the fastest kept, the
    first in AUTO / PROTOCOLS order on a tie as ``_best`` keeps it; the same float operations in the same
    order, so each time equals the scalar ``collective`` to the bit (tests/test_inference_sweep.py)."""
    times, names = [], []
    for name in AUTO:
        if name == "hierarchical":  # the scalar tuner's own formulas, timing its sub-collectives on arrays
            times.append(_hierarchical(op, sizes, path, _best_times))
            names.append(f"{name}/mixed")
        elif name == "in-network-tree":
            times.append(_in_network_tree(op, sizes, path))
            names.append(f"{name}/mixed")
        else:
            for proto, (lat_x, bw_x) in cal.PROTOCOLS.items():
                times.append(_flat(name, op, sizes, path, lat_x, bw_x))  # inf (a number) where it does not apply
                names.append(f"{name}/{proto}")
    stack = np.empty((len(times), *sizes.shape))
    for i, t in enumerate(times):
        stack[i] = t
    pick = np.argmin(stack, axis=0)
    t = np.take_along_axis(stack, pick[None], axis=0)[0]
    return t, np.where(np.isinf(t), "-/-", np.array(names, dtype=object)[pick])


def _best_times(op: str, sizes: np.ndarray, path: Path) -> np.ndarray:
    if path.ranks <= 1:
        return np.zeros(sizes.shape)
    return np.where(sizes > 0, best_columns(op, sizes, path)[0], 0.0)


def collective_columns(op: str, nbytes, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``collective(op, nbytes, path)`` for an array of sizes on one path: (times, names "OP
    ALGORITHM/PROTOCOL on TIERS"; 0 and None where nothing is sent or the group has one rank)."""
    S = np.asarray(nbytes, dtype=float)
    times, names = np.zeros(S.shape), np.full(S.shape, None, dtype=object)
    send = S > 0
    if path.ranks <= 1 or not send.any():
        return times, names
    if op == "p2p":  # one message over the outermost level
        lv = path.levels[-1]
        times[send] = lv.latency_s + S[send] / lv.bw_bytes_per_s
        names[send] = f"p2p send-recv/simple on {lv.tier}"
        return times, names
    t, algo = best_columns(op, S[send], path)
    times[send] = t + cal.COLLECTIVE_BASE_LATENCY_S
    names[send] = [f"{op} {a} on {path.tiers}" for a in algo]
    return times, names


def sized_collective_calls(net: Network, op: str, nbytes, ranks, stride, path_ranks=None):
    """``collective_calls(..., named=True)`` with the sizes of each distinct (ranks, stride, path_ranks)
    evaluated as one array (``collective_columns``): a sweep's rows share a few groups but have many
    sizes."""
    path_ranks = ranks if path_ranks is None else path_ranks
    S, n, st, pn = np.broadcast_arrays(np.asarray(nbytes, dtype=float), ranks, stride, path_ranks)
    times, names = np.zeros(S.shape), np.full(S.shape, None, dtype=object)
    if not S.size:
        return times, names
    one = all(k.min() == k.max() for k in (n, st, pn))  # one group: no need to number the keys
    code, first = (np.zeros(S.shape, dtype=np.int64), np.zeros(1, dtype=np.int64)) if one else factorize(n, st, pn)
    for c, i in enumerate(first):
        k = n.flat[i]
        if k <= 1:
            continue
        rows = code == c
        path = path_of(net, int(st.flat[i]), int(pn.flat[i])).resized(int(k))
        times[rows], names[rows] = collective_columns(op, S[rows], path)
    return times, names


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
