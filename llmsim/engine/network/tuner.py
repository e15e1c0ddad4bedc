"""The collective tuner: every applicable algorithm under each protocol timed on a group's path, the
fastest kept, as NCCL's tuner does - over many (path, size) pairs at once.

A path (``path.py``) lists, innermost tier first, how many of a group's ranks share a domain of each tier
and what each rank gets there. Flat algorithms run over the whole group (ring, double binary tree,
halving-doubling, Bruck, pairwise, direct, torus, in-network) with the bottleneck bandwidth and the mean
step latency of the path's levels; the hierarchical one runs reduce-scatter inside, the collective
across, all-gather inside (Sanders & Traeff / NCCL "CollNet"-style), each part tuned itself; NVLSTree
pipelines in-network reduction inside with a tree across. Closed forms: ``algorithms.py``.

A sweep's group asks for one collective on a few dozen paths (its rows' tp, dp, ep... groups placed on
the network) at a few sizes each. Paths of one shape (the same topologies, scale-up flags, in-network
reduction and torus extents per level, in order) differ only in numbers: ranks, bandwidth and latency
per level. ``Stack`` holds those numbers as arrays, one element per (path, size) pair, and every
candidate runs over all pairs of a shape in one go (``tune_pairs``, the tuner's one entry, which
remembers its answers); ``collectives.tune`` is its one-path case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.network import algorithms as alg
from llmsim.engine.network.path import Path

ALGORITHMS = ("ring", "tree", "halving-doubling", "bruck", "pairwise", "direct", "torus", "in-network",
              "in-network-tree", "hierarchical")
# What the tuner chooses from unless told otherwise: the algorithms GPU collective libraries ship (NCCL /
# RCCL: ring, tree, NVLS/SHARP, CollNet-style hierarchical, pairwise all-to-all; direct on a full mesh;
# dimension-ordered rings on a torus). Halving-doubling and Bruck (MPI's) run only when forced.
AUTO = ("ring", "tree", "pairwise", "direct", "torus", "in-network", "in-network-tree", "hierarchical")
NO_CANDIDATE = ("-", "-")  # what the tuner reports where no algorithm applies (or nothing is sent)


@cache
def candidates(algorithm: str | None) -> tuple[tuple[str, str], ...]:
    """(algorithm, protocol) pairs the tuner times, in the order it prefers them on a tie."""
    out = []
    for name in ([algorithm] if algorithm else AUTO):
        if name in ("hierarchical", "in-network-tree"):
            out.append((name, "mixed"))
        else:
            out += [(name, proto) for proto in cal.PROTOCOLS]
    return tuple(out)


@dataclass(frozen=True)
class Stack:
    """Levels of one path shape, innermost first: ``shape`` per level (topology, scale_up, in-network
    reduction, torus extents) and, per level, arrays with one element per pair."""

    shape: tuple[tuple, ...]
    ranks: tuple[np.ndarray, ...]
    bw: tuple[np.ndarray, ...]
    lat: tuple[np.ndarray, ...]
    line_bw: tuple[np.ndarray, ...]
    # per level the step latency LL sees in Simple units (Level.ll_as_simple_s), None where it is ``lat``
    ll_lat: tuple[np.ndarray | None, ...]

    def take(self, at: np.ndarray) -> Stack:
        """Elements ``at`` (a path's levels repeated for each of its pairs)."""
        pick = lambda arrays: tuple(None if a is None else a[at] for a in arrays)
        return Stack(self.shape, *(pick(arrays) for arrays in
                                   (self.ranks, self.bw, self.lat, self.line_bw, self.ll_lat)))

    def part(self, a: int, b: int | None = None) -> Stack:
        s = slice(a, b)
        return Stack(self.shape[s], self.ranks[s], self.bw[s], self.lat[s], self.line_bw[s], self.ll_lat[s])

    def under(self, protocol: str) -> Stack:
        """The levels as ``protocol`` sees them: LL takes a tier's measured LL step where it has one."""
        if protocol != "ll" or all(a is None for a in self.ll_lat):
            return self
        lat = tuple(a if b is None else b for a, b in zip(self.lat, self.ll_lat, strict=True))
        return Stack(self.shape, self.ranks, self.bw, lat, self.line_bw, self.ll_lat)

    @property
    def n(self) -> np.ndarray:
        out = 1
        for k in self.ranks:  # math.prod's order: ((1 * k0) * k1) ...
            out = out * k
        return out


def shape_of(path: Path) -> tuple[tuple, ...]:
    return tuple((x.topology, x.scale_up, x.in_network_reduction, x.torus_extents) for x in path.levels)


def stack(paths: list[Path]) -> Stack:
    """The levels of ``paths`` (one shape), one element per path."""
    cols = list(zip(*(p.levels for p in paths), strict=True))
    arr = lambda attr, dt: tuple(np.array([getattr(x, attr) for x in col], dtype=dt) for col in cols)
    lat = arr("latency_s", float)
    ll = tuple(None if all(x.ll_latency_s is None for x in col) else np.array([x.ll_as_simple_s for x in col])
               for col in cols)
    return Stack(shape_of(paths[0]), arr("ranks", np.int64), arr("bw_bytes_per_s", float), lat,
                 arr("line_bw_bytes_per_s", float), ll)


def _flat(name: str, op: str, S, st: Stack, lat_x: float, bw_x: float):
    """One algorithm run flat over the whole group: the bottleneck bandwidth (a level's per-rank bandwidth
    times the ranks inside it that send through it in parallel, as NCCL's multi-NIC rings do) and the
    mean step latency of its hops; inf where it does not apply."""
    shape, n, last = st.shape, st.n, len(st.shape) - 1
    if name in ("torus", "direct", "in-network") and len(shape) != 1:
        return alg.INF
    _, _, in_network, extents = shape[-1]
    if name == "torus":
        if not extents:
            return alg.INF
        return alg.torus(op, S, extents, st.bw[-1] * bw_x, st.lat[-1] * lat_x)
    if name == "in-network":
        if not in_network:
            return alg.INF
        return alg.in_network(op, S, n, st.line_bw[-1] * cal.IN_NETWORK_EFFICIENCY * bw_x,
                              cal.IN_NETWORK_LATENCY_S)
    fn, topologies = alg.FLAT[name]
    if topologies is not None and any(x[0] not in topologies for x in shape):
        return alg.INF
    inner, bw, lat, share = 1, math.inf, 0.0, 1.0
    for i in range(len(shape)):
        bw = np.minimum(bw, st.bw[i] * inner)
        inside = share * (1 - 1 / st.ranks[i]) if i != last else share
        lat = lat + inside * st.lat[i]
        share = share - inside
        inner = inner * st.ranks[i]
    if op == "all_to_all" and name in ("pairwise", "bruck", "direct"):
        if name == "pairwise" and len(shape) > 1:
            return (n - 1) * lat * lat_x + _all_to_all_bandwidth_time(S, st, bw_x)
        bw = bw * _all_to_all_share_of(shape[-1]) if len(shape) == 1 else bw
    if name == "tree" and op == "all_reduce":
        # NCCL trees chain the ranks inside a node and build the binary trees across nodes: latency
        # 2 * (sum of (k - 1) inner hops + log2 k outer hops) (NCCL tuning.cc, tree latency)
        hops = 0
        for i, x in enumerate(shape):
            hops = hops + (st.ranks[i] - 1 if x[1] else alg.log2_steps(st.ranks[i])) * st.lat[i]
        return 2 * hops * lat_x + 2 * S / (bw * bw_x)
    return fn(op, S, n, bw * bw_x, lat * lat_x)


def _all_to_all_share_of(level_shape: tuple) -> float:
    """An all-to-all's achievable rate on a level over the ring's (``calibration.ALL_TO_ALL_SCALEUP_EFFICIENCY``
    or ``ALL_TO_ALL_SCALEOUT_EFFICIENCY`` in place of the level's link efficiency)."""
    if level_shape[1]:
        return cal.ALL_TO_ALL_SCALEUP_EFFICIENCY / cal.SCALEUP_LINK_EFFICIENCY
    return cal.ALL_TO_ALL_SCALEOUT_EFFICIENCY / cal.SCALEOUT_LINK_EFFICIENCY


def _all_to_all_bandwidth_time(S, st: Stack, bw_x: float):
    """Bandwidth time of an all-to-all across several levels: each rank sends 1/n of its buffer to every
    rank; what goes to ranks outside its level-(j-1) domain leaves through its own level-j link (its NIC,
    not the node's aggregate), the innermost level carrying only the traffic that stays inside it
    (nccl-tests alltoall across nodes is NIC-bound: busbw ~ NIC rate). The slowest level sets the time,
    the levels streaming at once."""
    n, inner, t = st.n, 1, 0.0
    for i, x in enumerate(st.shape):
        crossing = (st.ranks[i] - 1) / n if i == 0 else (n - inner) / n
        t = np.maximum(t, S * crossing / (st.bw[i] * _all_to_all_share_of(x) * bw_x))
        inner = inner * st.ranks[i]
    return t


def _best(op: str, S, st: Stack):
    """The tuner's time of a part of the path (0 where nothing is sent or the part has one rank)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((S > 0) & (st.n > 1), tune(op, S, st)[0], 0.0)


def _hierarchical(op: str, S, st: Stack):
    """Reduce-scatter / all-gather inside the innermost level, the collective across the rest on S/k
    (each part by the tuner itself)."""
    if len(st.shape) < 2:
        return alg.INF
    inner, outer = st.part(0, 1), st.part(1)
    k = inner.n
    if op == "all_reduce":
        return _best("reduce_scatter", S, inner) + _best("all_reduce", S / k, outer) + _best("all_gather", S, inner)
    if op == "reduce_scatter":
        return _best("reduce_scatter", S, inner) + _best("reduce_scatter", S / k, outer)
    if op == "all_gather":
        return _best("all_gather", S / k, outer) + _best("all_gather", S, inner)
    if op == "broadcast":
        return _best("broadcast", S, outer) + _best("broadcast", S, inner)
    if op == "all_to_all":
        # the k/n of the buffer for the own domain inside, then the rest across: an all-to-all over the m
        # outer domains of the whole buffer sends (m-1)/m of it = (n-k)/n, what leaves each rank's domain
        return _best("all_to_all", S * k / st.n, inner) + _best("all_to_all", S, outer)
    return alg.INF


def _in_network_tree(op: str, S, st: Stack):
    """NCCL's NVLSTree all-reduce: in-network reduction inside the scale-up domain, pipelined chunk by chunk
    with a double binary tree across domains, each of the k ranks of a domain carrying S/k over its own
    NIC; the slower stage sets the pace. A tree moves 2 S/k per rank each way (NCCL tuning.cc: tree algbw
    = busbw / 2), except across two domains, where the two trees degenerate to one exchange of S/k."""
    if op != "all_reduce" or len(st.shape) < 2 or not st.shape[0][2]:
        return alg.INF
    outer = st.part(1)
    m = outer.n
    bw_out = st.bw[1]
    for b in st.bw[2:]:
        bw_out = np.minimum(bw_out, b)
    t_out = np.where(m == 2, 1, 2) * S / st.ranks[0] / bw_out
    t_in = S / (st.line_bw[0] * cal.IN_NETWORK_EFFICIENCY)
    hops = 0
    for i in range(1, len(st.shape)):
        hops = hops + alg.log2_steps(st.ranks[i]) * st.lat[i]
    hops = 2 * hops
    return cal.IN_NETWORK_LATENCY_S + hops + np.maximum(t_in, t_out)


def tune(op: str, S: np.ndarray, st: Stack, algorithm: str | None = None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Every candidate (or only ``algorithm``) timed on every pair of one shape (sizes ``S`` > 0), the
    fastest kept (the first in AUTO / PROTOCOLS order on a tie): times without the launch cost, the index
    of each pair's choice, the candidates + NO_CANDIDATE; inf and NO_CANDIDATE where none applies."""
    cands = candidates(algorithm)
    out = np.empty((len(cands), len(S)))
    for i, (name, proto) in enumerate(cands):
        if name == "hierarchical":
            out[i] = _hierarchical(op, S, st)
        elif name == "in-network-tree":
            out[i] = _in_network_tree(op, S, st)
        else:
            out[i] = _flat(name, op, S, st.under(proto), *cal.PROTOCOLS[proto])  # inf where it does not apply
    pick = np.argmin(out, axis=0)
    t = np.take_along_axis(out, pick[None], axis=0)[0]
    return t, np.where(np.isinf(t), len(cands), pick), (*cands, NO_CANDIDATE)


REMEMBERED_PAIRS = 200_000  # (path, size) answers kept across calls: a sweep's chunks ask for the same ones
REMEMBERED_PER_CALL = 4096  # a call with more pairs than this is tuned without the memo (and adds nothing)
_remembered: dict[tuple[str, Path, str | None], dict[float, tuple[float, int]]] = {}
_count = [0]


def forget() -> None:
    """Drop the remembered answers (they read calibration constants)."""
    _remembered.clear()
    _count[0] = 0


def tune_pairs(op: str, sizes: np.ndarray, path_of_pair: np.ndarray, paths: list[Path],
               algorithm: str | None = None):
    """(times without the launch cost, choices, candidates) of ``op`` for each pair (``sizes`` > 0 on
    ``paths[path_of_pair]``), every candidate or only ``algorithm``, a shape of paths at a time; answers
    are remembered per (path, algorithm, size), so the chunks of a sweep that meet a path again at a size
    tune only what is new. The only entry to the tuner (``collectives.tune`` is its one-path case)."""
    cands = (*candidates(algorithm), NO_CANDIDATE)
    t = np.empty(len(sizes))
    choice = np.empty(len(sizes), dtype=np.int64)
    remember = len(sizes) <= REMEMBERED_PER_CALL
    if remember:
        if _count[0] > REMEMBERED_PAIRS:
            forget()
        memos = [_remembered.setdefault((op, path, algorithm), {}) for path in paths]
        todo = []
        for i, (p, size) in enumerate(zip(path_of_pair.tolist(), sizes.tolist(), strict=True)):
            known = memos[p].get(size)
            if known is None:
                todo.append(i)
            else:
                t[i], choice[i] = known
        if not todo:
            return t, choice, cands
        todo = np.array(todo, dtype=np.int64)
    else:
        todo = np.arange(len(sizes))
    shapes: dict[tuple, list[int]] = {}
    for p in np.unique(path_of_pair[todo]).tolist():
        shapes.setdefault(shape_of(paths[p]), []).append(p)
    for members in shapes.values():
        local = np.full(len(paths), -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        rows = todo[local[path_of_pair[todo]] >= 0]
        st = stack([paths[p] for p in members]).take(local[path_of_pair[rows]])
        t[rows], choice[rows], _ = tune(op, sizes[rows], st, algorithm)
    if remember:
        for p, size, ti, ci in zip(path_of_pair[todo].tolist(), sizes[todo].tolist(), t[todo].tolist(),
                                   choice[todo].tolist(), strict=True):
            memos[p][size] = (ti, ci)
        _count[0] += len(todo)
    return t, choice, cands
