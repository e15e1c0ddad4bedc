"""Inference of a static batch: prefill (time to first token), decode (time per output token), KV cache.

One replica of tp x pp (x ep) devices serves ``batch_size`` sequences of ``input_len`` prompt tokens and
``output_len`` generated tokens; dp replicas serve independent batches. The operators are those of
training (compute.py) run forward only:
  prefill: every layer over batch x input_len tokens at once (mostly compute-bound);
  decode:  one token per sequence per step, reading all weights (MoE: the experts the batch touches)
           and the KV cache of the context so far (mostly memory-bound; Pope et al. 2022, arXiv
           2211.05102, sec. 2; imec Paper B, arXiv 2407.14645, sec. IV).
Each tensor-parallel layer all-reduces twice (Megatron-LM, Shoeybi et al. 2019), expert-parallel MoE
layers dispatch and combine with all-to-alls; collectives pay their small-message latency. A batch
crosses the pipeline stages in turn (no microbatching across stages in inference).
"""

from __future__ import annotations

import math

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.collectives import collective, collective_time
from llmsim.engine.compute import ACT_BYTES, Op, head_ops, layer_ops, op_time
from llmsim.engine.params import local_params
from llmsim.engine.split import Split, resolve_split
from llmsim.engine.topology import group_path, neighbour_path
from llmsim.spec.errors import SpecError
from llmsim.values import PRECISION_BYTES, Model, Scenario

DECODE_SAMPLES = 4  # decode steps evaluated (midpoints of equal slices of the output) for the mean TPOT


def kv_bytes_per_token_layer(m: Model, tp: int, kv_precision: str) -> float:
    """K and V of one token in one layer on one device: GQA/MQA heads split over tp (replicated when
    fewer than tp); MLA caches its compressed latent and RoPE key once (DeepSeek-V2, arXiv 2405.04434)."""
    kvb = PRECISION_BYTES[kv_precision]
    if m.mla is not None:
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * kvb
    return 2 * max(m.kv_heads / tp, 1) * m.head_dim * kvb


def touched_experts(m: Model, tokens: float, ep: int, pooled: int) -> float:
    """Expected of a device's E/ep experts that receive at least one of the ``tokens`` x ``pooled``
    tokens routed to them: each token picks top_k of E experts, so an expert is missed by all n tokens
    with probability (1 - k/E)^n."""
    if m.moe is None:
        return 0.0
    e, k = m.moe.experts, m.moe.top_k
    return e / ep * (1 - (1 - k / e) ** (tokens * pooled))


def _decode_attention(m: Model, b, ctx, tp: int, kv_precision: str, count: float) -> Op:
    """One new query per sequence against ``ctx`` cached keys and values (no causal halving)."""
    qk = m.head_dim + (m.mla.qk_rope_head_dim if m.mla else 0)
    v = m.mla.v_head_dim if m.mla else m.head_dim
    heads = m.heads / tp
    flops = 2.0 * b * ctx * heads * (qk + v)
    nbytes = b * ctx * kv_bytes_per_token_layer(m, tp, kv_precision) + b * heads * (qk + v) * ACT_BYTES
    return Op("attention", "attention", flops, nbytes, ctx, 1.0, count, True)


def _ops_time(ops: list[Op], sc: Scenario) -> float:
    acc, prec, kern = sc.accelerator, sc.workload.precision, sc.parallel.attention_kernel
    return sum((op_time(op, acc, prec, kernel=kern) + cal.KERNEL_OVERHEAD_S) * op.count for op in ops)


def phase_ops(sc: Scenario, sp: Split, b, s, ctx=None) -> tuple[list[Op], list[Op]]:
    """(dense-layer ops, MoE-layer ops) of one forward over ``b`` sequences of ``s`` new tokens; with
    ``ctx`` it is a decode step (s = 1) against ``ctx`` cached tokens."""
    m, p, w = sc.model, sc.parallel, sc.workload
    kvp = w.kv_precision or w.precision
    in_tp = sp.ep_in_tp
    touched = touched_experts(m, b * s, p.ep, 1 if in_tp else p.ep) if ctx is not None else None
    etp = p.tp // p.ep if in_tp else None

    def layer(moe: bool) -> list[Op]:
        ops = layer_ops(m, b, s, p.tp, 1, False, w.precision, moe, p.ep, flash=True, touched_experts=touched,
                        expert_tp=etp)
        if ctx is not None:
            ops = [_decode_attention(m, b, ctx, p.tp, kvp, 1.0) if op.name == "attention" else op for op in ops]
        return ops

    dense = layer(False)
    return dense, (layer(True) if m.moe else dense)


def _forward_time(sc: Scenario, sp: Split, b, s, ctx=None) -> tuple[float, float]:
    """(compute, communication) time of one forward of the fullest stage over the batch."""
    m, p, stage_layers = sc.model, sc.parallel, sp.layers_per_stage
    dense, moe = phase_ops(sc, sp, b, s, ctx)
    moe_layers = (m.layers - m.moe.first_dense_layers) if m.moe else 0
    frac_moe = moe_layers / m.layers
    layer_t = (1 - frac_moe) * _ops_time(dense, sc) + frac_moe * _ops_time(moe, sc)
    # logits of the last token of each sequence only
    compute = stage_layers * layer_t + _ops_time(head_ops(m, b, 1, p.tp, 1, sc.workload.precision), sc)
    deg = sp.degrees
    tok_bytes = b * s * m.hidden * ACT_BYTES
    comm = 0.0
    if p.tp > 1:  # attention output and MLP output all-reduces (no sequence parallelism in inference)
        comm += stage_layers * 2 * collective_time("all_reduce", tok_bytes, p.tp,
                                                   group_path(sc.network, p.order, deg, "tp"))
    if m.moe and p.ep > 1 and not sp.ep_in_tp:  # dispatch and combine (Lepikhin et al. 2020, GShard)
        a2a = tok_bytes * m.moe.top_k
        comm += stage_layers * frac_moe * 2 * collective_time("all_to_all", a2a, p.ep,
                                                               group_path(sc.network, p.order, deg, "ep"))
    return compute, comm


def memory_bytes(sc: Scenario, sp: Split, batch) -> dict:
    """Weights, KV cache, activation workspace and reserve of one device of the fullest stage."""
    m, p, w, stage_layers = sc.model, sc.parallel, sc.workload, sp.layers_per_stage
    dense, expert = local_params(m, stage_layers, p.pp, p.tp, 1 if sp.ep_in_tp else p.ep)
    weights = (dense + expert) * PRECISION_BYTES[w.precision]
    kv = batch * (w.input_len + w.output_len) * stage_layers * kv_bytes_per_token_layer(
        m, p.tp, w.kv_precision or w.precision)
    return {"weights": weights, "kv": kv, "activations": _workspace(sc, batch),
            "reserved": cal.RUNTIME_RESERVED_BYTES}


def _workspace_per_token(sc: Scenario) -> float:
    # live tensors of one layer during prefill: input, residual, Q/K/V, MLP intermediate (16-bit)
    m, tp = sc.model, sc.parallel.tp
    f = max(m.ffn_hidden, (m.moe.expert_ffn_hidden * m.moe.top_k) if m.moe else 0)
    up = 2 if m.gated else 1
    return ACT_BYTES * (2 * m.hidden + (m.heads + 2 * m.kv_heads) * m.head_dim / tp + (up + 1) * f / tp)


def _logits_bytes_per_seq(sc: Scenario) -> float:
    return sc.model.vocab / sc.parallel.tp * 4.0  # fp32 logits of the last token


def _workspace(sc: Scenario, batch) -> float:
    """Prefill runs in chunks of at most PREFILL_CHUNK_TOKENS tokens; plus the logits of the batch."""
    tokens = np.minimum(batch * sc.workload.input_len, cal.PREFILL_CHUNK_TOKENS)
    return tokens * _workspace_per_token(sc) + batch * _logits_bytes_per_seq(sc)


def max_batch(sc: Scenario, sp: Split) -> int:
    """Largest batch whose weights, KV cache, workspace and reserve fit in HBM (0 when none does).
    Memory is piecewise linear in the batch: the workspace stops growing once prefill is chunked."""
    free = sc.accelerator.hbm_bytes - sum(memory_bytes(sc, sp, 0).values())
    per_seq = memory_bytes(sc, sp, 1)["kv"] + _logits_bytes_per_seq(sc)
    act, isl, chunk = _workspace_per_token(sc), sc.workload.input_len, cal.PREFILL_CHUNK_TOKENS
    saturated = math.floor((free - act * chunk) / per_seq)
    if saturated * isl >= chunk:
        return max(saturated, 0)
    return max(math.floor(free / (per_seq + act * isl)), 0)


def resolve_batch(sc: Scenario, sp: Split) -> int:
    """The workload's batch size, ``max`` resolved to the largest that fits."""
    b = sc.workload.batch_size
    return max_batch(sc, sp) if b == "max" else int(b or 1)


def estimate_inference(sc: Scenario) -> dict:
    """All inference output columns of one design point (contract in DESIGN.md)."""
    w, p, net = sc.workload, sc.parallel, sc.network
    if w.input_len is None or w.output_len is None:
        raise SpecError("inference needs workload.input_len and workload.output_len (tokens)", path="workload")
    sp = resolve_split(sc)
    stage_layers = sp.layers_per_stage
    batch = resolve_batch(sc, sp)
    if batch < 1:
        raise SpecError(f"batch_size max: not even one sequence of {w.input_len + w.output_len} tokens fits "
                        f"next to the weights on {sc.accelerator.name}", path="workload.batch_size")
    isl, osl = w.input_len, w.output_len
    hop = neighbour_path(net, p.order, sp.degrees, "pp")

    def pp_hops(tokens) -> float:  # the batch's activations cross pp - 1 stage boundaries
        nbytes = tokens * sc.model.hidden * ACT_BYTES / p.tp  # each tp rank sends its slice
        return (p.pp - 1) * collective_time("p2p", nbytes, 2, hop) if p.pp > 1 else 0.0

    # prefill: every stage in turn over the whole prompt
    pre_c, pre_n = _forward_time(sc, sp, batch, isl)
    prefill_hops = pp_hops(batch * isl)
    ttft = p.pp * (pre_c + pre_n) + prefill_hops
    # decode: mean step time over the output's contexts
    steps = max(osl - 1, 1)
    ctxs = [isl + 1 + (j + 0.5) * steps / DECODE_SAMPLES for j in range(DECODE_SAMPLES)]
    dec = [_forward_time(sc, sp, batch, 1, ctx=c) for c in ctxs]
    dec_c = sum(c for c, _ in dec) / len(dec)
    dec_n = sum(n for _, n in dec) / len(dec)
    tpot = p.pp * (dec_c + dec_n) + pp_hops(batch)
    e2e = ttft + (osl - 1) * tpot
    mem = memory_bytes(sc, sp, batch)
    total = sum(mem.values())
    tokens_out = sp.dp * batch * osl
    tp_path = group_path(net, p.order, sp.degrees, "tp")
    tp_coll = collective("all_reduce", batch * sc.model.hidden * ACT_BYTES, tp_path) if p.tp > 1 else None
    return {
        "dp": sp.dp, "batch_size": batch, "layers_per_stage": stage_layers,
        "ttft_s": ttft, "tpot_s": tpot, "e2e_latency_s": e2e,
        "throughput_tokens_per_s": tokens_out / e2e,
        "throughput_tokens_per_s_per_device": tokens_out / e2e / sc.num_devices,
        "prefill_compute_time_s": p.pp * pre_c, "prefill_comm_time_s": p.pp * pre_n + prefill_hops,
        "decode_compute_time_s": p.pp * dec_c, "decode_comm_time_s": p.pp * dec_n + pp_hops(batch),
        "tp_collective": (f"all_reduce {tp_coll.algorithm}/{tp_coll.protocol} on {tp_coll.tiers}"
                          if tp_coll else None),
        "weights_gb": mem["weights"] / 1e9, "kv_cache_gb": mem["kv"] / 1e9,
        "activations_gb": mem["activations"] / 1e9, "reserved_gb": mem["reserved"] / 1e9,
        "memory_per_device_gb": total / 1e9,
        "fits_in_memory": bool(total <= sc.accelerator.hbm_bytes),
    }
