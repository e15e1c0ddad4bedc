"""Placing parallel groups on the network's tiers.

Ranks are numbered with the dimensions of ``parallel.order`` innermost first (default tp, cp, ep, dp, pp,
as Megatron-LM lays them out). A group of ``n`` ranks whose members sit ``stride`` ranks apart has
min(n, tier_size / stride) members inside one domain of each tier; the ratio between consecutive tiers
is that level's rank count in the group's ``Path``. What a rank gets on a level depends on the tier's
topology: a switch or fat-tree gives its full per-device bandwidth (a fat-tree divided by its
oversubscription once the group leaves a leaf switch); a dragonfly its global-link share once the group
leaves a dragonfly group; a torus the links of the dimensions the group spans.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from functools import lru_cache

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.columns import factorize
from llmsim.engine.network import tuner
from llmsim.engine.network.collectives import NO_CANDIDATE, Timed, collective_columns
from llmsim.engine.network.path import Level, Path
from llmsim.engine.types import Network, Tier


def strides(order: tuple[str, ...], degrees: dict[str, int]) -> dict[str, int]:
    out, acc = {}, 1
    for dim in order:
        out[dim] = acc
        acc = acc * degrees[dim]  # not *=: with numpy degrees that would alter the strides stored above
    return out


def torus_extents(dims: tuple[int, ...], stride: int, count: int) -> tuple[int, ...]:
    """Extent in each torus dimension (filled in order) of ``count`` ranks ``stride`` apart."""
    out = []
    for d in dims:
        if count <= 1:
            break
        if stride >= d:
            stride = max(1, stride // d)
            continue
        e = min(count, max(1, d // stride))
        out.append(e)
        count = math.ceil(count / e)
        stride = 1
    return tuple(out)


def _level(network: Network, i: int, ranks: int, stride: int, span: int) -> Level:
    """What each of a group's ranks gets on tier ``i``; ``stride`` and ``span`` in devices."""
    tier: Tier = network.tiers[i]
    eff = cal.SCALEUP_LINK_EFFICIENCY if i == 0 else cal.SCALEOUT_LINK_EFFICIENCY
    bw = tier.bw_bytes_per_s * eff
    extents: tuple[int, ...] = ()
    inner_size = network.tiers[i - 1].size if i else 1
    if tier.topology == "fat-tree":
        # a leaf switch has radix/2 down-ports: radix/2 nodes per rail when rail-optimised (each GPU's NIC
        # on its own rail), else radix/2 NICs; beyond a leaf the traffic meets the oversubscribed uplinks
        # (no radix given: every group on this tier is taken to cross the spine)
        leaf = tier.radix // 2 * (inner_size if tier.rail_optimized else 1) if tier.radix else 0
        if span > leaf:
            bw /= tier.oversubscription
    elif tier.topology == "dragonfly":
        if tier.group_size and span > tier.group_size and tier.global_bw_bytes_per_s:
            bw = min(bw, tier.global_bw_bytes_per_s * eff)
    elif tier.topology in ("torus2d", "torus3d"):
        extents = torus_extents(tier.dims, max(1, stride // inner_size), ranks)
        bw = bw * len(extents) / len(tier.dims)  # the used dimensions' links of the rank's 2*D links
    elif tier.topology == "ring":
        pass  # both directions of the ring: the tier's figure already counts the two links
    else:  # switch, full-mesh: oversubscription if the preset gives one
        bw /= tier.oversubscription
    return Level(tier.name, tier.topology, ranks, bw, tier.latency_s, tier.in_network_reduction,
                 tier.bw_bytes_per_s, extents, scale_up=i == 0, ll_latency_s=tier.ll_latency_s)


def _members(n: int, inside: int, room: int) -> int:
    """Group members per domain of a tier that has ``room`` for them: the largest multiple of ``inside``
    dividing ``n`` that fits, so that every domain holds the same share (a group of 16 ranks 8 apart on
    72-GPU racks counts as 2 racks of 8, not 9 + 7)."""
    if room >= n:
        return n
    rest = n // inside
    return inside * max(d for d in range(1, rest + 1) if rest % d == 0 and inside * d <= max(room, inside))


@lru_cache(maxsize=4096)
def path_of(network: Network, stride: int, n: int) -> Path:
    """Path of ``n`` ranks ``stride`` apart (cached: a sweep places the same few groups again and again)."""
    levels, inside = [], 1
    for i, tier in enumerate(network.tiers):
        last = i == len(network.tiers) - 1
        members = n if last else _members(n, inside, max(1, tier.size // stride))
        if members > inside:
            levels.append(_level(network, i, members // inside, stride, stride * members))
            inside = members
        if inside >= n:
            break
    return Path(tuple(levels))


def group_path(network: Network, order: tuple[str, ...], degrees: dict[str, int], dim: str) -> Path:
    """The path a ``dim`` group communicates over."""
    return path_of(network, strides(order, degrees)[dim], degrees[dim])


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
