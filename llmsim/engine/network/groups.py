"""A sweep's parallel groups timed: each row's group of ``ranks`` ranks ``stride`` apart placed on the
network (``topology.path_of``), the rows of all groups that land on one path timed at once by the tuner
(``tuner.tune_pairs``), and the last calls remembered. Caching and vectorisation around the physics of
``topology.py`` (placement), ``tuner.py`` and ``algorithms.py`` (the collectives' costs).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.columns import factorize
from llmsim.engine.network import tuner
from llmsim.engine.network.collectives import NO_CANDIDATE, Timed, collective_columns
from llmsim.engine.network.topology import path_of
from llmsim.engine.types import Network

REMEMBERED = 64  # group_collectives calls kept: a sweep's neighbouring groups (the same model and
_remembered: OrderedDict = OrderedDict()  # network, another recompute or ZeRO stage) ask for the same ones


def _key(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


class Timings:
    """``group_collectives``' answer: unpacks as (times, names); the names ("OP ALGORITHM/PROTOCOL on
    TIERS" per row, None where nothing is sent) are written out only when asked for (the step time needs
    the times alone), then kept. Both read-only."""

    __slots__ = ("_names", "_op", "_parts", "times")

    def __init__(self, times: np.ndarray, op: str, parts: list):
        self.times, self._op, self._parts, self._names = times, op, parts, None
        times.flags.writeable = False

    @property
    def names(self) -> np.ndarray:
        if self._names is None:
            names = np.full(self.times.shape, None, dtype=object)
            flat = names.reshape(-1)
            for rows, timed in self._parts:  # rows None: every row
                if rows is None:
                    names[...] = timed.names(self._op).reshape(names.shape)
                else:
                    flat[rows] = timed.names(self._op)
            names.flags.writeable = False
            self._names, self._parts = names, None
        return self._names

    def __iter__(self):
        return iter((self.times, self.names))

    def __getitem__(self, i: int) -> np.ndarray:
        return self.times if i == 0 else (self.times, self.names)[i]


def group_collectives(net: Network, op: str, nbytes, ranks, stride, path_ranks=None) -> Timings:
    """(times, names "OP ALGORITHM/PROTOCOL on TIERS") of ``op`` over groups of ``ranks`` ranks ``stride``
    apart (arrays: a sweep's rows) placed as groups of ``path_ranks`` (default ``ranks``) are; each
    distinct group is placed once, and the rows of all groups that land on the same path are timed at
    once (a size's time depends on its path alone). Groups of one rank, or nothing to send, take no time
    (name None). The last ``REMEMBERED`` calls are kept (read-only arrays)."""
    key = (net, op, *(None if a is None else _key(a) for a in (nbytes, ranks, stride, path_ranks)))
    if key in _remembered:
        _remembered.move_to_end(key)
        return _remembered[key]
    out = _group_collectives(net, op, nbytes, ranks, stride, path_ranks)
    _remembered[key] = out
    if len(_remembered) > REMEMBERED:
        _remembered.popitem(last=False)
    return out


def _group_collectives(net: Network, op: str, nbytes, ranks, stride, path_ranks) -> Timings:
    path_ranks = ranks if path_ranks is None else path_ranks
    S, n, st, pn = np.broadcast_arrays(np.asarray(nbytes, dtype=float), ranks, stride, path_ranks)
    times = np.zeros(S.shape)
    if not S.size:
        return Timings(times, op, [])
    if all(k.min() == k.max() for k in (n, st, pn)):  # one group: no need to number the keys
        k = n.flat[0]
        if k <= 1:
            return Timings(times, op, [])
        timed = collective_columns(op, S, path_of(net, int(st.flat[0]), int(pn.flat[0])).resized(int(k)))
        times[:] = timed.times
        return Timings(times, op, [(None, timed)])
    code, first = factorize(n, st, pn)
    paths: dict = {}  # path -> its number; a group of one rank gets -1
    of_key = np.array([paths.setdefault(path_of(net, int(st.flat[i]), int(pn.flat[i])).resized(int(n.flat[i])),
                                        len(paths)) if n.flat[i] > 1 else -1 for i in first], dtype=np.int64)
    of_row = of_key[code.ravel()]
    order = np.argsort(of_row, kind="stable")
    bounds = np.searchsorted(of_row[order], np.arange(len(paths) + 1))
    flat_s, flat_t, parts = S.ravel(), times.reshape(-1), []
    if op == "p2p" or len(paths) < 2:
        for path, p in paths.items():
            rows = order[bounds[p]:bounds[p + 1]]
            timed = collective_columns(op, flat_s[rows], path)
            flat_t[rows] = timed.times
            parts.append((rows, timed))
        return Timings(times, op, parts)
    # every path's (path, size) pairs tuned at once, a shape of paths at a time (network/tuner.py):
    # the same times and choices as collective_columns path by path
    several = np.array([path.ranks > 1 for path in paths])  # a path placed on fewer ranks may have none
    send = (of_row >= 0) & (flat_s > 0) & several[np.maximum(of_row, 0)]
    import pandas as pd  # a sweep's group: pandas hashes the sizes faster than numpy sorts them

    pair_path, pair_size = of_row[send], flat_s[send]
    size_code, distinct = pd.factorize(pair_size)  # sizes > 0: equal values have equal bits
    back, first = factorize(pair_path * len(distinct) + size_code)
    t, picked, cands = tuner.tune_pairs(op, pair_size[first], pair_path[first], list(paths))
    choice = np.full(flat_s.shape, len(cands) - 1, dtype=np.int64)
    flat_t[send] = t[back] + cal.COLLECTIVE_BASE_LATENCY_S
    choice[send] = picked[back]
    for path, p in paths.items():
        rows = order[bounds[p]:bounds[p + 1]]
        sent = send[rows]
        if not sent.any():
            parts.append((rows, Timed(np.zeros(len(rows)), np.zeros(len(rows), dtype=np.int64), (NO_CANDIDATE,),
                                      sent, "-")))
        else:
            parts.append((rows, Timed(flat_t[rows], choice[rows], cands, sent, path.tiers)))
    return Timings(times, op, parts)
