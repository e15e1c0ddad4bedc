"""Time of a GEMM by its shape: output tiles quantised, compute and memory time blended, a fixed cost.

A GEMM kernel computes its output C[M, N] in tiles of ``GEMM_TILE_ROWS`` x ``GEMM_TILE_COLS``; a tile's rows
and columns past the edge of C are computed all the same, so the tensor cores do the FLOPs of the padded shape:

    F_tiles = 2 G max(T_r, M + T_r/2) ceil(N/T_c) T_c K        (G groups of a grouped GEMM)

(rows: the last tile is on average half full, ``tile_factor``; a grouped GEMM pads each group's rows: an
expert with 3 tokens still costs a 16-row tile). Waves are not quantised: cuBLAS's heuristics and stream-K
kernels spread a last partial wave over the SMs (Osama et al. 2023, arXiv 2301.03598); on an H200,
quantising waves on the 132 SMs changes little with 16-row tiles and fits dense GEMMs at 20-22% error with
128-row ones (``benchmarks/kernels/fit_gemm_shape.py``). The compute time t_c = F_tiles / rate and the memory
time t_m = bytes / bandwidth do not overlap perfectly near the ridge point; measured kernels follow

    t = (t_c^p + t_m^p)^(1/p) + GEMM_FIXED_S       (p = GEMM_BLEND_POWER)

with ``GEMM_FIXED_S`` the time a GEMM kernel takes however small (prologue, epilogue, the tail of the last
tiles). A backward runs the input gradient (tiles M x K) and the weight gradient (tiles N x K, reduced over
the M rows; a grouped expert GEMM's is slower where M is short: ``wgrad_depth_factor``). The constants and
their derivation are in llmsim/engine/calibration.py.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine import calibration as cal


def tile_factor(m, n):
    """Padded over useful FLOPs of a GEMM whose output is ``m`` x ``n`` in tiles of ``GEMM_TILE_ROWS`` x
    ``GEMM_TILE_COLS`` (>= 1; a dimension of 0 or less is not padded).

    Columns (a weight's width, fixed) pad to whole tiles. Rows pad to ``max(T, m + T/2)``: the row counts
    llmsim knows are mostly means of counts that vary from step to step and expert to expert (tokens in a
    serving step, tokens routed to an expert), whose last tile is on average half full; one row still costs
    a whole tile. ``ceil(m/T) T`` taken at a mean would jump by a tile where the mean crosses a multiple of T.
    """
    return _pad_rows(m, cal.GEMM_TILE_ROWS) * _pad_cols(n, cal.GEMM_TILE_COLS)


def _pad_cols(x, tile: float):
    x = np.asarray(x, dtype=float)
    positive = x > 0
    out = np.where(positive, np.ceil(x / tile) * tile / np.where(positive, x, 1.0), 1.0)
    return out if out.ndim else float(out)


def _pad_rows(x, tile: float):
    x = np.asarray(x, dtype=float)
    positive = x > 0
    out = np.where(positive, np.maximum(tile, x + tile / 2) / np.where(positive, x, 1.0), 1.0)
    return out if out.ndim else float(out)


def wgrad_depth_factor(m):
    """Compute time of a weight-gradient GEMM reducing over ``m`` rows (an expert's tokens), over its tile-padded
    FLOPs' time at the full rate: each output tile's loads, stores and pipeline fill cost as much as
    ``WGRAD_TILE_DEPTH`` rows of reduction, ``1 + D/m`` (1 for an unknown or empty ``m``)."""
    m = np.asarray(m, dtype=float)
    out = np.where(m > 0, 1.0 + cal.WGRAD_TILE_DEPTH / np.where(m > 0, m, 1.0), 1.0)
    return out if out.ndim else float(out)


def blend(t_compute, t_memory):
    """Time of a kernel whose compute alone takes ``t_compute`` and whose memory traffic alone ``t_memory``."""
    p = cal.GEMM_BLEND_POWER
    return (t_compute**p + t_memory**p) ** (1.0 / p)
