"""Alpha-beta cost of collective algorithms on one level of the network.

``S`` is the buffer size as nccl-tests defines it (all-reduce: the reduced buffer; reduce-scatter: its
input; all-gather: its output; all-to-all: what each rank sends; broadcast: the buffer), ``k`` the ranks
on this level, ``B`` the achievable per-rank per-direction bandwidth (bytes/s), ``a`` the per-step
latency (s); ``S``, ``k``, ``B`` and ``a`` may be arrays of one element per (path, size) pair
(``tuner.Stack``). Each function returns the time in seconds, or ``inf`` where the algorithm does not apply.
Reduction arithmetic (the gamma term) is left out: GPUs reduce at HBM speed, far above link speed.
"""

from __future__ import annotations

import math

import numpy as np

INF = float("inf")


def log2_steps(k):
    """Rounds of a binary tree or recursive doubling over k ranks (an int, or an array of them: log2 of
    a power of two is exact, of anything else far from an integer, so both give the same rounds)."""
    if np.ndim(k) == 0:
        return math.ceil(math.log2(k)) if k > 1 else 0
    return np.where(k > 1, np.ceil(np.log2(np.maximum(k, 1))), 0.0)


def ring(op: str, S: float, k: int, B: float, a: float) -> float:
    """Ring (Patarasuk & Yuan 2009; Thakur et al. 2005): k-1 steps of S/k, all-reduce = RS + AG."""
    f = (k - 1) / k
    if op == "all_reduce":
        return 2 * (k - 1) * a + 2 * f * S / B
    if op in ("reduce_scatter", "all_gather"):
        return (k - 1) * a + f * S / B
    if op == "broadcast":  # pipelined chain: fill k-1 hops, then stream S
        return (k - 1) * a + S / B
    return INF


def double_binary_tree(op: str, S: float, k: int, B: float, a: float) -> float:
    """NCCL's double binary tree (Sanders, Speck & Traeff 2009; NCCL 2.4 blog): log2 k latency steps up and
    down; pipelined, each rank sends and receives about S per direction for the reduce and the broadcast."""
    if op == "all_reduce":
        return 2 * log2_steps(k) * a + 2 * S / B
    if op == "broadcast":
        return log2_steps(k) * a + S / B
    return INF


def halving_doubling(op: str, S: float, k: int, B: float, a: float) -> float:
    """Recursive halving (reduce-scatter), recursive doubling (all-gather) and Rabenseifner's all-reduce
    (Thakur, Rabenseifner & Gropp 2005, sec. 4): log2 k steps with the ring's bandwidth term. A
    non-power-of-two k first folds the extra ranks in: one more step moving the whole buffer."""
    f = (k - 1) / k
    fold = np.where(k & (k - 1) == 0, 0.0, a + S / B)
    if op == "all_reduce":
        return 2 * log2_steps(k) * a + 2 * f * S / B + 2 * fold
    if op in ("reduce_scatter", "all_gather"):
        return log2_steps(k) * a + f * S / B + fold
    if op == "broadcast":  # scatter + all-gather (van de Geijn)
        return 2 * log2_steps(k) * a + 2 * f * S / B + fold
    return INF


def bruck(op: str, S: float, k: int, B: float, a: float) -> float:
    """Bruck all-to-all (Bruck et al. 1997): log2 k steps, each forwarding about half the buffer."""
    if op != "all_to_all":
        return INF
    return log2_steps(k) * (a + S / 2 / B)


def pairwise(op: str, S: float, k: int, B: float, a: float) -> float:
    """Pairwise-exchange all-to-all (Thakur et al. 2005): k-1 steps of S/k each."""
    if op != "all_to_all":
        return INF
    return (k - 1) * a + (k - 1) / k * S / B


def direct(op: str, S: float, k: int, B: float, a: float) -> float:
    """One-shot algorithms on a full mesh: every rank talks to all k-1 peers at once over its own link to
    each (per-peer bandwidth B/(k-1)); one latency step per phase."""
    f = (k - 1) / k
    if op == "all_reduce":  # direct reduce-scatter, then direct all-gather
        return 2 * a + 2 * f * S / B
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return a + f * S / B
    if op == "broadcast":  # root sends S/(k-1) to each peer, which relay to all (scatter + all-gather)
        return 2 * a + S / B * (1 + 1 / np.maximum(k - 1, 1)) * f
    return INF


def in_network(op: str, S: float, k: int, B_line: float, a: float) -> float:
    """Switch-side reduction (NVLink SHARP / NVLS, InfiniBand SHARP): each rank sends its S once into the
    switch and receives the reduced S once, whatever k (Graham et al. 2016, SHARP). ``B_line`` is the
    achievable in-network rate per rank."""
    if op == "all_reduce":
        return a + S / B_line
    return INF


def torus(op: str, S: float, extents: tuple[int, ...], B: float, a: float) -> float:
    """Dimension-ordered collective on a torus (Sack & Gropp 2012; scaling-book "sharding"): a
    bidirectional ring in each used dimension; the buffer is split over the used dimensions so that all
    their links stream at once (``B`` is the rank's bandwidth over those links). Latency: each ring of
    extent e takes ceil((e-1)/2) steps per phase going both ways round."""
    n = math.prod(extents)
    if n <= 1:
        return 0.0
    steps = sum(math.ceil((e - 1) / 2) for e in extents if e > 1)
    f = (n - 1) / n
    if op == "all_reduce":
        return 2 * steps * a + 2 * f * S / B
    if op in ("reduce_scatter", "all_gather"):
        return steps * a + f * S / B
    if op == "all_to_all":  # bisection-bound: a quarter of the traffic crosses each cut of a ring
        return steps * a + f * S / B * max(extents) / 4
    if op == "broadcast":
        return steps * a + S / B
    return INF


# algorithm name -> (function, topologies it runs on, ops)
FLAT = {
    "ring": (ring, None),
    "tree": (double_binary_tree, {"switch", "fat-tree", "dragonfly", "full-mesh"}),
    "halving-doubling": (halving_doubling, {"switch", "fat-tree", "dragonfly", "full-mesh"}),
    "bruck": (bruck, {"switch", "fat-tree", "dragonfly", "full-mesh"}),
    "pairwise": (pairwise, {"switch", "fat-tree", "dragonfly", "full-mesh"}),
    "direct": (direct, {"full-mesh"}),
}
