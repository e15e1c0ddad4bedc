"""What communication overlapped with computation costs: the part that outlasts the compute, or the
compute's own slowdown while the collective's kernels share the device, whichever is larger.

NCCL runs its collectives as kernels on the device's SMs (one CTA per channel, 16 SMs on a DGX with 8
NICs: S. Jeaugey, NVIDIA/nccl#689) and they compete with the GEMMs for memory bandwidth as well, so a
GEMM under a collective runs slower. Lee et al. measure overlapped compute 18.9% slower on average (up
to 40%) than alone, over GPT and Llama training on A100, H100, MI210 and MI250 ("Characterizing
Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning", arXiv 2507.03114, 2025,
abstract): ``calibration.OVERLAP_COMPUTE_SLOWDOWN``.

A compute window of ``W`` seconds runs beside a collective of ``c`` seconds. While both run the compute
advances at 1 / (1 + x) of its speed, so the pair ends after max(c, W + c x / (1 + x)): the window grows
by max(c - W, c x / (1 + x)).
"""

from __future__ import annotations

import numpy as np

from llmsim.engine import calibration as cal


def overlap_cost(comm, window, slowdown: float | None = None):
    """Time the compute ``window`` (s) grows by when a collective of ``comm`` seconds runs beside it
    (numbers or arrays); ``comm`` with no window (0) is wholly exposed."""
    x = cal.OVERLAP_COMPUTE_SLOWDOWN if slowdown is None else slowdown
    return np.maximum(comm - window, comm * (x / (1 + x)))


def bucketed_cost(comm, window, last_share):
    """A reduction issued in buckets while the ``window`` computes (data-parallel gradients during the
    backward, Li et al. 2020, VLDB, sec. 3.2.3): every bucket but the last overlaps; the last, a
    ``last_share`` of the bytes, starts when the window ends and is exposed whole."""
    last = comm * last_share
    return overlap_cost(comm - last, window) + last
