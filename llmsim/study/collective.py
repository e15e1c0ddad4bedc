"""One collective on a network preset for a list of sizes, as nccl-tests reports it (``llmsim collective``)."""

from __future__ import annotations

import numpy as np

from llmsim.engine.network.collectives import ALGORITHMS, OPS, bus_factor, collective_columns
from llmsim.engine.network.topology import path_of
from llmsim.spec.errors import SpecError

COLUMNS = ["op", "ranks", "bytes", "algorithm", "protocol", "tiers", "time_s", "algbw_gb_s", "busbw_gb_s"]


def rows(network, op: str, byte_sizes: list[int], ranks: int, stride: int = 1,
         algorithm: str | None = None) -> list[dict]:
    """One output row per size (column names: COLUMNS)."""
    if op not in OPS:
        raise SpecError(f"--op: unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise SpecError(f"--algorithm: unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    total = network.tiers[-1].size
    if not 1 <= stride <= total:
        raise SpecError(f"--stride: {stride}; allowed: 1 to {total} (devices between consecutive ranks)")
    if ranks < 2 or ranks * stride > total:
        raise SpecError(f"--ranks: {ranks} ranks {stride} apart do not fit network '{network.name}' "
                        f"({total} devices); allowed: 2 to {total // stride}")
    path = path_of(network, stride, 2 if op == "p2p" else ranks)
    c = collective_columns(op, np.array(byte_sizes, dtype=float), path, algorithm)
    if np.isinf(c.times).any():
        raise SpecError(f"--algorithm: {algorithm} does not apply to {op} on {path.tiers} "
                        f"({', '.join(lv.topology for lv in path.levels)})")
    out = []
    for nbytes, t, algo, proto in zip(byte_sizes, c.times.tolist(), c.algorithms, c.protocols, strict=True):
        algbw = nbytes / t / 1e9
        out.append({"op": op, "ranks": ranks, "bytes": nbytes, "algorithm": algo, "protocol": proto,
                    "tiers": c.tiers, "time_s": t, "algbw_gb_s": algbw, "busbw_gb_s": algbw * bus_factor(op, ranks)})
    return out
