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
from dataclasses import dataclass, replace

import numpy as np

from llmsim.engine import algorithms as alg
from llmsim.engine import calibration as cal

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "p2p")
ALGORITHMS = ("ring", "tree", "halving-doubling", "bruck", "pairwise", "direct", "torus", "in-network",
              "in-network-tree", "hierarchical")
# What the tuner chooses from unless told otherwise: the algorithms GPU collective libraries ship (NCCL /
# RCCL: ring, tree, NVLS/SHARP, CollNet-style hierarchical, pairwise all-to-all; direct on a full mesh;
# dimension-ordered rings on a torus). Halving-doubling and Bruck (MPI's) run only when forced.
AUTO = ("ring", "tree", "pairwise", "direct", "torus", "in-network", "in-network-tree", "hierarchical")


@dataclass(frozen=True)
class Level:
    """A group's share of one network tier."""

    tier: str
    topology: str
    ranks: int  # group members per domain of this tier, relative to the level inside it
    bw_bytes_per_s: float  # achievable per rank per direction
    latency_s: float  # per algorithm step (Simple protocol)
    in_network_reduction: bool = False
    line_bw_bytes_per_s: float = 0.0  # per-direction line rate (for in-network reduction)
    torus_extents: tuple[int, ...] = ()  # extent of the group in each torus dimension it uses
    scale_up: bool = False  # the innermost (node / scale-up) tier


@dataclass(frozen=True)
class Path:
    levels: tuple[Level, ...]

    @property
    def ranks(self) -> int:
        return math.prod(lv.ranks for lv in self.levels)

    @property
    def tier(self) -> str:
        return self.levels[-1].tier if self.levels else "-"

    @property
    def tiers(self) -> str:
        return "+".join(lv.tier for lv in self.levels) or "-"

    def resized(self, n: int) -> Path:
        """The same placement with ``n`` ranks (outer levels shrink first)."""
        out, left = [], int(n)
        for lv in self.levels:
            k = min(lv.ranks, left)
            if k > 1:
                out.append(replace(lv, ranks=k))
            left = max(1, left // max(k, 1))
        return Path(tuple(out))


def flat_path(bw_bytes_per_s: float, latency_s: float, tier: str = "link", ranks: int = 2,
              topology: str = "switch") -> Path:
    """A one-level path (tests, quick estimates)."""
    return Path((Level(tier, topology, ranks, bw_bytes_per_s, latency_s),))


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
    if name == "tree" and op == "all_reduce":
        # NCCL trees chain the ranks inside a node and build the binary trees across nodes: latency
        # 2 * (sum of (k - 1) inner hops + log2 k outer hops) (NCCL tuning.cc, tree latency)
        hops = sum((x.ranks - 1 if x.scale_up else alg.log2_steps(x.ranks)) * x.latency_s for x in levels)
        return 2 * hops * lat_x + 2 * S / (bw * bw_x)
    return fn(op, S, n, bw * bw_x, lat * lat_x)


def _best_time(op: str, S: float, path: Path) -> float:
    return _best(op, S, path).time_s


def _hierarchical(op: str, S, path: Path, best=_best_time):
    """Reduce-scatter / all-gather inside the innermost level, the collective across the rest on S/k.
    ``S`` may be an array when ``best`` times arrays (engine/batch.py)."""
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
    if op == "all_to_all":  # traffic to ranks in other domains crosses the outer levels once
        n = path.ranks
        return best("all_to_all", S * k / n, inner) + best("all_to_all", S * (n - k) / n, outer)
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


def _best(op: str, S: float, path: Path, algorithm: str | None = None) -> Result:
    if path.ranks <= 1 or S <= 0:
        return NONE
    best = Result(alg.INF, "-", "-", path.tiers)
    for name in ([algorithm] if algorithm else AUTO):
        if name in ("hierarchical", "in-network-tree"):
            t = (_hierarchical if name == "hierarchical" else _in_network_tree)(op, S, path)
            if t < best.time_s:
                best = Result(t, name, "mixed", path.tiers)
            continue
        for proto, (lat_x, bw_x) in cal.PROTOCOLS.items():
            t = _flat(name, op, S, path, lat_x, bw_x)
            if t < best.time_s:
                best = Result(t, name, proto, path.tiers)
    return best


def collective(op: str, nbytes: float, path: Path, algorithm: str | None = None) -> Result:
    """Fastest algorithm (or ``algorithm``) for ``op`` on ``nbytes`` over ``path``, with the library's
    fixed launch cost; p2p is one message over the outermost level."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    if path.ranks <= 1 or nbytes <= 0:
        return NONE
    if op == "p2p":
        lv = path.levels[-1]
        return Result(lv.latency_s + nbytes / lv.bw_bytes_per_s, "send-recv", "simple", lv.tier)
    r = _best(op, float(nbytes), path, algorithm)
    return replace(r, time_s=r.time_s + cal.COLLECTIVE_BASE_LATENCY_S)


def collective_time(op: str, nbytes: float, n: int, path: Path) -> float:
    """Time of ``op`` over the first ``n`` ranks of ``path`` (the engine's one entry point)."""
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
