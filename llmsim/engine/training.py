"""Training step time, throughput, MFU and memory for a 5D-parallel split.

``training_columns`` evaluates a column of splits at once (numpy arrays; a sweep's rows), computing
operator times once per distinct (microbatch, tp, cp, ep) and collectives once per distinct size and
group; ``estimate_training`` is the one-point case.

Step time (per optimizer step, the slowest pipeline stage sets the pace):
  m * (forward + backward + recomputation + exposed TP/CP/EP communication + pipeline send/recv)
  + pipeline bubble ((p - 1) / v microbatch slots, Narayanan et al. 2021 eq. 2)
  + exposed data-parallel communication (gradient reduce overlapped with the last backward)
  + optimizer step (memory-bound over the local shard) + fixed per-step overhead.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.columns import first_row, per_key
from llmsim.engine.compute import (
    ACT_BYTES,
)
from llmsim.engine.heads import kv_width_per_rank, qk_dim, v_dim
from llmsim.engine.layer_times import layer_times
from llmsim.engine.memory import (
    MAIN_GRAD_BYTES,
    OPTIMIZER_STATE_BYTES,
    WEIGHT_BYTES,
    activation_bytes_per_layer,
    grad_bytes,
    grad_reduce_bytes,
    head_activation_bytes,
    inflight_microbatches,
    moe_dispatch_factor,
    recompute_modules,
    state_bytes,
    with_runtime_reserve,
)
from llmsim.engine.network.groups import group_collectives
from llmsim.engine.network.topology import path_of, strides
from llmsim.engine.overlap import bucketed_cost, overlap_cost
from llmsim.engine.params import local_params, param_counts
from llmsim.engine.reliability import goodput, straggler_time
from llmsim.engine.split import Split, resolve_split
from llmsim.engine.tensor_parallel import exposed_tp_comm
from llmsim.engine.types import Scenario
from llmsim.engine.window import key_span

# HBM traffic of one mixed-precision Adam step per local parameter, with fp32 main gradients as
# Megatron-LM / NeMo accumulate them (--accumulate-allreduce-grads-in-fp32, memory.MAIN_GRAD_BYTES):
# gradient norm for clipping reads the grad (4); Adam reads grad, master, m, v (16) and writes master,
# m, v (12); the master is copied to the 16-bit model weight (read 4, write 2); the grad buffer is zeroed
# (write 4). With fp16 gradients the optimizer first copies them into fp32 (read 2, write 4; Megatron
# _copy_model_grads_to_main_grads) and zeroes a 2-byte buffer: 4 bytes more.
ADAM_BYTES_PER_PARAM = 4.0 + 16.0 + 12.0 + 6.0 + 4.0


def adam_step_bytes(g: float, optimizer_states: str = "fp32") -> float:
    """HBM bytes of one Adam step per local parameter with ``g``-byte gradients (itemised above for fp32
    states). Apex DistributedFusedAdam's layouts (fp32-remainders, bf16) update the 16-bit weight in place
    from g-byte gradients: gradient norm g, read g + weight 2 + states, write weight 2 + states, zero g."""
    st = OPTIMIZER_STATE_BYTES[optimizer_states]
    if optimizer_states != "fp32":
        return 3 * g + 2 * (WEIGHT_BYTES + st)
    copy = g + MAIN_GRAD_BYTES if g < MAIN_GRAD_BYTES else 0.0  # 16-bit grads copied into fp32 main grads
    return ADAM_BYTES_PER_PARAM - (MAIN_GRAD_BYTES - g) + copy


def model_flops_per_token(sc: Scenario) -> float:
    """PaLM convention (Chowdhery et al. 2022, app. B): 6*N + 12*L*H*Q*T FLOPs per token for forward and
    backward without recomputation; N = active parameters without the input embedding (the output
    projection counts), attention counted without causal masking."""
    m, counts = sc.model, param_counts(sc.model)
    n = counts.active - m.vocab * m.hidden * (0 if m.tied_embeddings else 1)
    qk, v = qk_dim(m), v_dim(m)
    if m.attention_window is not None:  # windowed layers attend min(s, window) keys (engine/window.py)
        return 6.0 * n + 6.0 * m.layers * key_span(m, sc.workload.seq_len) * m.heads * (qk + v)
    return 6.0 * n + 6.0 * m.layers * sc.workload.seq_len * m.heads * (qk + v)


def comm_time(net, op: str, nbytes, ranks, stride, path_ranks=None):
    """Times of ``op`` for every row's group (``groups.group_collectives``)."""
    return group_collectives(net, op, nbytes, ranks, stride, path_ranks)[0]


STAGE_NAMES = np.array(["first", "last"], dtype=object)  # memory_stage: the stage whose memory is reported


def _path_tier(net, stride, n):
    return per_key(lambda st, k: (path_of(net, st, k).tier if k > 1 else None,), stride, n, dtype=object)[0]


def estimate_training(sc: Scenario) -> dict:
    """All output columns of one training design point (contract in docs/columns.md)."""
    sp = resolve_split(sc)
    cols = training_columns(sc, sp.as_column(), np.array([sc.num_devices]), np.array([sc.workload.global_batch_size]))
    return first_row(cols)


def stage_states(sc: Scenario, sp: Split, layers):
    """(non-expert, expert) ``StateBytes`` of one device of a stage of ``layers`` layers: weights, gradients
    and optimizer states under the split's ZeRO stage, sharded over dp x cp (experts: their own replicas)."""
    p, cp, ep, etp = sc.parallel, sp.cp, sp.ep, sp.expert_tp
    dp = sp.dp * cp
    edp = np.where(sp.ep_folded, sp.expert_dp, dp // ep)
    dense_p, expert_p = local_params(sc.model, layers, sp.pp, sp.tp, ep, etp)
    return tuple(state_bytes(n, k, p.zero_stage, precision=sc.workload.precision, grad_dtype=p.grad_reduce_dtype,
                             optimizer_states=p.optimizer_states) for n, k in ((dense_p, dp), (expert_p, edp)))


def memory_floor_bytes(sc: Scenario, sp: Split):
    """A lower bound of ``memory_per_device_gb`` (in bytes) that needs no timing: the fullest stage's
    states and the runtime reserve (activations only add), so a split above the accelerator's memory by
    this bound does not fit whatever its timing."""
    sd, se = stage_states(sc, sp, sp.layers_per_stage)
    return with_runtime_reserve(0.0, sd.total + se.total)


def training_columns(sc: Scenario, sp: Split, num_devices, global_batch_size) -> dict:
    """Output columns (arrays) of the feasible splits ``sp`` (array fields) of scenario ``sc``, whose
    own degrees, device count and batch are ignored."""
    m, w, p, acc, net = sc.model, sc.workload, sc.parallel, sc.accelerator, sc.network
    b, s, tp, cp, ep, pp = sp.microbatch_size, w.seq_len, sp.tp, sp.cp, sp.ep, sp.pp
    seqpar = p.sequence_parallel  # with tp = 1 every sequence-parallel term equals the plain one
    n_rows = np.shape(tp)

    # --- compute of the fullest stage, per microbatch -------------------------------------------
    etp = sp.expert_tp
    c = layer_times(sc, b, tp, cp, ep, etp)
    lay_f, lay_b, lay_attn, head_f, head_b = c.forward_s, c.backward_s, c.attention_s, c.head_forward_s, c.head_backward_s
    dense_frac = 1 - m.moe_layer_share
    stage_layers = sp.layers_per_stage
    n_last = sp.last_layers
    # the last stage also runs the output layer; it sets the pace if that makes it the fullest
    last_extra = head_f + head_b - (stage_layers - n_last) * (lay_f + lay_b)
    extra_f = np.where(pp == 1, head_f + c.embedding_forward_s, np.where(last_extra > 0, head_f, 0.0))
    extra_b = np.where(pp == 1, head_b + c.embedding_backward_s, np.where(last_extra > 0, head_b, 0.0))
    recompute_per_layer = {"none": 0.0 * lay_f, "full": lay_f}.get(p.recompute, c.recompute_s)  # selective: modules

    # --- communication per microbatch on the stage ----------------------------------------------
    deg = sp.degrees
    st = strides(p.order, deg)
    tok_bytes = b * s / cp * m.hidden * ACT_BYTES  # one full activation tensor of the microbatch
    tp_ops = ("all_gather", "reduce_scatter") if seqpar else ("all_reduce",)
    tp_timed = {op: group_collectives(net, op, tok_bytes, tp, st["tp"]) for op in tp_ops}
    tp_times = {op: t.times for op, t in tp_timed.items()}
    tpc_d = exposed_tp_comm(c.dense_windows_s, tp_times, seqpar, p.tp_comm_overlap)
    tpc_m = exposed_tp_comm(c.moe_windows_s, tp_times, seqpar, p.tp_comm_overlap)
    tp_fwd = stage_layers * (dense_frac * tpc_d.forward_s + (1 - dense_frac) * tpc_m.forward_s)
    tp_bwd = stage_layers * (dense_frac * tpc_d.backward_s + (1 - dense_frac) * tpc_m.backward_s)
    # recomputation repeats the forward's TP collectives of what it reruns: all of them (full), or a dense
    # MLP's all-gather and reduce-scatter (mlp module: half a dense layer's forward TP traffic)
    if p.recompute == "full":
        tp_redo = tp_fwd
    elif "mlp" in recompute_modules(p.recompute):
        tp_redo = stage_layers * dense_frac * tpc_d.forward_s / 2
    else:
        tp_redo = 0.0 * tp_fwd
    tp_comm = tp_fwd + tp_redo + tp_bwd

    # K and V of this rank's chunk; GQA heads are replicated when fewer than tp (heads.kv_width_per_rank)
    cp_bytes = b * s / cp * kv_width_per_rank(m, tp) * ACT_BYTES  # K and V of this rank's chunk, passed around the ring
    pair = np.where(cp > 1, 2, 1)
    cp_ring = (cp - 1) * comm_time(net, "p2p", cp_bytes, pair, st["cp"])
    # ring exchange overlaps attention (Liu et al. 2023 Ring Attention); backward sends dK, dV as well
    cp_fwd = stage_layers * overlap_cost(cp_ring, lay_attn)
    cp_comm = cp_fwd + stage_layers * overlap_cost(2 * cp_ring, cal.FLASH_BWD_FLOPS_RATIO * lay_attn)

    # folded expert layers (split.Split.ep_folded): the expert grid etp x ep x edp over the tp x cp x dp
    # ranks, etp innermost (Megatron-Core MoE parallel folding)
    folded = sp.ep_folded
    ep_stride = np.where(folded, etp, st["ep"])
    ep_comm, ep_names = np.zeros(n_rows), np.full(n_rows, None, dtype=object)
    if m.moe:
        a2a_bytes = b * s / cp * m.moe.top_k * moe_dispatch_factor(m) * m.hidden * ACT_BYTES / (tp if seqpar else 1)
        # dispatch + combine forward, the same backward (Lepikhin et al. 2020, GShard), exposed as
        # Megatron-Core runs them by default, under the shared experts (--moe-shared-expert-overlap), or
        # under another microbatch's layer (--overlap-moe-expert-parallel-comm; DeepSeek-V3 DualPipe)
        a2a_timed = group_collectives(net, "all_to_all", a2a_bytes, ep, ep_stride)
        a2a, ep_names = 2 * a2a_timed.times, a2a_timed.names
        per_layer = {"none": 2 * a2a,
                     "shared_experts": overlap_cost(a2a, c.shared_forward_s) + overlap_cost(a2a, c.shared_backward_s),
                     "batch": overlap_cost(2 * a2a, c.moe_forward_s + c.moe_backward_s)}[p.moe_comm_overlap]
        ep_comm = per_layer * stage_layers * (1 - dense_frac)

    # scatter/gather optimisation (Narayanan et al. 2021 sec. 4.1): each tp rank sends 1/tp of the
    # activation; without SP the receivers all-gather it over the tp group's link
    p2p_timed = group_collectives(net, "p2p", tok_bytes / tp, np.where(pp > 1, 2, 1), st["pp"])
    p2p = p2p_timed.times
    if not seqpar:
        p2p = p2p + comm_time(net, "all_gather", tok_bytes, tp, st["tp"])
    # a microbatch crosses v stage boundaries per device with interleaving (Narayanan sec. 2.2.2)
    pp_comm = np.where(pp > 1, 2 * sp.virtual_stages * p2p, 0.0)

    per_mb_compute = stage_layers * (lay_f + lay_b + recompute_per_layer) + extra_f + extra_b
    per_mb = per_mb_compute + tp_comm + cp_comm + ep_comm + pp_comm
    mbs, v = sp.microbatches, sp.virtual_stages
    pipeline_time = mbs * per_mb
    bubble = (pp - 1) / v * per_mb  # 1F1B: (p-1) slots; interleaved: (p-1)/v

    # --- parameters, data parallelism, optimizer -------------------------------------------------
    local_dense, local_expert = local_params(m, stage_layers, pp, tp, ep, etp)
    local_total = local_dense + local_expert
    # context-parallel ranks hold the same weights: gradients are reduced, and ZeRO shards, over dp * cp
    # (Megatron-Core's data-parallel group "with context parallel")
    dp, z = sp.dp * cp, p.zero_stage
    dp_stride = np.where(cp > 1, np.minimum(st["dp"], st["cp"]), st["dp"])
    edp = np.where(folded, sp.expert_dp, dp // ep)  # replicas of each expert: its gradients are reduced over them
    edp_stride, edp_path = np.where(folded, etp * ep, dp_stride), np.where(folded, edp, dp)
    # gradients are reduced in the dtype of the grad buffer (fp32 with bf16, memory.grad_reduce_bytes),
    # the updated weights all-gathered in 16 bits (the distributed optimizer's bf16 param buffer)
    prec, gdt, ost = w.precision, p.grad_reduce_dtype, p.optimizer_states
    red_bytes = grad_reduce_bytes(prec, z, gdt)
    # FSDP / ZeRO-3 issues one collective per wrapped layer (Zhao et al. 2023, PyTorch FSDP sec. 3.2), so
    # each pays its own latency; ZeRO-0/1/2 reduce the gradients in a few large buckets
    units = stage_layers if z >= 3 else np.ones(n_rows)

    def dense_sync(op: str, nbytes: float):
        return group_collectives(net, op, local_dense * nbytes / units, dp, dp_stride)

    def sync(op: str, nbytes: float):
        return units * (dense_sync(op, nbytes).times
                        + comm_time(net, op, local_expert * nbytes / units, edp, edp_stride, edp_path))

    if z == 0:
        grad_sync, param_sync = sync("all_reduce", red_bytes), 0.0
    else:  # distributed optimizer / ZeRO: reduce-scatter gradients, all-gather updated weights
        grad_sync, param_sync = sync("reduce_scatter", red_bytes), sync("all_gather", WEIGHT_BYTES)
    # overlap windows: a microbatch's forward and backward wall time, their own exposed comm included
    fwd_comm = tp_fwd + cp_fwd + ep_comm / 2 + pp_comm / 2
    mb_fwd = stage_layers * lay_f + extra_f + fwd_comm
    mb_bwd = per_mb - mb_fwd
    if z >= 3:
        # FSDP / ZeRO-3: every microbatch gathers each layer's weights for its forward and again for its
        # backward, and reduce-scatters its gradients; the next layer's gather is prefetched under this
        # layer's compute (Zhao et al. 2023, PyTorch FSDP sec. 3.3, backward_prefetch BACKWARD_PRE, the
        # rate limiter keeping one layer ahead), so the first gather of each pass and the last
        # reduce-scatter are exposed
        ag, rs, fwd_u, bwd_u = param_sync / units, grad_sync / units, mb_fwd / units, mb_bwd / units
        exposed_dp = mbs * (2 * ag + rs + (units - 1) * (overlap_cost(ag, fwd_u) + overlap_cost(ag + rs, bwd_u)))
    else:  # gradient buckets reduce under the last microbatch's backward, weight buckets gather under the
        # next forward; the last gradient bucket and the first weight bucket are exposed
        bucket = np.maximum(cal.DP_BUCKET_PARAMS, cal.DP_BUCKET_PARAMS_PER_RANK * dp)
        share = np.minimum(1.0, bucket / local_total)
        exposed_dp = bucketed_cost(grad_sync, mb_bwd, share) + bucketed_cost(param_sync, mb_fwd, share)
    exposed_dp = np.where(dp > 1, exposed_dp, 0.0)

    opt_params = local_total / (dp if z >= 1 else 1)
    optimizer = opt_params * adam_step_bytes(grad_bytes(prec, gdt), ost) / (acc.hbm_bw_bytes_per_s * cal.HBM_EFFICIENCY)
    compute_time = mbs * per_mb_compute + optimizer
    # a synchronous step waits for the slowest device (engine/reliability.py)
    stragglers = straggler_time(compute_time, num_devices, sc.reliability)
    step = pipeline_time + bubble + exposed_dp + optimizer + stragglers + cal.STEP_OVERHEAD_S

    # --- memory of the busiest device: the first stage (input embedding, most microbatches in flight)
    # or the last (output projection, fp32 logits, maybe fewer layers); one device when pp = 1 -----------
    drop = m.dropout > 0
    act = [activation_bytes_per_layer(m, b, s, tp, cp, seqpar, p.recompute, p.flash_attention, drop,
                                      moe_layer=x, ep=ep, precision=prec) for x in (False, True)]
    act_layer = dense_frac * act[0] + (1 - dense_frac) * act[1]
    head = head_activation_bytes(m, b, s, tp, cp)
    stages = []
    for layers, last in ((stage_layers, False), (n_last, True)):
        sd, se = stage_states(sc, sp, layers)
        acts = layers * act_layer * inflight_microbatches(pp, mbs, v, last=last) + np.where((pp == 1) | last, head, 0.0)
        stages.append({"weights": sd.weights + se.weights, "grads": sd.gradients + se.gradients,
                       "optimizer": sd.optimizer + se.optimizer, "activations": acts,
                       "mem": with_runtime_reserve(acts, sd.total + se.total)})
    is_last = stages[1]["mem"] > stages[0]["mem"]
    mem_of = {k: np.broadcast_to(np.where(is_last, stages[1][k], stages[0][k]), n_rows) for k in stages[0]}
    mem = mem_of["mem"]

    # --- outputs -------------------------------------------------------------------------------
    tokens = global_batch_size * s
    flops = model_flops_per_token(sc) * tokens
    peak = acc.peak(w.precision)
    # a checkpoint holds the 16-bit weights and the optimizer states, spread over every device
    state = param_counts(m).total * (WEIGHT_BYTES + OPTIMIZER_STATE_BYTES[ost])
    good = goodput(num_devices, state / num_devices, sc.reliability)
    full = lambda x: np.broadcast_to(x, n_rows)
    # each dimension's main collective named as it was timed (the same call: its size, group and path);
    # the data-parallel one is the dense gradients' (per FSDP unit under ZeRO-3)
    names = {"tp_collective": tp_timed[tp_ops[-1]].names,
             "dp_collective": dense_sync("all_reduce" if z == 0 else "reduce_scatter", red_bytes).names,
             "ep_collective": ep_names, "pp_collective": p2p_timed.names}
    return {
        "dp": sp.dp, "microbatches": mbs, "layers_per_stage": full(stage_layers),
        "step_time_s": step,
        "tokens_per_s": tokens / step,
        "tokens_per_s_per_device": tokens / step / num_devices,
        "model_flops_per_step": full(flops),
        "mfu": flops / (step * num_devices * peak) if peak else np.full(n_rows, np.nan),
        "compute_time_s": compute_time,
        "exposed_comm_time_s": mbs * (tp_comm + cp_comm + ep_comm + pp_comm) + exposed_dp,
        "bubble_time_s": bubble,
        "tp_comm_time_s": mbs * tp_comm, "cp_comm_time_s": mbs * cp_comm, "ep_comm_time_s": mbs * ep_comm,
        "pp_comm_time_s": mbs * pp_comm, "dp_comm_exposed_time_s": exposed_dp,
        "optimizer_time_s": optimizer, "straggler_time_s": stragglers,
        "overhead_time_s": full(cal.STEP_OVERHEAD_S),
        "goodput_tokens_per_s": tokens / step * good["goodput_fraction"],
        "goodput_fraction": good["goodput_fraction"], "checkpoint_time_s": good["checkpoint_time_s"],
        "checkpoint_interval_s": good["checkpoint_interval_s"],
        "tp_tier": _path_tier(net, st["tp"], tp), "dp_tier": _path_tier(net, dp_stride, np.where(sp.dp > 1, dp, 1)),
        **names,
        **{f"{k}_gb": mem_of[k] / 1e9 for k in ("weights", "grads", "optimizer")},
        "activations_gb": mem_of["activations"] * cal.ACTIVATION_FRAGMENTATION / 1e9,
        "reserved_gb": full(cal.RUNTIME_RESERVED_BYTES / 1e9),
        "memory_per_device_gb": mem / 1e9,
        "memory_stage": np.broadcast_to(STAGE_NAMES[np.asarray(is_last, dtype=np.intp)], n_rows),  # pp = 1: "first"
        "fits_in_memory": mem <= acc.hbm_bytes,
    }
