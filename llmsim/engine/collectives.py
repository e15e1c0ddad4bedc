"""Collective-communication cost (alpha-beta model) behind one interface.

``S`` is the buffer size in bytes as nccl-tests defines it (all-reduce: the reduced buffer; reduce-scatter:
the input; all-gather: the output; all-to-all: what each rank sends), ``n`` the ranks, ``B`` the
achievable per-direction bandwidth per rank and ``alpha`` the per-step latency. Ring and tree costs:
Thakur, Rabenseifner & Gropp 2005 (IJHPCA 19(1)); NCCL's busbw factors: nccl-tests doc/PERFORMANCE.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "p2p")


@dataclass(frozen=True)
class Link:
    """What a group of ranks gets from the network: achievable bandwidth, latency, which tier."""

    bw_bytes_per_s: float
    latency_s: float
    tier: str
    in_network_reduction: bool = False


def ring_time(op: str, nbytes, n, link: Link):
    """Ring algorithm: n-1 steps (2(n-1) for all-reduce), each moving S/n bytes."""
    n = np.asarray(n, dtype=float)
    frac = (n - 1) / np.maximum(n, 1)
    if op == "all_reduce":
        t = 2 * (n - 1) * link.latency_s + 2 * frac * nbytes / link.bw_bytes_per_s
    elif op in ("reduce_scatter", "all_gather", "all_to_all"):
        t = (n - 1) * link.latency_s + frac * nbytes / link.bw_bytes_per_s
    elif op == "p2p":
        t = link.latency_s + nbytes / link.bw_bytes_per_s + 0 * n
    else:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    return np.where(n > 1, t, 0.0)


def tree_allreduce_time(nbytes, n, link: Link):
    """Double binary tree all-reduce (NCCL >= 2.4): 2 log2(n) latency steps, pipelined so each rank
    sends and receives about S once per tree direction (Sanders et al. 2009; NCCL blog 2019)."""
    n = np.asarray(n, dtype=float)
    t = 2 * np.log2(np.maximum(n, 2)) * link.latency_s + 2 * nbytes / link.bw_bytes_per_s
    return np.where(n > 1, t, 0.0)


def collective_time(op: str, nbytes, n, link: Link):
    """Time of the fastest available algorithm (a tuner's choice): ring, or tree for all-reduce."""
    t = ring_time(op, nbytes, n, link)
    if op == "all_reduce":
        t = np.minimum(t, tree_allreduce_time(nbytes, n, link))
    return t
