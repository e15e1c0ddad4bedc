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

``inference_columns`` evaluates a column of design points at once (numpy arrays: a sweep's rows, whose
split, batch and sequence lengths vary), the operators once per distinct (batch, lengths, tp, ep) and
each group's collectives on all its message sizes at once; ``estimate_inference`` is its one-row case,
so that ``llmsim estimate`` and ``llmsim sweep`` give the same bits.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.columns import first_row, on_distinct, on_flag
from llmsim.engine.compute import (
    ACT_BYTES,
    Op,
    engine_ops,
    expert_gemm_rate,
    head_ops,
    kernel_time,
    layer_ops,
)
from llmsim.engine.errors import DesignError
from llmsim.engine.forward import (
    decode_attention,
    kv_bytes_per_token_layer,
    logits_bytes_per_seq,
    workspace_per_token,
)
from llmsim.engine.memory import moe_dispatch_factor
from llmsim.engine.network.groups import group_collectives
from llmsim.engine.network.topology import strides
from llmsim.engine.params import attention_params, local_params
from llmsim.engine.split import Split, resolve_split
from llmsim.engine.types import PRECISION_BYTES, Model, Scenario
from llmsim.engine.window import key_span

DECODE_SAMPLES = 4  # decode steps evaluated (midpoints of equal slices of the output) for the mean TPOT


def touched_experts(m: Model, tokens, ep, pooled):
    """Expected of a device's E/ep experts that receive at least one of the ``tokens`` x ``pooled``
    tokens routed to them: each token picks top_k of E experts, so an expert is missed by all n tokens
    with probability (1 - k/E)^n."""
    if m.moe is None:
        return 0.0
    e, k = m.moe.experts, m.moe.top_k
    return e / ep * (1 - _power(1 - k / e, tokens * pooled))


def _power(base: float, exponent):
    """``base ** exponent`` for each exponent by C ``pow``, as Python's ``**`` computes it: numpy's SIMD
    power can differ in the last bit, and a point must give the same bits alone and in a sweep."""
    exps = np.asarray(exponent)
    uniq, inverse = np.unique(exps, return_inverse=True)
    out = np.array([base ** x for x in uniq.tolist()], dtype=float)[inverse].reshape(exps.shape)
    return out if exps.ndim else float(out)


def _op_terms(ops: list[Op], sc: Scenario) -> list:
    acc, prec, kern = sc.accelerator, sc.workload.precision, sc.parallel.attention_kernel
    return [kernel_time(op, acc, prec, kern, inference=True) * op.count for op in ops]


def phase_ops(sc: Scenario, sp: Split, b, s, ctx=None) -> tuple[list[Op], list[Op]]:
    """(dense-layer ops, MoE-layer ops) of one forward over ``b`` sequences of ``s`` new tokens; with
    ``ctx`` it is a decode step (s = 1) against ``ctx`` cached tokens (``sp``: one split)."""
    return _phase_ops(sc, b, s, sp.tp, sp.ep, bool(sp.ep_in_tp), ctx)


def _phase_ops(sc: Scenario, b, s, tp, ep, in_tp: bool, ctx=None) -> tuple[list[Op], list[Op]]:
    m, w = sc.model, sc.workload
    kvp = w.kv_cache
    touched = touched_experts(m, b * s, ep, 1 if in_tp else ep) if ctx is not None else None
    etp = tp // ep if in_tp else None

    def layer(moe: bool) -> list[Op]:
        ops = engine_ops(layer_ops(m, b, s, tp, 1, False, w.precision, moe, ep, flash=True,
                                   touched_experts=touched, expert_tp=etp,
                                   moe_dispatch="local" if in_tp else "permute",
                                   expert_rate=expert_gemm_rate(sc.parallel, sc.accelerator),
                                   weights=w.weights, experts=w.experts), w.precision,
                         sc.parallel.activation_quant == "fused")
        if ctx is not None:
            ops = [decode_attention(m, b, ctx, tp, kvp, 1.0) if op.name == "attention" else op for op in ops]
        return ops

    dense = layer(False)
    return dense, (layer(True) if m.moe else dense)




def decode_contexts(input_len, output_len) -> list:
    """Contexts of the sampled decode steps: midpoints of DECODE_SAMPLES equal slices of the output."""
    steps = np.maximum(output_len - 1, 1)
    return [input_len + 1 + (j + 0.5) * steps / DECODE_SAMPLES for j in range(DECODE_SAMPLES)]


def _layer_times(sc: Scenario, in_tp: bool, b, isl, osl, tp, ep) -> dict:
    """Compute time of one layer (dense and MoE layers mixed by their share) in the prefill and in each
    sampled decode step, and of the output layer (logits of the last token of each sequence only)."""
    m, frac_moe = sc.model, sc.model.moe_layer_share
    kvp = sc.workload.kv_cache

    def mixed(dense_terms: list, moe_terms: list):
        return (1 - frac_moe) * sum(dense_terms) + frac_moe * sum(moe_terms)

    def phase_terms(s, ctx=None) -> tuple[list, list, list, list]:
        dense, moe = _phase_ops(sc, b, s, tp, ep, in_tp, ctx)
        t_dense = _op_terms(dense, sc)
        return dense, moe, t_dense, (t_dense if moe is dense else _op_terms(moe, sc))

    def with_attention(ops: list[Op], terms: list, att) -> list:
        return [att if op.name == "attention" else t for op, t in zip(ops, terms, strict=True)]

    _, _, t_dense, t_moe = phase_terms(isl)
    out = {"prefill": mixed(t_dense, t_moe),
           "head": sum(_op_terms(head_ops(m, b, 1, tp, 1, sc.workload.weights), sc))}
    ctxs = decode_contexts(isl, osl)
    dense, moe, t_dense, t_moe = phase_terms(1, ctxs[0])
    for j, ctx in enumerate(ctxs):
        if j:  # only attention depends on the context
            att = _op_terms([decode_attention(m, b, ctx, tp, kvp, 1.0)], sc)[0]
            t_dense, t_moe = with_attention(dense, t_dense, att), with_attention(moe, t_moe, att)
        out[f"decode{j}"] = mixed(t_dense, t_moe)
    return out


def memory_bytes(sc: Scenario, sp: Split, batch, input_len, output_len) -> dict:
    """Weights, KV cache, activation workspace and reserve of one device of the fullest stage."""
    m, w, stage_layers = sc.model, sc.workload, sp.layers_per_stage
    dense, expert = local_params(m, stage_layers, sp.pp, sp.tp, np.where(sp.ep_in_tp, 1, sp.ep))
    weights = dense * PRECISION_BYTES[w.weights] + expert * PRECISION_BYTES[w.experts]
    if sc.parallel.attention_dp:  # every rank holds the whole attention of its layers, not a 1/tp share
        weights = weights + stage_layers * attention_params(m) * (1 - 1 / sp.tp) * PRECISION_BYTES[w.weights]
    kv = batch * (input_len + output_len) * stage_layers * kv_bytes_per_token_layer(
        m, sp.tp, w.kv_cache)
    if m.attention_window is not None:  # a windowed layer caches at most its window (engine/window.py)
        kv = batch * key_span(m, input_len + output_len) * stage_layers * kv_bytes_per_token_layer(
            m, sp.tp, w.kv_cache)
    return {"weights": weights, "kv": kv, "activations": _workspace(sc, sp.tp, batch, input_len),
            "reserved": cal.RUNTIME_RESERVED_BYTES}


def _workspace(sc: Scenario, tp, batch, input_len):
    """Prefill runs in chunks of at most PREFILL_CHUNK_TOKENS tokens; plus the logits of the batch."""
    tokens = np.minimum(batch * input_len, cal.PREFILL_CHUNK_TOKENS)
    return tokens * workspace_per_token(sc, tp) + batch * logits_bytes_per_seq(sc, tp)


def max_batches(sc: Scenario, sp: Split, input_len, output_len) -> np.ndarray:
    """Largest batch whose weights, KV cache, workspace and reserve fit in HBM (0 when none does), per
    row. Memory is piecewise linear in the batch: the workspace stops growing once prefill is chunked."""
    free = sc.accelerator.hbm_bytes - sum(memory_bytes(sc, sp, 0, input_len, output_len).values())
    per_seq = memory_bytes(sc, sp, 1, input_len, output_len)["kv"] + logits_bytes_per_seq(sc, sp.tp)
    act, chunk = workspace_per_token(sc, sp.tp), cal.PREFILL_CHUNK_TOKENS
    saturated = np.floor((free - act * chunk) / per_seq)
    unchunked = np.floor(free / (per_seq + act * input_len))
    return np.maximum(np.where(saturated * input_len >= chunk, saturated, unchunked), 0).astype(np.int64)


def resolve_batches(sc: Scenario, sp: Split, input_len, output_len) -> np.ndarray:
    """The workload's batch size for every row of ``sp``, ``max`` resolved to the largest that fits."""
    b = sc.workload.batch_size
    if b == "max":
        return max_batches(sc, sp, input_len, output_len)
    return np.full(np.shape(sp.tp), int(b or 1))


def resolve_batch(sc: Scenario, sp: Split) -> int:
    """``resolve_batches`` of the one split ``sp`` at the workload's lengths."""
    w = sc.workload
    return int(resolve_batches(sc, sp.as_column(), np.array([w.input_len]), np.array([w.output_len]))[0])


def no_batch_message(sc: Scenario, tokens: int) -> str:
    """Why a ``max`` batch is 0: not one sequence of ``tokens`` tokens fits."""
    return (f"batch_size max: not even one sequence of {tokens} tokens fits next to the weights on "
            f"{sc.accelerator.name}")


def inference_point(sc: Scenario) -> tuple[Split, np.ndarray, np.ndarray, np.ndarray]:
    """(split, batch, input_len, output_len) of one design point as columns of one row, or the DesignError
    (exit 2) of a split no framework runs or a ``max`` batch of which not one sequence fits."""
    w = sc.workload
    if w.input_len is None or w.output_len is None:
        raise DesignError("inference needs workload.input_len and workload.output_len (tokens)", path="workload")
    sp = resolve_split(sc).as_column()
    isl, osl = np.array([w.input_len]), np.array([w.output_len])
    batch = resolve_batches(sc, sp, isl, osl)
    if batch[0] < 1:
        raise DesignError(no_batch_message(sc, w.input_len + w.output_len), path="workload.batch_size")
    return sp, batch, isl, osl


def estimate_inference(sc: Scenario) -> dict:
    """All inference output columns of one design point (contract in docs/columns.md)."""
    sp, batch, isl, osl = inference_point(sc)
    cols = inference_columns(sc, sp, batch, isl, osl, np.array([sc.num_devices]))
    return first_row(cols)


def tp_all_reduce(sc: Scenario, tp, stride, nbytes, with_names: bool = True):
    """(times, names; None without ``with_names``) of a tensor-parallel all-reduce of ``nbytes`` per rank
    in a serving engine: NCCL's fastest algorithm, or (``parallel.tp_all_reduce: auto``) a one-shot custom
    all-reduce where the group lies inside one switched or fully meshed scale-up domain and that is
    faster. One-shot: one kernel (the engine's fixed cost per kernel), a flag barrier of one low-latency
    hop (NCCL's hardware LL figure, 0.18 of the tier's Simple step: not the measured LL step of a whole
    NCCL collective, which carries NCCL's protocol), then each rank reads its k - 1 peers' buffers over its own
    links and reduces them: (k - 1) S / B, B the tier's link rate as NCCL's paths get it. TensorRT-LLM's
    AllReduceStrategy ONESHOT (customAllReduceKernels.cu), vLLM and SGLang's custom_all_reduce.cuh
    (cross_device_reduce_1stage) and PyTorch's intra-node comm (gpt-fast's tensor-parallel command sets
    ENABLE_INTRA_NODE_COMM=1) run so for small messages."""
    net = sc.network
    timings = group_collectives(net, "all_reduce", nbytes, tp, stride)
    t, names = timings.times, (timings.names if with_names else None)
    tier = net.tiers[0]
    if sc.parallel.tp_all_reduce == "nccl" or tier.topology not in ("switch", "full-mesh"):
        return t, names
    k = np.asarray(tp, dtype=float)
    bw = tier.bw_bytes_per_s * cal.SCALEUP_LINK_EFFICIENCY  # the link rate NCCL's paths get (topology._level)
    one = (cal.INFERENCE_KERNEL_OVERHEAD_S + cal.PROTOCOLS["ll"][0] * tier.latency_s
           + (k - 1) * np.asarray(nbytes, dtype=float) / bw)
    use = (k > 1) & (np.asarray(stride) * k <= tier.size) & (one < t)
    if not np.any(use):
        return t, names
    return np.where(use, one, t), (np.where(use, f"all_reduce one-shot on {tier.name}", names)
                                   if with_names else None)


def forward_comm(sc: Scenario, sp: Split, st: dict, tokens, with_names: bool = True):
    """(communication time of one forward of the fullest stage over ``tokens`` tokens per device, TP
    all-reduce names or None without ``with_names``); ``st``: the split's strides (topology.strides)."""
    m, net, deg = sc.model, sc.network, sp.degrees
    tok_bytes = tokens * m.hidden * ACT_BYTES
    # attention output and MLP output all-reduces (no sequence parallelism in inference); with attention
    # data-parallel, the MLP's all-gather of the ranks' tokens and reduce-scatter of its output instead
    t_ar, names = tp_all_reduce(sc, sp.tp, st["tp"], tok_bytes, with_names)
    if sc.parallel.attention_dp:
        t_ar = sum(group_collectives(net, op, tok_bytes, sp.tp, st["tp"])[0] for op in ("all_gather", "reduce_scatter"))
    out = 0.0 + sp.layers_per_stage * (1 if sc.parallel.attention_dp else 2) * t_ar
    if m.moe:  # dispatch and combine (Lepikhin et al. 2020, GShard); none when ep is inside tp
        a2a_bytes = tok_bytes * m.moe.top_k * moe_dispatch_factor(m)  # padded to capacity if dropping
        t_a2a = group_collectives(net, "all_to_all", a2a_bytes, deg["ep"], st["ep"])[0]
        out = out + sp.layers_per_stage * m.moe_layer_share * 2 * t_a2a
    return out, names


def pipeline_hops(sc: Scenario, sp: Split, st: dict, tokens):
    """Time for ``tokens`` tokens' activations to cross the pp - 1 stage boundaries (each tp rank sends its
    slice)."""
    nbytes = tokens * sc.model.hidden * ACT_BYTES / sp.tp
    return (sp.pp - 1) * group_collectives(sc.network, "p2p", nbytes, np.where(sp.pp > 1, 2, 1), st["pp"])[0]


def inference_columns(sc: Scenario, sp: Split, batch, input_len, output_len, num_devices) -> dict:
    """Output columns (arrays) of the valid splits ``sp`` (array fields) of ``sc`` serving ``batch``
    sequences (``max`` resolved: ``resolve_batches``) of ``input_len`` + ``output_len`` tokens on
    ``num_devices`` devices; the scenario's own degrees, batch, lengths and device count are ignored."""
    p = sc.parallel
    tp, pp, stage_layers, isl, osl = sp.tp, sp.pp, sp.layers_per_stage, input_len, output_len
    layers = lambda flag, *k: on_flag(lambda f, *r: _layer_times(sc, f, *r), flag, *k)
    keys = (sp.ep_in_tp, batch, isl, osl, tp, sp.ep)
    c = on_distinct(layers, *keys) if np.size(tp) > 1 else layers(*keys)
    st = strides(p.order, sp.degrees)
    comm = lambda tokens: forward_comm(sc, sp, st, tokens)
    pp_hops = lambda tokens: pipeline_hops(sc, sp, st, tokens)

    # prefill: every stage in turn over the whole prompt
    pre_c = stage_layers * c["prefill"] + c["head"]
    pre_n, _ = comm(batch * isl)
    prefill_hops = pp_hops(batch * isl)
    ttft = pp * (pre_c + pre_n) + prefill_hops
    # decode: mean step time over the output's contexts (the communication is the same at each)
    dec_comm, tp_names = comm(batch)
    dec = [(stage_layers * c[f"decode{j}"] + c["head"], dec_comm) for j in range(DECODE_SAMPLES)]
    dec_c = sum(x for x, _ in dec) / len(dec)
    dec_n = sum(n for _, n in dec) / len(dec)
    decode_hops = pp_hops(batch)
    tpot = pp * (dec_c + dec_n) + decode_hops
    e2e = ttft + (osl - 1) * tpot
    mem = memory_bytes(sc, sp, batch, isl, osl)
    total = sum(mem.values())
    tokens_out = sp.dp * batch * osl
    full = lambda x: np.broadcast_to(x, np.shape(tp))
    return {
        "dp": sp.dp, "batch_size": batch, "layers_per_stage": stage_layers,
        "ttft_s": ttft, "tpot_s": tpot, "e2e_latency_s": e2e,
        "throughput_tokens_per_s": tokens_out / e2e,
        "throughput_tokens_per_s_per_device": tokens_out / e2e / num_devices,
        "prefill_compute_time_s": pp * pre_c, "prefill_comm_time_s": pp * pre_n + prefill_hops,
        "decode_compute_time_s": pp * dec_c, "decode_comm_time_s": pp * dec_n + decode_hops,
        "tp_collective": tp_names,
        "weights_gb": mem["weights"] / 1e9, "kv_cache_gb": mem["kv"] / 1e9,
        "activations_gb": mem["activations"] / 1e9, "reserved_gb": full(mem["reserved"] / 1e9),
        "memory_per_device_gb": total / 1e9,
        "fits_in_memory": total <= sc.accelerator.hbm_bytes,
    }
