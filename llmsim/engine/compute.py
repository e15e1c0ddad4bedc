"""Per-operator FLOPs and HBM bytes of a transformer layer, and their roofline time on a device.

Counts follow Narayanan et al. 2021 (arXiv 2104.04473, sec. 5.1 / appendix) for the GEMMs and
Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4) for the tensors each operator reads and writes.
Every quantity is per device, per microbatch, forward pass; backward multiplies by ``bwd_ratio``.
All arithmetic works on Python numbers and numpy arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine import gemm_shape
from llmsim.engine.heads import kv_heads_per_rank, kv_width_per_rank, qk_dim, v_dim
from llmsim.engine.memory import moe_dispatch_factor, moe_row_factor
from llmsim.engine.rates import attention_flops_per_s, attention_rates, matmul_efficiency  # noqa: F401 - re-exported
from llmsim.engine.types import PRECISION_BITS, PRECISION_BYTES, Accelerator, Model, Parallel
from llmsim.engine.window import pair_fraction

ACT_BYTES = 2.0  # activations stay in 16-bit even in FP8 training (Transformer Engine keeps bf16 I/O)


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # gemm | attention | elementwise
    flops: float
    bytes: float
    min_dim: float = np.inf  # attention: query length per rank (short sequences idle the kernel's SMs)
    bwd_ratio: float = 2.0  # backward work / forward work (dgrad + wgrad = 2x for a GEMM)
    count: float = 1.0  # how many layers of this kind the op stands for
    core_attention: bool = False  # recomputed by selective recomputation (Korthikanti sec. 5)
    cast_elems: tuple = (0.0, 0.0)  # 16-bit GEMM input (forward) and output-gradient (backward) elements
    kernels: float = 1.0  # kernel launches per execution (a grouped GEMM run as one GEMM per expert)
    rate_scale: float = 1.0  # compute rate of its kernel over the device's own GEMMs (expert_gemm_rate)
    rows: float = 0.0  # GEMM: output rows (M) and columns (N) of one group; 0: no tile padding
    cols: float = 0.0
    depth: float = 0.0  # GEMM: the forward's reduction dimension (K); 0: unknown
    grouped: bool = False  # GEMM: the routed experts' grouped GEMM (its weight gradient reduces over each expert's rows)


def gemm(name: str, m, n, k, wbytes: float, count: float = 1.0) -> Op:
    """C[m,n] = A[m,k] B[k,n]: 2mnk FLOPs; reads A (activations) and B (weights), writes C."""
    flops = 2.0 * m * n * k
    nbytes = (m * k + m * n) * ACT_BYTES + k * n * wbytes
    return Op(name, "gemm", flops, nbytes, np.inf, 2.0, count, cast_elems=(m * k, m * n), rows=m, cols=n, depth=k)


def elementwise(name: str, elements, reads: float, writes: float, count: float = 1.0) -> Op:
    """A memory-bound op touching ``elements`` values ``reads`` + ``writes`` times."""
    return Op(name, "elementwise", 0.0 * elements, elements * (reads + writes) * ACT_BYTES,
              np.inf, 2.0, count)


def layer_ops(m: Model, b, s, tp, cp, sp: bool, precision: str, moe_layer: bool, ep=1,
              count: float = 1.0, flash: bool = True, touched_experts=None, expert_tp=None,
              gemm_per_expert: bool = False, moe_dispatch: str = "permute", expert_rate: float = 1.0,
              weights: str | None = None, experts: str | None = None) -> list[Op]:
    """Operators of one transformer layer for one microbatch of ``b`` sequences of ``s`` tokens.

    ``precision``: the GEMM inputs' (the tensor cores' math); ``weights`` and ``experts`` (default
    ``precision``): the stored weights of the attention and dense GEMMs and of the routed experts; narrower
    than ``precision`` they run weight-only (``weight_only``).

    ``touched_experts``: how many of a device's local experts receive tokens (their weights are read);
    None: all of them (training, prefill). ``expert_tp``: ranks splitting each expert (default tp).
    ``gemm_per_expert``: the grouped expert GEMM launches one kernel per local expert (Transformer Engine
    GroupedLinear in training) rather than one fused kernel (TensorRT-LLM, vLLM fused MoE).
    ``moe_dispatch``: routed rows gathered by index (``permute``), by GShard's one-hot einsums
    (``einsum``), or (``local``) by a serving engine whose tp group shares the tokens and splits the experts
    over ep ranks: each rank gathers and combines only the rows routed to its own experts. ``expert_rate``:
    the routed-expert GEMMs' compute rate over the device's own GEMMs (``expert_gemm_rate``)."""
    weights = weights or precision
    experts = experts or weights
    wb = PRECISION_BYTES[weights]
    h, a, d = m.hidden, m.heads, m.head_dim
    tokens = b * s / cp  # context parallelism splits the sequence
    norm_tokens = tokens / tp if sp else tokens  # sequence parallelism splits norms/residuals too
    ops: list[Op] = [elementwise("attn_norm", norm_tokens * h, 1, 1, count)]
    qk_w, v_w = qk_dim(m), v_dim(m)  # a query/key head's width, a value head's (engine/heads.py)
    kv_width = kv_width_per_rank(m, tp) * tp  # K and V of a token over the tp ranks, replicas counted
    if m.mla is not None:  # DeepSeek-V2 sec. 2.1: down-projections replicated, up-projections split
        r = m.mla
        q_width = a * qk_w / tp
        ops += ([gemm("q_down", tokens, r.q_lora_rank, h, wb, count),
                 gemm("q_up", tokens, q_width, r.q_lora_rank, wb, count)] if r.q_lora_rank
                else [gemm("q_proj", tokens, q_width, h, wb, count)])
        ops += [
                gemm("kv_down", tokens, r.kv_lora_rank + r.qk_rope_head_dim, h, wb, count),
                gemm("kv_up", tokens, kv_width_per_rank(m, tp), r.kv_lora_rank, wb, count)]
    else:
        kv_local = kv_heads_per_rank(m, tp)  # fewer KV heads than tp: replicated (Megatron GQA)
        ops.append(gemm("qkv_proj", tokens, (a / tp + 2 * kv_local) * d, h, wb, count))
    if flash:
        # FlashAttention (Dao et al. 2022): fused tiles, no s x s matrix in HBM. Causal masking skips half
        # of the score tiles; with CP the load-balanced split gives each rank 1/cp of the work.
        att_flops = 2.0 * b * s * s * (a / tp) * (qk_w + v_w) * 0.5 / cp
        if m.attention_window is not None:  # the band's tiles only (engine/window.py)
            att_flops = att_flops * pair_fraction(m, s)
        att_bytes = tokens * ((a / tp) * (qk_w + v_w) + kv_width / tp * cp) * ACT_BYTES
        # min_dim carries the query length per rank: short sequences leave the fused kernel's SMs idle
        ops.append(Op("attention", "attention", att_flops, att_bytes, s / cp,
                      cal.FLASH_BWD_FLOPS_RATIO, count, True))
    else:
        # Unfused attention (Megatron-LM 2021-22): batched QK^T over the full s x s (the mask is applied
        # afterwards), a fused scale-mask-softmax reading and writing the scores, then scores x V.
        heads = b * (a / tp)
        q_len = s / cp
        scores = gemm("attn_scores", q_len, s, qk_w, ACT_BYTES, count)
        values = gemm("attn_values", q_len, v_w, s, ACT_BYTES, count)
        ops += [replace(o, flops=o.flops * heads, bytes=o.bytes * heads, count=count, core_attention=True)
                for o in (scores, values)]
        ops.append(Op("softmax", "elementwise", 0.0, heads * q_len * s * 2 * ACT_BYTES, np.inf, 2.0, count,
                      True))
        if m.dropout:  # dropout on the probabilities: read, write, and a 1-byte mask
            ops.append(Op("attn_dropout", "elementwise", 0.0, heads * q_len * s * 2.5 * ACT_BYTES, np.inf, 2.0,
                          count, True))
    ops.append(gemm("out_proj", tokens, h, a * v_w / tp, wb, count))
    drop = 0.5 if m.dropout else 0.0  # fused bias-dropout-add also writes a 1-byte mask
    ops.append(elementwise("attn_residual", norm_tokens * h, 2, 1 + drop, count))
    ops.append(elementwise("mlp_norm", norm_tokens * h, 1, 1, count))
    up = 2 if m.gated else 1
    if moe_layer and m.moe is not None:
        moe = m.moe
        # Top-k routing: each device's experts process tokens * top_k rows in total (balanced
        # all-to-all), times the busiest expert's max/mean load (dropless) or padded to the capacity
        # factor (token dropping: the grouped GEMM runs on the padded rows), as memory.moe_row_factor.
        rows = tokens * moe.top_k * moe_row_factor(m)
        # routed rows pooled from the ep ranks' tokens; a tp group shares its tokens, so with etp ranks per
        # expert an expert sees the tokens of ep x etp / tp tp-groups (etp = tp: ep; inference with the
        # experts over the tp ranks, etp = tp / ep: 1; training folded over tp x cp x dp: ep x etp / tp)
        pooled = ep if expert_tp is None else np.where(expert_tp == tp, ep, ep * expert_tp / tp)
        per_expert_rows = rows * pooled / moe.experts
        f = moe.expert_ffn_hidden
        etp = tp if expert_tp is None else expert_tp
        ops.append(gemm("router", tokens, moe.experts, h, wb, count))
        # router softmax and top-k over fp32 logits (read, write the probabilities, read them again)
        ops.append(elementwise("router_topk", tokens * moe.experts, 4, 2, count))
        # token permutation: routed rows gathered into expert order before the dispatch and scattered
        # back (weighted by the router probabilities) after the combine; with ep > 1 the received chunks
        # are sorted by local expert and unsorted once more (Megatron-Core MoEAlltoAllTokenDispatcher:
        # permute, sort_chunks_by_idxs, unpermute). Backward moves the same bytes the other way.
        routed = tokens * moe.top_k * moe_dispatch_factor(m)
        if moe_dispatch == "einsum":
            # GShard dispatch and combine as dense einsums with one-hot [tokens, experts, capacity] masks
            # per sequence (Lepikhin et al. 2020, arXiv 2006.16668, algorithm 2; MaxText moe.py
            # dense_matmul, "BSM,BSEC->EBCM"): 2 x tokens x (experts x capacity) x hidden FLOPs each, with
            # experts x capacity = seq x top_k x capacity factor; backward: the input gradient (dispatch),
            # input and weight gradients (combine)
            group = s / cp
            slots = group * moe.top_k * moe_row_factor(m)
            for name, bwd in (("moe_dispatch", 1.0), ("moe_combine", 2.0)):
                g = gemm(name, slots, h, group, ACT_BYTES, count)
                ops.append(replace(g, flops=g.flops * b, bytes=g.bytes * b, bwd_ratio=bwd))
        else:
            passes = np.where(ep > 1, 2.0, 1.0)
            if moe_dispatch == "local":
                # TensorRT-LLM runMoe with ep > 1: expandInputRows and finalizeMoeRouting stop at the rows
                # of the node's experts (num_valid_tokens_ptr), a tp/etp share of them; no all-to-all, so
                # no second sort (cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu)
                routed, passes = routed * etp / tp, 1.0
            ops += [Op("permute", "elementwise", 0.0, passes * routed * h * 2 * ACT_BYTES, np.inf, 1.0, count),
                    Op("unpermute", "elementwise", 0.0, passes * (routed + tokens) * h * ACT_BYTES, np.inf, 1.0,
                       count)]
        grouped = (moe.experts / ep)  # grouped GEMM over the local experts
        touched = grouped if touched_experts is None else touched_experts
        # the grouped GEMM's tiles cover the experts that receive rows, rows_each apiece (an expert without
        # rows costs no tile); the same FLOPs and activation bytes as per_expert_rows on every local expert
        rows_each = per_expert_rows if touched_experts is None else per_expert_rows * grouped / np.maximum(
            touched, 1e-300)
        ewb = PRECISION_BYTES[experts]
        up_op = gemm("experts_up", rows_each, up * f / etp, h, ewb, count)
        down_op = gemm("experts_down", rows_each, h, f / etp, ewb, count)
        kernels = grouped if gemm_per_expert else 1.0
        rate = expert_rate * weight_only(experts, precision)
        ops += [_scale(up_op, touched, kernels, rate),
                elementwise("experts_act", rows * f / tp, up, 1, count),
                _scale(down_op, touched, kernels, rate)]
        if moe.shared_experts:
            fs = f * moe.shared_experts
            ops += [gemm("shared_up", tokens, up * fs / tp, h, wb, count),
                    elementwise("shared_act", tokens * fs / tp, up, 1, count),
                    gemm("shared_down", tokens, h, fs / tp, wb, count)]
    else:
        f = m.ffn_hidden
        ops += [gemm("mlp_up", tokens, up * f / tp, h, wb, count),
                elementwise("mlp_act", tokens * f / tp, up, 1, count),
                gemm("mlp_down", tokens, h, f / tp, wb, count)]
    ops.append(elementwise("mlp_residual", norm_tokens * h, 2, 1 + drop, count))
    dense_rate = weight_only(weights, precision)
    if dense_rate != 1.0:
        ops = [replace(op, rate_scale=dense_rate) if op.kind == "gemm" and not op.core_attention
               and not op.name.startswith(("experts_", "moe_")) else op for op in ops]
    return ops + low_precision_casts(ops, precision)


# Weight-only GEMMs (W4A16, W8A16) dequantise each weight tile in registers before the 16-bit MMA (Marlin,
# Frantar et al. 2024, arXiv 2408.11743; vLLM's Marlin and MXFP4 kernels on Hopper): memory-bound they
# read the narrow weights at the full bandwidth (within 5% of the ideal 3.87x up to batch 32, sec. 5,
# fig. 9); compute-bound the dequantisation costs tensor-core time, large-batch prefill about 10% slower
# than the 16-bit GEMM (sec. 5, end-to-end prefill). Their compute rate: this fraction of the 16-bit one.
WEIGHT_ONLY_RATE = 0.9


def weight_only(weights: str, precision: str) -> float:
    """Compute rate of a GEMM with ``weights`` stored narrower than its ``precision`` inputs, over the
    same GEMM with both at ``precision`` (1 when they are equal)."""
    return WEIGHT_ONLY_RATE if PRECISION_BITS[weights] < PRECISION_BITS[precision] else 1.0


def _scale(op: Op, times, kernels, rate: float) -> Op:
    """``times`` identical GEMMs (a grouped GEMM over the local experts that receive rows, each reading its
    own weights), launched as ``kernels`` kernels at ``rate`` of the device's GEMM rate."""
    nbytes = op.bytes * times
    # Transformer Engine's GroupedLinear (Megatron-Core --moe-grouped-gemm) issues one cuBLAS GEMM per
    # local expert over several streams (te_general_grouped_gemm): each pays a kernel's fixed cost
    return replace(op, flops=op.flops * times, bytes=nbytes, cast_elems=tuple(e * times for e in op.cast_elems),
                   kernels=kernels, rate_scale=rate, grouped=True)


def expert_gemm_rate(p: Parallel, acc: Accelerator) -> float:
    """The routed-expert GEMMs' compute rate over the device's own GEMMs: the preset's measured
    ``sm80_matmul_fraction`` where the engine runs Ampere-generation kernels (``parallel.moe_gemm_kernel``
    sm80; the spec refuses it on an accelerator without the measurement), else 1."""
    return acc.sm80_matmul_fraction if p.moe_gemm_kernel == "sm80" and acc.sm80_matmul_fraction else 1.0


def low_precision_casts(ops: list[Op], precision: str) -> list[Op]:
    """Quantisation kernels of FP8/FP4 GEMMs (Transformer Engine ``cast_transpose``): each 16-bit GEMM
    input is read once and written in low precision twice (row- and column-major, the latter for the
    weight-gradient GEMM), and so is each output gradient in the backward. Weight casts are cached across
    microbatches (TE ``is_first_microbatch``) and left out."""
    wb = PRECISION_BYTES[precision]
    if wb >= ACT_BYTES:
        return []
    per_elem = ACT_BYTES + 2 * wb
    return [Op(f"{op.name}_cast", "elementwise", 0.0, op.cast_elems[0] * per_elem, np.inf,
               op.cast_elems[1] / op.cast_elems[0], op.count)
            for op in ops if op.kind == "gemm" and not op.core_attention
            and op.name not in ("router", "moe_dispatch", "moe_combine")]


# The kernel that writes each 16-bit GEMM input, where a serving engine quantises it for an FP8/FP4 GEMM
# (vLLM fuse_norm_quant and fuse_act_quant, on by default from -O2 in vLLM 0.12, vllm/config/vllm.py
# OPTIMIZATION_LEVEL_02; TensorRT-LLM's fused RMSNorm-quant and SwiGLU-quant kernels). Inputs written by
# another kernel (the attention output, permuted MoE rows, MLA's inner norms) get a quantisation kernel
# of their own.
QUANT_PRODUCER = {"qkv_proj": "attn_norm", "q_proj": "attn_norm", "q_down": "attn_norm", "kv_down": "attn_norm",
                  "mlp_up": "mlp_norm", "shared_up": "mlp_norm", "mlp_down": "mlp_act",
                  "experts_down": "experts_act", "shared_down": "shared_act"}
# each RMSNorm and the residual add before it run as one kernel in serving engines (vLLM fused_add_rms_norm,
# csrc/layernorm_kernels.cu; SGLang/FlashInfer fused_add_rmsnorm; TensorRT-LLM residual + RMSNorm)
RESIDUAL_BEFORE = {"mlp_norm": "attn_residual", "attn_norm": "mlp_residual"}  # a layer's last add, the next's norm


def engine_ops(ops: list[Op], precision: str, fused_quant: bool = True) -> list[Op]:
    """A serving engine's kernels for one layer's training-shaped ``ops`` (``layer_ops``): no Transformer
    Engine casts (which also write the column-major copy only a backward reads); each GEMM input quantised
    by the kernel that writes it (``QUANT_PRODUCER``: it writes ``w`` bytes an element instead of 2) or by
    one kernel of its own (read 2 bytes, write ``w``; every GEMM's without ``fused_quant``); each residual
    add fused into the RMSNorm after it (one kernel reads the sum's inputs, writes the residual and the
    normalised copy: one read fewer)."""
    wb = PRECISION_BYTES[precision]
    by = {op.name: op for op in ops}
    saved: dict[str, float] = {}
    quant: list[Op] = []
    for op in ops:
        if wb >= ACT_BYTES or op.kind != "gemm" or op.core_attention or op.name in ("router", "moe_dispatch",
                                                                                       "moe_combine"):
            continue
        producer = QUANT_PRODUCER.get(op.name) if fused_quant else None
        if producer in by:  # one quantised output however many GEMMs read it
            saved[producer] = op.cast_elems[0] * (ACT_BYTES - wb)
        else:
            quant.append(Op(f"{op.name}_quant", "elementwise", 0.0, op.cast_elems[0] * (ACT_BYTES + wb), np.inf,
                            1.0, op.count))
    out = []
    for op in ops:
        if op.name.endswith("_cast") or op.name in RESIDUAL_BEFORE.values():
            continue
        nbytes = op.bytes - saved.get(op.name, 0.0)
        add = by.get(RESIDUAL_BEFORE.get(op.name, ""))
        if add is not None:  # the norm reads the sum from registers, not HBM: half its 16-bit traffic
            out.append(Op(f"residual_{op.name}", op.kind, op.flops, nbytes + add.bytes - op.bytes / 2, op.min_dim,
                          op.bwd_ratio, op.count))
        else:
            out.append(replace(op, bytes=nbytes))
    return out + quant


def head_ops(m: Model, b, s, tp, cp, precision: str) -> list[Op]:
    """Final norm, output projection (logits) and the cross-entropy loss of the last stage."""
    tokens = b * s / cp
    wb = PRECISION_BYTES[precision]
    return [elementwise("final_norm", tokens * m.hidden, 1, 1),
            gemm("logits", tokens, m.vocab / tp, m.hidden, wb),
            # fp32 logits: softmax reads and writes them (Megatron's fused vocab-parallel cross-entropy)
            elementwise("loss", tokens * m.vocab / tp, 2 * 2, 2 * 1)]


def embedding_ops(m: Model, b, s, tp, cp) -> list[Op]:
    """Token-embedding lookup of the first stage: a gather of ``tokens`` rows."""
    return [elementwise("embedding", b * s / cp * m.hidden, 1, 1)]


def op_time(op: Op, acc: Accelerator, precision: str, hbm_bw=None, peak_scale=1.0, backward: bool = False,
            kernel: str = "auto"):
    """Roofline time of one forward execution of ``op`` (of its backward work at the forward's size when
    ``backward``; multiply by ``op.bwd_ratio`` for the backward time): max(compute, memory) for attention
    and memory-bound kernels; for a GEMM, its tile-padded compute time blended with its memory time
    (engine/gemm_shape.py), without the kernel's fixed time (``kernel_time`` adds it).

    Fused attention runs in 16-bit at the rates of its ``kernel``; GEMMs at the workload precision.
    """
    t_compute, t_memory = _compute_memory(op, acc, precision, hbm_bw, peak_scale, backward, kernel)
    if op.kind == "gemm":
        return gemm_shape.blend(t_compute, t_memory)
    return np.maximum(t_compute, t_memory)


def _compute_memory(op: Op, acc: Accelerator, precision: str, hbm_bw=None, peak_scale=1.0,
                    backward: bool = False, kernel: str = "auto"):
    """(compute time, memory time) of one forward execution of ``op``, each alone."""
    bw = (acc.hbm_bw_bytes_per_s if hbm_bw is None else hbm_bw) * cal.HBM_EFFICIENCY
    if op.kind == "attention":
        t_compute = op.flops / (attention_flops_per_s(acc, op.min_dim, backward, kernel) * peak_scale)
    elif op.kind == "gemm":
        rate = acc.peak(precision) * peak_scale * op.rate_scale * matmul_efficiency(acc, precision)
        t_compute = op.flops * gemm_shape.tile_factor(op.rows, op.cols) / rate
    else:
        t_compute = 0.0 * op.flops
    return t_compute, op.bytes / bw


def kernel_time(op: Op, acc: Accelerator, precision: str, kernel: str = "auto", backward: bool = False,
                inference: bool = False):
    """Wall time of one execution of ``op``: its roofline time plus the fixed cost of each kernel
    (``KERNEL_OVERHEAD_S`` in a training step, ``INFERENCE_KERNEL_OVERHEAD_S`` in a serving engine's
    captured graph; a GEMM kernel's own ``GEMM_FIXED_S`` besides). Forward is one kernel; backward two
    (input gradient and weight gradient, ``_backward_time``)."""
    fixed = cal.GEMM_FIXED_S if op.kind == "gemm" else 0.0
    if backward:
        return _backward_time(op, acc, precision, kernel) + 2 * op.kernels * (cal.KERNEL_OVERHEAD_S + fixed)
    per_kernel = cal.INFERENCE_KERNEL_OVERHEAD_S if inference else cal.KERNEL_OVERHEAD_S
    return op_time(op, acc, precision, kernel=kernel) + op.kernels * (per_kernel + fixed)


def _backward_time(op: Op, acc: Accelerator, precision: str, kernel: str):
    """Roofline time of ``op``'s backward: for a GEMM Y[M,N] = X[M,K] W[N,K]^T, the input gradient (tiles M x K)
    and the weight gradient (tiles N x K; a grouped expert GEMM's reduces over few rows: ``wgrad_depth_factor``),
    each of the forward's FLOPs and bytes (engine/gemm_shape.py); other ops: ``bwd_ratio`` x the forward."""
    if op.kind != "gemm" or op.bwd_ratio != 2.0 or not np.all(np.asarray(op.depth) > 0):
        return op_time(op, acc, precision, backward=True, kernel=kernel) * op.bwd_ratio
    t_compute, t_memory = _compute_memory(op, acc, precision, backward=True, kernel=kernel)
    unpadded = t_compute / gemm_shape.tile_factor(op.rows, op.cols)
    dgrad = gemm_shape.blend(unpadded * gemm_shape.tile_factor(op.rows, op.depth), t_memory)
    depth = gemm_shape.wgrad_depth_factor(op.rows) if op.grouped else 1.0
    wgrad = gemm_shape.blend(unpadded * gemm_shape.tile_factor(op.cols, op.depth) * depth, t_memory)
    return dgrad + wgrad


def bound(op: Op, acc: Accelerator, precision: str) -> str:
    """Which roof limits the op: 'compute' or 'memory' (the longer of the two times alone)."""
    t_compute, t_memory = _compute_memory(op, acc, precision)
    return "memory" if np.all(t_compute <= t_memory * (1 + 1e-12)) else "compute"
