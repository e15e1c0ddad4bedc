"""Exposed tensor-parallel communication of one transformer layer, per microbatch.

Megatron-LM's f/g operators (Shoeybi et al. 2019, fig. 3) put, per block (attention, MLP), one all-reduce
in the forward (after the row-parallel GEMM) and one in the backward (the input gradient of the
column-parallel GEMM). With sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2) each all-reduce
becomes an all-gather + reduce-scatter pair, and the backward all-gathers the saved sharded input again
for the weight gradient.

Overlap in the backward (Megatron-LM ``LinearWithGradAccumulationAndAsyncCommunication``, on by default
since 2022): the column-parallel GEMM's input-gradient all-reduce (SP: reduce-scatter) runs while its
weight-gradient GEMM computes, and the SP re-all-gather of its input runs under its input-gradient GEMM.
What outlasts that GEMM is exposed, and the GEMM runs slower beside it (``overlap.overlap_cost``). Forward collectives sit on the critical path (the next GEMM needs
their result) unless ``tp_comm_overlap`` splits them into chunks under the neighbouring GEMMs
(Transformer Engine userbuffers comm-GEMM overlap, Megatron-Core ``--tp-comm-overlap``), whose
gathers run on the copy engines and slow the GEMMs less (``calibration.TP_OVERLAP_COMPUTE_SLOWDOWN``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsim.engine import calibration as cal
from llmsim.engine.compute import Op, op_time
from llmsim.engine.network.collectives import collective_time
from llmsim.engine.network.path import Path
from llmsim.engine.overlap import overlap_cost
from llmsim.engine.types import Accelerator

# GEMMs that take a block's replicated input and split their output over tp (column-parallel)
ATTENTION_COLUMN = ("qkv_proj", "q_proj", "q_up", "kv_up")
MLP_COLUMN = ("mlp_up", "experts_up", "shared_up")


@dataclass(frozen=True)
class TPComm:
    forward_s: float  # exposed in one forward pass of the layer
    backward_s: float  # exposed in one backward pass (recomputation not included)


def _column_gemm_time(ops: list[Op], names: tuple[str, ...], acc: Accelerator, precision: str):
    """Forward time of a block's column-parallel GEMMs (= their dgrad time = their wgrad time)."""
    return sum(op_time(op, acc, precision) * op.count for op in ops if op.name in names)


def overlap_windows(ops: list[Op], acc: Accelerator, precision: str) -> tuple:
    """(attention column GEMMs, MLP column GEMMs, all GEMMs) forward times: what TP collectives hide under."""
    gemm_fwd = sum(op_time(op, acc, precision) * op.count for op in ops if op.kind == "gemm")
    return (_column_gemm_time(ops, ATTENTION_COLUMN, acc, precision),
            _column_gemm_time(ops, MLP_COLUMN, acc, precision), gemm_fwd)


def layer_tp_comm(ops: list[Op], act_bytes, tp: int, seqpar: bool, link: Path, acc: Accelerator,
                  precision: str, overlap: bool) -> TPComm:
    """Exposed TP communication of one layer whose operators are ``ops``; ``act_bytes`` is one full
    (unsplit) activation tensor of the microbatch."""
    if tp <= 1:
        return TPComm(0.0, 0.0)
    times = {op: collective_time(op, act_bytes, tp, link) for op in ("all_gather", "reduce_scatter", "all_reduce")}
    return exposed_tp_comm(overlap_windows(ops, acc, precision), times, seqpar, overlap)


def exposed_tp_comm(windows: tuple, times: dict, seqpar: bool, overlap: bool) -> TPComm:
    """Exposed TP communication of a layer from its ``overlap_windows`` and its collectives' times
    (``all_gather``, ``reduce_scatter``, ``all_reduce`` of one activation tensor; numbers or arrays)."""
    attn, mlp, gemm_fwd = windows
    if seqpar:
        ag, rs = times["all_gather"], times["reduce_scatter"]
        fwd = 2 * (ag + rs)
        # per block: the all-gather of the output gradient (g's backward) is exposed; the input
        # re-all-gather hides under dgrad, the input-gradient reduce-scatter under wgrad
        bwd = sum(ag + overlap_cost(ag, w) + overlap_cost(rs, w) for w in (attn, mlp))
    else:
        ar = times["all_reduce"]
        fwd = 2 * ar
        bwd = sum(overlap_cost(ar, w) for w in (attn, mlp))
    if overlap:  # every collective chunked under the GEMMs next to it, on copy engines for the gathers
        x = cal.TP_OVERLAP_COMPUTE_SLOWDOWN
        fwd = overlap_cost(fwd, gemm_fwd, x)
        bwd = overlap_cost(bwd, 2 * gemm_fwd, x)
    return TPComm(fwd, bwd)
