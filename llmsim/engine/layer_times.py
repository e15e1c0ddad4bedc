"""The compute of one microbatch on one device, by operator: each layer's operators (``compute.py``)
timed on the device's roofline with its measured rates, forward and backward, and what activation
recomputation runs again (Megatron-Core's recompute modules), as typed ``LayerTimes``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.columns import on_distinct
from llmsim.engine.compute import Op, embedding_ops, expert_gemm_rate, head_ops, kernel_time, layer_ops
from llmsim.engine.memory import recompute_modules
from llmsim.engine.tensor_parallel import overlap_windows
from llmsim.engine.types import Scenario

# the operators each Megatron-Core recompute module runs again in the backward (memory.recompute_modules);
# core_attn is every op that op.core_attention marks
# (with FP8, the quantisation of a recomputed GEMM input runs again too: Megatron-Core keeps the 16-bit
# original, set_save_original_input, and the backward quantises it anew)
RECOMPUTED_OPS = {
    "layernorm": ("attn_norm", "mlp_norm", "qkv_proj_cast", "q_down_cast", "kv_down_cast", "q_proj_cast",
                  "mlp_up_cast", "shared_up_cast"),
    "mla_up_proj": ("q_up", "kv_up", "q_proj", "q_up_cast", "kv_up_cast", "q_proj_cast"),
    "moe_act": ("experts_act", "experts_down_cast"),
    "mlp": ("mlp_up", "mlp_act", "mlp_down", "mlp_up_cast", "mlp_down_cast"),
}


def _recomputed(op: Op, modules: frozenset[str]) -> bool:
    return (op.core_attention and "core_attn" in modules) or any(
        op.name in RECOMPUTED_OPS[x] for x in modules if x != "core_attn")


def _pass_time(ops: list[Op], sc: Scenario, synced=False):
    """(forward, backward, core attention's forward, forward of what the recompute setting runs again).
    With kernels launched eagerly (``parallel.cuda_graphs`` none, or attention: those outside the graphed
    scope) a pass takes at least its launches' host time (``host_bound``); where ``synced`` (a mask over the
    rows: a MoE layer whose dispatcher waits for the device's token counts) the forward is two such passes,
    before and after the wait."""
    acc, prec, kern = sc.accelerator, sc.workload.precision, sc.parallel.attention_kernel
    fwd_of = lambda sel: sum(kernel_time(op, acc, prec, kern) * op.count for op in ops if sel(op))
    fwd = fwd_of(lambda op: True)
    bwd = sum(kernel_time(op, acc, prec, kern, backward=True) * op.count for op in ops)
    attn_fwd = fwd_of(lambda op: op.core_attention)
    modules = recompute_modules(sc.parallel.recompute)
    again = fwd_of(lambda op: _recomputed(op, modules))
    graphs = sc.parallel.cuda_graphs
    if graphs == "full":
        return fwd, bwd, attn_fwd, again
    eager = lambda op: graphs == "none" or not (op.core_attention or op.name.startswith(ATTENTION_GRAPH_SCOPE))
    launches = lambda sel: sum(op.kernels * op.count for op in ops if sel(op) and eager(op))
    after = lambda op: op.name.startswith(AFTER_DISPATCH_SYNC)
    before = lambda op: not after(op)
    split = host_bound(fwd_of(before), launches(before)) + host_bound(fwd_of(after), launches(after))
    whole = host_bound(fwd, launches(lambda op: True))
    return (np.where(synced, split, whole), host_bound(bwd, 2 * launches(lambda op: True)), attn_fwd,
            host_bound(again, launches(lambda op: _recomputed(op, modules))))


# The operators Transformer Engine's per-layer CUDA graphs capture under Megatron-Core's scope for dropless MoE
# (--cuda-graph-modules attn moe_router moe_preprocess; megatron/core/transformer/moe/README.md, "CPU Overhead
# Bottleneck"): the attention block and the router; the pre-MLP norm, the MLP or the experts and the token
# dispatch run eagerly (dynamic shapes); every core-attention op (op.core_attention) is in the scope too
ATTENTION_GRAPH_SCOPE = ("attn_", "qkv_proj", "q_", "kv_", "attention", "out_proj", "router")
# The operators of a MoE layer that Megatron-Core's dropless all-to-all dispatcher launches only after its one
# blocking device-to-host sync of a forward (the token counts the all-to-all's split sizes and the grouped
# GEMM need: before the expert-parallel all-to-all, or before the layer's end without ep or expert tp;
# MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize, megatron/core/transformer/moe/token_dispatcher.py,
# NVIDIA/Megatron-LM d98e8a6; none with drop-and-pad); the backward reuses the sizes on the host and never waits
AFTER_DISPATCH_SYNC = ("experts_", "unpermute", "shared_", "mlp_residual")


def host_bound(gpu_s, launches):
    """Wall time of a pass of ``launches`` kernels launched one by one from PyTorch eager that keep the GPU
    busy for ``gpu_s``: the host enqueues ahead of the GPU while it can, so the pass takes the longer of the
    two, the GPU's time or the launches' (``EAGER_LAUNCH_S`` each; a backward launches two kernels per
    forward one, the input and the weight gradient). Between passes nothing waits: the host runs ahead."""
    return np.maximum(gpu_s, launches * cal.EAGER_LAUNCH_S)


def layer_operators(sc: Scenario, b, tp, cp, ep, etp=None) -> tuple[list[Op], list[Op]]:
    """(dense-layer ops, MoE-layer ops) of one microbatch of ``b`` sequences on one device, as the step
    time counts them (the same list for both when the model has no MoE layers)."""
    m, w, p = sc.model, sc.workload, sc.parallel
    s, seqpar, fl = w.seq_len, p.sequence_parallel, p.flash_attention
    dense = layer_ops(m, b, s, tp, cp, seqpar, w.precision, False, ep, flash=fl)
    return dense, (layer_ops(m, b, s, tp, cp, seqpar, w.precision, True, ep, flash=fl, expert_tp=etp,
                             gemm_per_expert=True, moe_dispatch=p.moe_dispatch,
                             expert_rate=expert_gemm_rate(p, sc.accelerator))
                   if m.moe else dense)


@dataclass(frozen=True)
class LayerTimes:
    """Per-microbatch compute times (s) on one device, arrays over a sweep's rows: a layer (dense and MoE
    layers mixed by their share), its core attention and the part the recompute setting runs again (all
    forward), the output layer and the embedding, a MoE layer and its shared experts alone, and the GEMM
    windows the tensor-parallel collectives hide under (``tensor_parallel.overlap_windows``: attention
    column GEMMs, MLP column GEMMs, all GEMMs; of a dense and of a MoE layer)."""

    forward_s: np.ndarray
    backward_s: np.ndarray
    attention_s: np.ndarray
    recompute_s: np.ndarray
    head_forward_s: np.ndarray
    head_backward_s: np.ndarray
    embedding_forward_s: np.ndarray
    embedding_backward_s: np.ndarray
    moe_forward_s: np.ndarray
    moe_backward_s: np.ndarray
    shared_forward_s: np.ndarray
    shared_backward_s: np.ndarray
    dense_windows_s: tuple[np.ndarray, np.ndarray, np.ndarray]
    moe_windows_s: tuple[np.ndarray, np.ndarray, np.ndarray]


def layer_times(sc: Scenario, b, tp, cp, ep, etp) -> LayerTimes:
    """``LayerTimes`` of every row (arrays of microbatch size, tp, cp, ep and expert tp), each distinct
    row computed once (``columns.on_distinct``) and broadcast back."""
    flat = on_distinct(lambda *k: _flat(_layer_times(sc, *k)), b, tp, cp, ep, etp)
    windows = {k: tuple(flat.pop(f"{k}{i}") for i in range(3)) for k in ("dense_windows_s", "moe_windows_s")}
    return LayerTimes(**flat, **windows)


def _flat(t: LayerTimes) -> dict:
    """The fields of ``t`` with each window as a field of its own (``on_distinct`` broadcasts arrays)."""
    out = {f.name: getattr(t, f.name) for f in fields(t) if not f.name.endswith("windows_s")}
    for k in ("dense_windows_s", "moe_windows_s"):
        out.update({f"{k}{i}": x for i, x in enumerate(getattr(t, k))})
    return out


def _layer_times(sc: Scenario, b, tp, cp, ep, etp) -> LayerTimes:
    m, w = sc.model, sc.workload
    s = w.seq_len
    dense_frac = 1 - m.moe_layer_share
    dense, moe = layer_operators(sc, b, tp, cp, ep, etp)
    # a dropless MoE layer waits once a forward for its token counts (whatever its ep and tp: with neither,
    # before its grouped GEMM); dropping to a capacity with padding never waits
    synced = m.moe is not None and sc.parallel.moe_dispatch == "permute" and m.moe.capacity_factor is None
    (f_d, b_d, a_d, r_d), (f_m, b_m, a_m, r_m) = _pass_time(dense, sc), _pass_time(moe, sc, synced)
    head_f, head_b, _, _ = _pass_time(head_ops(m, b, s, tp, cp, w.precision), sc)
    emb_f, emb_b, _, _ = _pass_time(embedding_ops(m, b, s, tp, cp), sc)
    mix = lambda d, x: dense_frac * d + (1 - dense_frac) * x
    shared_f, shared_b, _, _ = _pass_time([op for op in moe if op.name.startswith("shared_")], sc)
    return LayerTimes(
        forward_s=mix(f_d, f_m), backward_s=mix(b_d, b_m), attention_s=mix(a_d, a_m), recompute_s=mix(r_d, r_m),
        head_forward_s=head_f, head_backward_s=head_b, embedding_forward_s=emb_f, embedding_backward_s=emb_b,
        moe_forward_s=f_m, moe_backward_s=b_m, shared_forward_s=shared_f, shared_backward_s=shared_b,
        dense_windows_s=tuple(overlap_windows(dense, sc.accelerator, w.precision)),
        moe_windows_s=tuple(overlap_windows(moe, sc.accelerator, w.precision)))
