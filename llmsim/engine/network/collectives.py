"""Collective cost on a group's path through the network, with the algorithm a tuner would pick.

A group's ``Path`` lists, innermost tier first, how many of its ranks share a domain of each tier
(``Level.ranks``; their product is the group size) and what each rank gets there (bandwidth, latency,
topology). ``collective`` times every applicable algorithm - flat ones over the whole group (ring,
double binary tree, halving-doubling, Bruck, pairwise, direct, torus, in-network) and the hierarchical
one (reduce-scatter inside, the collective across, all-gather inside; Sanders & Traeff / NCCL
"CollNet"-style) - under each protocol (Simple, LL128, LL) and keeps the fastest, as NCCL's tuner does.
Sizes follow nccl-tests (doc/PERFORMANCE.md); see ``algorithms.py`` for the closed forms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.network import algorithms as alg
from llmsim.engine.network.path import Path

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "p2p")
ALGORITHMS = ("ring", "tree", "halving-doubling", "bruck", "pairwise", "direct", "torus", "in-network",
              "in-network-tree", "hierarchical")
# What the tuner chooses from unless told otherwise: the algorithms GPU collective libraries ship (NCCL /
# RCCL: ring, tree, NVLS/SHARP, CollNet-style hierarchical, pairwise all-to-all; direct on a full mesh;
# dimension-ordered rings on a torus). Halving-doubling and Bruck (MPI's) run only when forced.
AUTO = ("ring", "tree", "pairwise", "direct", "torus", "in-network", "in-network-tree", "hierarchical")


@dataclass(frozen=True)
class Result:
    time_s: float
    algorithm: str
    protocol: str
    tiers: str


NONE = Result(0.0, "-", "-", "-")


def _flat(name: str, op: str, S: float, path: Path, lat_x: float, bw_x: float) -> float:
    """One algorithm run flat over the whole group: the bottleneck bandwidth (a level's per-rank bandwidth
    times the ranks inside it that send through it in parallel, as NCCL's multi-NIC rings do) and the
    mean step latency of its hops."""
    levels, n = path.levels, path.ranks
    if name in ("torus", "direct", "in-network") and len(levels) != 1:
        return alg.INF
    lv = levels[-1]
    if name == "torus":
        if not lv.torus_extents:
            return alg.INF
        return alg.torus(op, S, lv.torus_extents, lv.bw_bytes_per_s * bw_x, lv.latency_s * lat_x)
    if name == "in-network":
        if not lv.in_network_reduction:
            return alg.INF
        return alg.in_network(op, S, n, lv.line_bw_bytes_per_s * cal.IN_NETWORK_EFFICIENCY * bw_x,
                              cal.IN_NETWORK_LATENCY_S)
    fn, topologies = alg.FLAT[name]
    if topologies is not None and any(x.topology not in topologies for x in levels):
        return alg.INF
    inner, bw, lat, share = 1, math.inf, 0.0, 1.0
    for x in levels:
        bw = min(bw, x.bw_bytes_per_s * inner)
        inside = share * (1 - 1 / x.ranks) if x is not lv else share
        lat += inside * x.latency_s
        share -= inside
        inner *= x.ranks
    if op == "all_to_all" and name in ("pairwise", "bruck", "direct"):
        if name == "pairwise" and len(levels) > 1:
            return (n - 1) * lat * lat_x + _all_to_all_bandwidth_time(S, path, bw_x)
        bw = bw * _all_to_all_share(lv) if len(levels) == 1 else bw
    if name == "tree" and op == "all_reduce":
        # NCCL trees chain the ranks inside a node and build the binary trees across nodes: latency
        # 2 * (sum of (k - 1) inner hops + log2 k outer hops) (NCCL tuning.cc, tree latency)
        hops = sum((x.ranks - 1 if x.scale_up else alg.log2_steps(x.ranks)) * x.latency_s for x in levels)
        return 2 * hops * lat_x + 2 * S / (bw * bw_x)
    return fn(op, S, n, bw * bw_x, lat * lat_x)


def _all_to_all_bandwidth_time(S, path: Path, bw_x: float):
    """Bandwidth time of an all-to-all across several levels: each rank sends 1/n of its buffer to every
    rank; what goes to ranks outside its level-(j-1) domain leaves through its own level-j link (its NIC,
    not the node's aggregate), the innermost level carrying only the traffic that stays inside it
    (nccl-tests alltoall across nodes is NIC-bound: busbw ~ NIC rate). The slowest level sets the time,
    the levels streaming at once."""
    n, inner, t = path.ranks, 1, 0.0
    for i, x in enumerate(path.levels):
        crossing = (x.ranks - 1) / n if i == 0 else (n - inner) / n
        t = np.maximum(t, S * crossing / (x.bw_bytes_per_s * _all_to_all_share(x) * bw_x))
        inner *= x.ranks
    return t


def _all_to_all_share(x) -> float:
    """An all-to-all's achievable rate on a level over the ring's (``calibration.ALL_TO_ALL_LINK_EFFICIENCY``
    in place of the level's link efficiency)."""
    ring = cal.SCALEUP_LINK_EFFICIENCY if x.scale_up else cal.SCALEOUT_LINK_EFFICIENCY
    return cal.ALL_TO_ALL_LINK_EFFICIENCY / ring


def _hierarchical(op: str, S, path: Path):
    """Reduce-scatter / all-gather inside the innermost level, the collective across the rest on S/k
    (each part by the tuner itself); ``S`` is an array."""
    best = _best_times
    inner, outer = Path(path.levels[:1]), Path(path.levels[1:])
    if not outer.levels:
        return alg.INF
    k = inner.ranks
    if op == "all_reduce":
        return best("reduce_scatter", S, inner) + best("all_reduce", S / k, outer) + best("all_gather", S, inner)
    if op == "reduce_scatter":
        return best("reduce_scatter", S, inner) + best("reduce_scatter", S / k, outer)
    if op == "all_gather":
        return best("all_gather", S / k, outer) + best("all_gather", S, inner)
    if op == "broadcast":
        return best("broadcast", S, outer) + best("broadcast", S, inner)
    if op == "all_to_all":
        # the k/n of the buffer for the own domain inside, then the rest across: an all-to-all over the m
        # outer domains of the whole buffer sends (m-1)/m of it = (n-k)/n, what leaves each rank's domain
        n = path.ranks
        return best("all_to_all", S * k / n, inner) + best("all_to_all", S, outer)
    return alg.INF


def _in_network_tree(op: str, S, path: Path):
    """NCCL's NVLSTree all-reduce: in-network reduction inside the scale-up domain, pipelined chunk by chunk
    with a double binary tree across domains, each of the k ranks of a domain carrying S/k over its own
    NIC; the slower stage sets the pace. A tree moves 2 S/k per rank each way (NCCL tuning.cc: tree algbw
    = busbw / 2), except across two domains, where the two trees degenerate to one exchange of S/k."""
    inner, outer = path.levels[0], path.levels[1:]
    if op != "all_reduce" or not outer or not inner.in_network_reduction:
        return alg.INF
    m = math.prod(x.ranks for x in outer)
    bw_out = min(x.bw_bytes_per_s for x in outer)
    t_out = (1 if m == 2 else 2) * S / inner.ranks / bw_out
    t_in = S / (inner.line_bw_bytes_per_s * cal.IN_NETWORK_EFFICIENCY)
    hops = 2 * sum(alg.log2_steps(x.ranks) * x.latency_s for x in outer)
    return cal.IN_NETWORK_LATENCY_S + hops + np.maximum(t_in, t_out)  # S: a number or an array


NO_CANDIDATE = ("-", "-")  # what the tuner reports where no algorithm applies (or nothing is sent)


@cache
def _candidates(algorithm: str | None) -> tuple[tuple[str, str], ...]:
    """(algorithm, protocol) pairs the tuner times, in the order it prefers them on a tie."""
    out = []
    for name in ([algorithm] if algorithm else AUTO):
        if name in ("hierarchical", "in-network-tree"):
            out.append((name, "mixed"))
        else:
            out += [(name, proto) for proto in cal.PROTOCOLS]
    return tuple(out)


def tune(op: str, sizes: np.ndarray, path: Path, algorithm: str | None = None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """NCCL-style tuner: every candidate (or only ``algorithm``) timed on every size at once, the fastest
    kept (the first in AUTO / PROTOCOLS order on a tie). ``sizes`` > 0, ``path.ranks`` > 1; returns (times
    without the launch cost, the index of each size's choice, the candidates + NO_CANDIDATE), inf and
    NO_CANDIDATE where none applies. Remembered per (op, path, sizes): a sweep's groups ask for the same
    few collectives again and again (read-only arrays)."""
    sizes = np.asarray(sizes, dtype=float)
    uniq, back = np.unique(sizes, return_inverse=True)
    if len(uniq) > CACHED_SIZES:  # a long column of sizes: timed once, not kept
        t, choice, cands = _tune.__wrapped__(op, uniq.tobytes(), uniq.shape, path, algorithm)
    else:
        t, choice, cands = _tune(op, uniq.tobytes(), uniq.shape, path, algorithm)
    return t[back].reshape(sizes.shape), choice[back].reshape(sizes.shape), cands


CACHED_SIZES = 64  # at most this many distinct sizes per remembered call: the cache stays a few MB


@lru_cache(maxsize=8192)
def _tune(op: str, key: bytes, shape: tuple, path: Path, algorithm: str | None):
    sizes = np.frombuffer(key, dtype=float).reshape(shape)
    cands = _candidates(algorithm)
    stack = np.empty((len(cands), *np.shape(sizes)))
    for i, (name, proto) in enumerate(cands):
        if name == "hierarchical":
            stack[i] = _hierarchical(op, sizes, path)
        elif name == "in-network-tree":
            stack[i] = _in_network_tree(op, sizes, path)
        else:
            stack[i] = _flat(name, op, sizes, path, *cal.PROTOCOLS[proto])  # inf where it does not apply
    pick = np.argmin(stack, axis=0)
    t = np.take_along_axis(stack, pick[None], axis=0)[0]
    choice = np.where(np.isinf(t), len(cands), pick)
    t.flags.writeable = choice.flags.writeable = False
    return t, choice, (*cands, NO_CANDIDATE)


def _best_times(op: str, sizes: np.ndarray, path: Path) -> np.ndarray:
    if path.ranks <= 1:
        return np.zeros(np.shape(sizes))
    return np.where(sizes > 0, tune(op, sizes, path)[0], 0.0)


@dataclass(frozen=True)
class Timed:
    """One collective on one path for an array of sizes."""

    times: np.ndarray  # seconds, launch cost included; 0 where nothing is sent or the group has one rank
    choice: np.ndarray  # index into ``candidates`` of each size's algorithm
    candidates: tuple[tuple[str, str], ...]  # (algorithm, protocol)
    sent: np.ndarray  # bool: a message was sent
    tiers: str  # the tiers it crosses

    @property
    def algorithms(self) -> np.ndarray:
        return np.array([a for a, _ in self.candidates], dtype=object)[self.choice]

    @property
    def protocols(self) -> np.ndarray:
        return np.array([p for _, p in self.candidates], dtype=object)[self.choice]

    def names(self, op: str) -> np.ndarray:
        """"OP ALGORITHM/PROTOCOL on TIERS" per size, None where nothing is sent (formatted once per
        candidate, not once per size)."""
        labels = np.array([f"{op} {a}/{p} on {self.tiers}" for a, p in self.candidates] + [None], dtype=object)
        return labels[np.where(self.sent, self.choice, len(self.candidates))]


def collective_columns(op: str, nbytes, path: Path, algorithm: str | None = None) -> Timed:
    """``op`` over ``path`` for each size in ``nbytes`` (a number or an array): the fastest algorithm (or
    ``algorithm``) with the library's fixed launch cost; p2p is one message over the outermost level."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    S = np.atleast_1d(np.asarray(nbytes, dtype=float))
    times, choice = np.zeros(S.shape), np.zeros(S.shape, dtype=np.int64)
    send = (S > 0) & (path.ranks > 1)
    if not send.any():
        return Timed(times, choice, (NO_CANDIDATE,), send, "-")
    if op == "p2p":
        lv = path.levels[-1]
        times[send] = lv.latency_s + S[send] / lv.bw_bytes_per_s
        return Timed(times, np.where(send, 0, 1), (("send-recv", "simple"), NO_CANDIDATE), send, lv.tier)
    t, picked, cands = tune(op, S[send], path, algorithm)
    times[send] = t + cal.COLLECTIVE_BASE_LATENCY_S
    choice[:] = len(cands) - 1
    choice[send] = picked
    return Timed(times, choice, cands, send, path.tiers)


def collective(op: str, nbytes: float, path: Path, algorithm: str | None = None) -> Result:
    """``collective_columns`` of one size."""
    c = collective_columns(op, nbytes, path, algorithm)
    if not c.sent[0]:
        return NONE
    return Result(float(c.times[0]), c.algorithms[0], c.protocols[0], c.tiers)


def collective_time(op: str, nbytes: float, n: int, path: Path) -> float:
    """Time of ``op`` over the first ``n`` ranks of ``path``."""
    if n <= 1:
        return 0.0
    return collective(op, nbytes, path.resized(n)).time_s


def bus_factor(op: str, n: int) -> float:
    """nccl-tests busbw / algbw (doc/PERFORMANCE.md)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    return 1.0
