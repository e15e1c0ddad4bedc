"""Training step time, throughput, MFU and memory for a 5D-parallel split.

Step time (per optimizer step, the slowest pipeline stage sets the pace):
  m * (forward + backward + recomputation + exposed TP/CP/EP communication + pipeline send/recv)
  + pipeline bubble ((p - 1) / v microbatch slots, Narayanan et al. 2021 eq. 2)
  + exposed data-parallel communication (gradient reduce overlapped with the last backward)
  + optimizer step (memory-bound over the local shard) + fixed per-step overhead.
"""

from __future__ import annotations

from llmsim.engine import calibration as cal
from llmsim.engine.collectives import collective, collective_time
from llmsim.engine.compute import ACT_BYTES, Op, embedding_ops, head_ops, layer_ops, op_time
from llmsim.engine.memory import (
    activation_bytes_per_layer,
    head_activation_bytes,
    inflight_microbatches,
    state_bytes,
    with_runtime_reserve,
)
from llmsim.engine.params import local_params, param_counts
from llmsim.engine.split import resolve_split
from llmsim.engine.tensor_parallel import layer_tp_comm
from llmsim.engine.topology import group_path, neighbour_path, path_of, strides
from llmsim.values import Scenario

# HBM traffic of one mixed-precision Adam step per local parameter, with fp32 main gradients as
# Megatron-LM / NeMo accumulate them (--accumulate-allreduce-grads-in-fp32): gradient norm for clipping
# reads the grad (4); Adam reads grad, master, m, v (16) and writes master, m, v (12); the master is
# copied to the 16-bit model weight (read 4, write 2); the grad buffer is zeroed (write 4).
ADAM_BYTES_PER_PARAM = 4.0 + 16.0 + 12.0 + 6.0 + 4.0


def model_flops_per_token(sc: Scenario) -> float:
    """PaLM convention (Chowdhery et al. 2022, app. B): 6*N + 12*L*H*Q*T FLOPs per token for forward and
    backward without recomputation; N = active parameters without the input embedding (the output
    projection counts), attention counted without causal masking."""
    m, counts = sc.model, param_counts(sc.model)
    n = counts.active - m.vocab * m.hidden * (0 if m.tied_embeddings else 1)
    qk = m.head_dim + (m.mla.qk_rope_head_dim if m.mla else 0)
    v = m.mla.v_head_dim if m.mla else m.head_dim
    return 6.0 * n + 6.0 * m.layers * sc.workload.seq_len * m.heads * (qk + v)


def _pass_time(ops: list[Op], sc: Scenario):
    acc, prec, kern = sc.accelerator, sc.workload.precision, sc.parallel.attention_kernel
    k = cal.KERNEL_OVERHEAD_S  # one kernel per op forward, two (input and weight gradient) backward
    fwd = sum((op_time(op, acc, prec, kernel=kern) + k) * op.count for op in ops)
    bwd = sum((op_time(op, acc, prec, backward=True, kernel=kern) * op.bwd_ratio + 2 * k) * op.count
              for op in ops)
    attn_fwd = sum((op_time(op, acc, prec, kernel=kern) + k) * op.count for op in ops if op.core_attention)
    return fwd, bwd, attn_fwd


def _algorithms(net, order, deg, tok_bytes, seqpar, grad_bytes, zero, dp, dp_path, tp_path) -> dict:
    """Which algorithm and tiers the tuner picks for the main collective of each parallel dimension."""
    def name(op, nbytes, path):
        r = collective(op, nbytes, path)
        return f"{op} {r.algorithm}/{r.protocol} on {r.tiers}" if path.ranks > 1 else None

    return {
        "tp_collective": name("reduce_scatter" if seqpar else "all_reduce", tok_bytes, tp_path),
        "dp_collective": name("all_reduce" if zero == 0 else "reduce_scatter", grad_bytes, dp_path.resized(dp)),
        "ep_collective": name("all_to_all", tok_bytes, group_path(net, order, deg, "ep")),
        "pp_collective": name("p2p", tok_bytes, neighbour_path(net, order, deg, "pp")),
    }


def estimate_training(sc: Scenario) -> dict:
    """All output columns of one training design point (contract in DESIGN.md)."""
    sp = resolve_split(sc)
    m, w, p, acc, net = sc.model, sc.workload, sc.parallel, sc.accelerator, sc.network
    b, s, tp, cp, ep = sp.microbatch_size, w.seq_len, sp.tp, sp.cp, sp.ep
    seqpar = p.sequence_parallel and tp > 1
    moe_layers = (m.layers - m.moe.first_dense_layers) if m.moe else 0
    dense_frac = 1 - moe_layers / m.layers

    # --- compute of the fullest stage, per microbatch -------------------------------------------
    fl = p.flash_attention
    dense = layer_ops(m, b, s, tp, cp, seqpar, w.precision, False, ep, flash=fl)
    moe = layer_ops(m, b, s, tp, cp, seqpar, w.precision, True, ep, flash=fl) if m.moe else dense
    f_d, b_d, a_d = _pass_time(dense, sc)
    f_m, b_m, a_m = _pass_time(moe, sc)
    lay_f = dense_frac * f_d + (1 - dense_frac) * f_m
    lay_b = dense_frac * b_d + (1 - dense_frac) * b_m
    lay_attn = dense_frac * a_d + (1 - dense_frac) * a_m
    head_f, head_b, _ = _pass_time(head_ops(m, b, s, tp, cp, w.precision), sc)
    emb_f, emb_b, _ = _pass_time(embedding_ops(m, b, s, tp, cp), sc)
    n_last = m.layers - (sp.pp - 1) * sp.layers_per_stage if sp.pp > 1 else m.layers
    stage_layers = sp.layers_per_stage
    # the last stage also runs the output layer; it sets the pace if that makes it the fullest
    last_extra = head_f + head_b - (stage_layers - n_last) * (lay_f + lay_b)
    extra_f, extra_b = (head_f, head_b) if last_extra > 0 else (0.0, 0.0)
    if sp.pp == 1:
        extra_f, extra_b = head_f + emb_f, head_b + emb_b
    recompute_per_layer = {"none": 0.0, "selective": lay_attn, "full": lay_f}[p.recompute]

    # --- communication per microbatch on the stage ----------------------------------------------
    deg = sp.degrees
    tok_bytes = b * s / cp * m.hidden * ACT_BYTES  # one full activation tensor of the microbatch
    tp_link = group_path(net, p.order, deg, "tp")
    tpc_d = layer_tp_comm(dense, tok_bytes, tp, seqpar, tp_link, acc, w.precision, p.tp_comm_overlap)
    tpc_m = layer_tp_comm(moe, tok_bytes, tp, seqpar, tp_link, acc, w.precision, p.tp_comm_overlap)
    tp_fwd = stage_layers * (dense_frac * tpc_d.forward_s + (1 - dense_frac) * tpc_m.forward_s)
    tp_bwd = stage_layers * (dense_frac * tpc_d.backward_s + (1 - dense_frac) * tpc_m.backward_s)
    # full recomputation runs each layer's forward again, collectives included
    tp_comm = tp_fwd * (2 if p.recompute == "full" else 1) + tp_bwd

    cp_link = neighbour_path(net, p.order, deg, "cp")
    kv_width = (m.heads * (m.head_dim + m.mla.v_head_dim) if m.mla else 2 * m.kv_heads * m.head_dim) / tp
    cp_bytes = b * s / cp * kv_width * ACT_BYTES  # K and V of this rank's chunk, passed around the ring
    cp_ring = (cp - 1) * collective_time("p2p", cp_bytes, 2, cp_link) if cp > 1 else 0.0
    # ring exchange overlaps attention (Liu et al. 2023 Ring Attention); backward sends dK, dV as well
    cp_fwd = stage_layers * max(0.0, cp_ring - lay_attn)
    cp_comm = cp_fwd + stage_layers * max(0.0, 2 * cp_ring - cal.FLASH_BWD_FLOPS_RATIO * lay_attn)

    ep_comm = 0.0
    if m.moe and ep > 1:
        ep_link = group_path(net, p.order, deg, "ep")
        a2a_bytes = b * s / cp * m.moe.top_k * m.hidden * ACT_BYTES / (tp if seqpar else 1)
        # dispatch + combine forward, the same backward (Lepikhin et al. 2020, GShard)
        ep_comm = 4 * collective_time("all_to_all", a2a_bytes, ep, ep_link) * stage_layers * (1 - dense_frac)

    pp_comm = 0.0
    if sp.pp > 1:
        pp_link = neighbour_path(net, p.order, deg, "pp")
        # scatter/gather optimisation (Narayanan et al. 2021 sec. 4.1): each tp rank sends 1/tp of the
        # activation; without SP the receivers all-gather it over the tp group's link
        p2p = collective_time("p2p", tok_bytes / tp, 2, pp_link)
        if not seqpar:
            p2p = p2p + collective_time("all_gather", tok_bytes, tp, tp_link)
        # a microbatch crosses v stage boundaries per device with interleaving (Narayanan sec. 2.2.2)
        pp_comm = 2 * sp.virtual_stages * p2p

    per_mb_compute = stage_layers * (lay_f + lay_b + recompute_per_layer) + extra_f + extra_b
    per_mb = per_mb_compute + tp_comm + cp_comm + ep_comm + pp_comm
    mbs, v = sp.microbatches, sp.virtual_stages
    pipeline_time = mbs * per_mb
    bubble = (sp.pp - 1) / v * per_mb  # 1F1B: (p-1) slots; interleaved: (p-1)/v

    # --- parameters, data parallelism, optimizer -------------------------------------------------
    local_dense, local_expert = local_params(m, stage_layers, sp.pp, tp, ep)
    local_total = local_dense + local_expert
    # context-parallel ranks hold the same weights: gradients are reduced, and ZeRO shards, over dp * cp
    # (Megatron-Core's data-parallel group "with context parallel")
    dp, z = sp.dp * cp, p.zero_stage
    st = strides(p.order, deg)
    dp_link = path_of(net, min(st["dp"], st["cp"] if cp > 1 else st["dp"]), dp)
    grad_bytes = 2.0  # 16-bit gradients (ZeRO paper accounting, memory.py)
    # FSDP / ZeRO-3 issues one collective per wrapped layer (Zhao et al. 2023, PyTorch FSDP sec. 3.2), so
    # each pays its own latency; ZeRO-0/1/2 reduce the gradients in a few large buckets
    units = stage_layers if z >= 3 else 1

    def sync(op: str) -> float:
        if dp <= 1:
            return 0.0
        return units * (collective_time(op, local_dense * grad_bytes / units, dp, dp_link)
                        + collective_time(op, local_expert * grad_bytes / units, dp // ep, dp_link))

    if z == 0:
        grad_sync, param_sync = sync("all_reduce"), 0.0
    else:  # distributed optimizer / ZeRO: reduce-scatter gradients, all-gather updated weights
        grad_sync, param_sync = sync("reduce_scatter"), sync("all_gather")
    # overlap windows: a microbatch's forward and backward wall time, their own exposed comm included
    fwd_comm = tp_fwd + cp_fwd + ep_comm / 2 + pp_comm / 2
    mb_fwd = stage_layers * lay_f + extra_f + fwd_comm
    mb_bwd = per_mb - mb_fwd
    if z >= 3 and dp > 1:
        # FSDP / ZeRO-3: every microbatch gathers weights for forward and again for backward and
        # reduce-scatters gradients, prefetched under compute (Zhao et al. 2023, PyTorch FSDP sec. 3.3)
        exposed_dp = mbs * (max(0.0, param_sync - mb_fwd) + max(0.0, param_sync + grad_sync - mb_bwd))
    else:  # gradient reduce overlaps the last microbatch's backward; weight gather the next forward
        exposed_dp = max(0.0, grad_sync - mb_bwd) + max(0.0, param_sync - mb_fwd)

    opt_params = local_total / (dp if z >= 1 else 1)
    optimizer = opt_params * ADAM_BYTES_PER_PARAM / (acc.hbm_bw_bytes_per_s * cal.HBM_EFFICIENCY)
    step = pipeline_time + bubble + exposed_dp + optimizer + cal.STEP_OVERHEAD_S

    # --- memory of the busiest device (first stage of the pipeline) -------------------------------
    dense_states, expert_states = state_bytes(local_dense, dp, z), state_bytes(local_expert, dp // ep, z)
    states = dense_states.total + expert_states.total
    drop = m.dropout > 0
    act_dense = activation_bytes_per_layer(m, b, s, tp, cp, seqpar, p.recompute, fl, drop, moe_layer=False, ep=ep)
    act_moe = activation_bytes_per_layer(m, b, s, tp, cp, seqpar, p.recompute, fl, drop, moe_layer=True, ep=ep)
    act_layer = dense_frac * act_dense + (1 - dense_frac) * act_moe
    inflight = inflight_microbatches(sp.pp, mbs, v)
    activations = stage_layers * act_layer * inflight
    if sp.pp == 1:
        activations += head_activation_bytes(m, b, s, tp, cp)
    mem = with_runtime_reserve(activations, states)

    # --- outputs -------------------------------------------------------------------------------
    tokens = w.global_batch_size * s
    flops = model_flops_per_token(sc) * tokens
    peak = acc.peak(w.precision)
    compute_time = mbs * per_mb_compute + optimizer
    return {
        "dp": sp.dp, "microbatches": mbs, "layers_per_stage": stage_layers,
        "step_time_s": step,
        "tokens_per_s": tokens / step,
        "tokens_per_s_per_device": tokens / step / sc.num_devices,
        "model_flops_per_step": flops,
        "mfu": flops / (step * sc.num_devices * peak) if peak else float("nan"),
        "compute_time_s": compute_time,
        "exposed_comm_time_s": mbs * (tp_comm + cp_comm + ep_comm + pp_comm) + exposed_dp,
        "bubble_time_s": bubble,
        "tp_comm_time_s": mbs * tp_comm, "cp_comm_time_s": mbs * cp_comm, "ep_comm_time_s": mbs * ep_comm,
        "pp_comm_time_s": mbs * pp_comm, "dp_comm_exposed_time_s": exposed_dp,
        "optimizer_time_s": optimizer, "overhead_time_s": cal.STEP_OVERHEAD_S,
        "tp_tier": tp_link.tier if tp > 1 else None, "dp_tier": dp_link.tier if sp.dp > 1 else None,
        **_algorithms(net, p.order, deg, tok_bytes, seqpar, local_dense * grad_bytes, z, dp, dp_link, tp_link),
        "weights_gb": (dense_states.weights + expert_states.weights) / 1e9,
        "grads_gb": (dense_states.gradients + expert_states.gradients) / 1e9,
        "optimizer_gb": (dense_states.optimizer + expert_states.optimizer) / 1e9,
        "activations_gb": activations * cal.ACTIVATION_FRAGMENTATION / 1e9,
        "reserved_gb": cal.RUNTIME_RESERVED_BYTES / 1e9,
        "memory_per_device_gb": mem / 1e9,
        "fits_in_memory": bool(mem <= acc.hbm_bytes),
    }

