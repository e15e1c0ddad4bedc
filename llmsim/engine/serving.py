"""Serving under continuous batching, in steady state (vLLM, SGLang, TensorRT-LLM in-flight batching).

A replica (tp x pp x ep devices) holds ``N`` requests at once (closed loop: ``workload.concurrency`` over
the dp replicas; a finished request is replaced at once, as benchmark clients do). Every engine step runs
one forward over the decode token of each generating request and up to the rest of the step's token
budget ``B`` (``serving.max_batch_tokens``) of prompt tokens: chunked prefill (Agrawal et al. 2024,
Sarathi-Serve, arXiv 2403.02369; vLLM's default scheduler). At most ``serving.max_seqs`` requests run,
and only as many as the paged KV cache holds (blocks of ``serving.kv_block_tokens``); the rest queue.

Each request needs ``I' = I (1 - prefix_cache_hit_rate)`` prompt tokens and ``O - 1`` decode steps. In
steady state a request sees the other ``N - 1`` as a time average: ``d_o = (N - 1) f`` of them decoding
(``f`` the fraction of a request's time spent decoding) and ``c_o = (N - 1) / N * X * I' * t`` prompt
tokens per step of length ``t`` (``X`` requests/s). So

  TPOT = t(1 + d_o, c_o)                                     its own decode step beside the others'
  TTFT = w * t_p,  t_p = t(d_o, c_o t_p / TPOT + I'/w),  w = max(1, I' / (B - d_o))  its prompt in w
                                           chunks, beside the others' prompts arriving while it runs
  E2E = TTFT + (O - 1) TPOT,  X = N / E2E,  f = (O - 1) TPOT / E2E

solved by fixed-point iteration. Without chunked prefill (``serving.chunked_prefill: false``) a step takes
only the whole prompts that fit ``B`` beside the decodes and the rest wait: an M/D/1 queue of prompts
(``whole_prompt_rate``); ``t(d, c)`` is the fullest stage's forward over d decode tokens (at the
mean context I + O/2) and c prompt tokens (attending to I/2 keys on average) with its collectives, times pp
(a token crosses every stage), plus the pipeline hops. Requests beyond the running limit wait: Little's
law adds (N - running) / X to TTFT. A spread of lengths enters through its moments (request_mix.py):
the KV held and the attention work at the length-biased mean context, the M/G/1 wait of Poisson arrivals.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from llmsim.engine import latency_spread, speculative, waves
from llmsim.engine.columns import on_flag
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
)
from llmsim.engine.heads import qk_dim, v_dim
from llmsim.engine.inference import forward_comm, pipeline_hops, touched_experts
from llmsim.engine.kv_capacity import running_limit
from llmsim.engine.network.topology import strides
from llmsim.engine.request_mix import mg1_wait_quantile, mix_moments
from llmsim.engine.split import Split
from llmsim.engine.types import Scenario

ITERATIONS = 8  # fixed-point steps: the decode fraction settles to < 0.1% in 4-6 on the bundled cases
RHO_MAX = 0.999  # the whole-prompt queue's load, at most (the closed loop's cap on the wait binds first)


def _prefill_attention(m, c, keys, tp, kv_precision: str) -> Op:
    """``c`` prompt tokens of this step, each attending to ``keys`` earlier tokens of its prompt on average."""
    qk, v = qk_dim(m), v_dim(m)
    heads = m.heads / tp
    flops = 2.0 * c * keys * heads * (qk + v)
    nbytes = (c * heads * (qk + v) * ACT_BYTES
              + np.where(c > 0, keys, 0.0) * kv_bytes_per_token_layer(m, tp, kv_precision))
    # one attention kernel runs the step's decode and prompt tokens together (varlen FlashAttention,
    # FlashInfer): no launch of its own
    return Op("attention", "attention", flops, nbytes, np.maximum(c, 1.0), 1.0, 1.0, True, kernels=0.0)


def _stage_compute(sc: Scenario, in_tp: bool, d, c, ctx, keys, tp, ep, q: int = 1, chunk=None, own=None):
    """Compute time of one step on one device of the fullest stage's layer mix and the output layer;
    each of the ``d`` decoding requests runs ``q`` positions (speculative verification: q = k + 1).
    ``chunk``: ``c`` is a mean over steps whose prompt tokens come ``chunk`` at a time (None: every step
    holds ``c``). ``own``: the most prompt tokens of one request in the step (default ``c``), which attention
    data-parallel runs on one rank."""
    m, w = sc.model, sc.workload
    kvp = w.kv_cache
    acc, prec, kern = sc.accelerator, w.precision, sc.parallel.attention_kernel
    etp = tp // ep if in_tp else None
    # a step's weights are read once for its tokens, and of the routed experts only those its tokens pick
    # (inference.touched_experts: at one decode token, top_k of them). Where ``c`` is the mean of steps
    # that hold a prompt chunk (a share c / chunk of them) and steps that hold none, the experts read are
    # the mean over those steps, not the count at the mean (every expert, when a few prompt tokens are
    # spread over each step)
    pooled = 1 if in_tp else ep
    touched = touched_experts(m, d * q + c, ep, pooled)
    if chunk is not None and m.moe is not None:
        share = np.minimum(1.0, c / np.maximum(chunk, 1.0))
        touched = (share * touched_experts(m, d * q + np.maximum(chunk, c), ep, pooled)
                   + (1 - share) * touched_experts(m, d * q, ep, pooled))

    # attention data-parallel: each of the a = tp ranks runs the attention of its own requests with every
    # head (tp 1 there), and the MLP and experts wait for the busiest: 1/a of the decoding requests (one while
    # there are fewer than a) and of the prompt tokens, but a request's prompt chunk whole on its rank
    a = tp if sc.parallel.attention_dp else 1
    d_rank = np.maximum(d / a, np.minimum(d, 1.0)) if sc.parallel.attention_dp else d
    c_rank = np.maximum(c / a, np.minimum(c, c if own is None else own)) if sc.parallel.attention_dp else c

    def ops_at(moe: bool, tokens, ranks):
        return engine_ops(layer_ops(m, 1, tokens, ranks, 1, False, prec, moe, ep, flash=True, expert_tp=etp,
                                    touched_experts=touched, weights=w.weights, experts=w.experts,
                                    moe_dispatch="local" if in_tp else "permute",
                                    expert_rate=expert_gemm_rate(sc.parallel, acc)), prec,
                          sc.parallel.activation_quant == "fused")

    def layer(moe: bool):
        ops = ops_at(moe, d * q + c, tp)
        if sc.parallel.attention_dp:
            ops = attention_dp_ops(ops_at(moe, d_rank * q + c_rank, tp // a), ops)
        out = 0.0
        for op in ops:
            if op.name == "attention":  # decode tokens read their cache, prompt tokens their prefix
                op_list = [decode_attention(m, d_rank, ctx, tp // a, kvp, 1.0, q),
                           _prefill_attention(m, c_rank, keys, tp // a, kvp)]
            else:
                op_list = [op]
            out = out + sum(kernel_time(o, acc, prec, kern, inference=True) * o.count for o in op_list)
        return out

    frac = m.moe_layer_share
    per_layer = (1 - frac) * layer(False) + (frac * layer(True) if m.moe else 0.0)
    head = sum(kernel_time(o, acc, prec, kern, inference=True)
               for o in head_ops(m, 1, np.maximum(d * q, 1.0), tp, 1, w.weights))
    return {"layer": per_layer, "head": head}


def attention_dp_ops(own: list[Op], shared: list[Op]) -> list[Op]:
    """A layer's operators under attention data-parallel: the attention half (the ops before the MLP's
    norm, and their activation quantisation) of ``own`` (a rank's requests, every head), the rest of
    ``shared`` (all the ranks' tokens, split as before)."""
    cut = [o.name for o in own].index("residual_mlp_norm")
    first = {o.name for o in own[:cut]}
    in_attention = lambda o: o.name in first or o.name.removesuffix("_quant") in first
    return [o for o in own if in_attention(o)] + [o for o in shared if not in_attention(o)]


def step_time(sc: Scenario, sp: Split, st: dict, d, c, ctx, keys, chunk=None, own=None):
    """Wall time of one engine step: every stage's forward over ``d`` decoding requests and ``c`` prompt
    tokens (arrays per row), their collectives, and the pipeline hops; speculating, each decoding request
    verifies k + 1 positions after the draft's k passes (engine/speculative.py). ``chunk``: ``c`` is the
    mean of steps with prompt chunks of that size and steps without; ``own``: the most prompt tokens of one
    request in the step (``_stage_compute``)."""
    q = speculative.queries(sc)
    flag = np.broadcast_to(np.asarray(sp.ep_in_tp, dtype=bool), np.shape(d))
    own = np.broadcast_to(np.asarray(c if own is None else own, dtype=float), np.shape(d))
    if chunk is None:
        comp = on_flag(lambda f, *k: _stage_compute(sc, f, *k[:-1], q=q, own=k[-1]), flag, d, c, ctx, keys, sp.tp,
                       sp.ep, own)
    else:
        comp = on_flag(lambda f, *k: _stage_compute(sc, f, *k[:-2], q=q, chunk=k[-2], own=k[-1]), flag, d, c, ctx,
                       keys, sp.tp, sp.ep, chunk, own)
    comm, _ = forward_comm(sc, sp, st, d * q + c, with_names=False)
    stage = sp.layers_per_stage * comp["layer"] + comp["head"] + comm
    out = sp.pp * stage + pipeline_hops(sc, sp, st, d * q + c)
    if q == 1:
        return out
    # the draft passes, over the decoding requests only (none in a step of prompt tokens alone); a draft
    # model is dense here or keeps its experts on the tp ranks (ep 1)
    drafting, dsc = np.maximum(d, 1.0), speculative.drafter(sc)
    if dsc is sc:
        draft = on_flag(lambda f, *k: _stage_compute(sc, f, *k), flag, drafting, 0.0 * drafting, ctx, keys,
                        sp.tp, sp.ep)
        dsp = sp
    else:
        draft = _stage_compute(dsc, False, drafting, 0.0 * drafting, ctx, keys, sp.tp, 1)
        dsp = dataclasses.replace(sp, ep=np.ones_like(sp.ep))
    draft_comm, _ = forward_comm(dsc, dsp, st, drafting, with_names=False)
    t_draft = speculative.draft_time(sc, draft["layer"], draft["head"], draft_comm / sp.layers_per_stage)
    return out + np.where(np.asarray(d) > 0, t_draft, 0.0)


def whole_prompt_rate(run, busy, service, bisections: int = 48):
    """Requests/s of ``run`` requests in a closed loop that each spend ``busy`` seconds prefilling and
    decoding and first wait for the prompts ahead of theirs, served one ``service`` (a step over the prompts
    it takes) at a time: the mean wait of an M/D/1 queue, rho S / (2 (1 - rho)) (Pollaczek-Khinchine),
    rho = X S, at most the wait behind all the others, (run - 1) S. X solves X (W(X) + busy) = run, whose
    left side rises with X: bisection, so that the rate never oscillates with the wait it sets."""
    lo, hi = np.zeros_like(busy * run), run / busy  # hi: no wait at all
    for _ in range(bisections):
        x = (lo + hi) / 2
        rho = np.minimum(x * service, RHO_MAX)
        wait = np.minimum(rho * service / (2 * (1 - rho)), (run - 1) * service)
        over = x * (wait + busy) > run
        lo, hi = np.where(over, lo, x), np.where(over, x, hi)
    return lo


def check_whole_prompts(sc: Scenario, prompt) -> None:
    """Without chunked prefill a prompt runs in one step: refused when longer than the step budget (an
    engine rejects it: TensorRT-LLM needs max_num_tokens >= the prompt then)."""
    s = sc.serving
    if not s.chunked_prefill and np.any(np.asarray(prompt) > s.max_batch_tokens):
        raise DesignError(f"a prompt of {int(np.max(prompt)):,} tokens exceeds the step budget "
                          f"({s.max_batch_tokens:,}) with chunked prefill off (serving.chunked_prefill: false)",
                          path="serving.max_batch_tokens")


def serving_columns(sc: Scenario, sp: Split, concurrency, input_len, output_len, num_devices,
                    closed_loop: bool = True) -> dict:
    """Output columns (arrays) of the valid splits ``sp`` serving ``concurrency`` requests at once over
    their dp replicas, each of ``input_len`` prompt and ``output_len`` generated tokens (``closed_loop``:
    a benchmark client's burst start, which a prefill-first scheduler keeps in waves, engine/waves.py)."""
    s = sc.serving
    st = strides(sc.parallel.order, sp.degrees)
    n_total = np.asarray(concurrency, dtype=float)
    n = np.maximum(n_total / sp.dp, 1.0)  # per replica
    isl, osl = np.asarray(input_len, dtype=float), np.asarray(output_len, dtype=float)
    prompt = np.maximum(np.ceil(isl * (1 - s.prefix_cache_hit_rate)), 1.0)
    check_whole_prompts(sc, prompt)
    in_waves = waves.applies(sc, closed_loop)
    lim = running_limit(sc, sp, isl, osl, lockstep=in_waves)
    run = np.minimum(n, np.maximum(lim["max_running"], 1))
    mix = mix_moments(sc.workload, isl, osl)
    ctx, keys = mix["ctx"], mix["keys"]
    budget = float(s.max_batch_tokens)
    # attention data-parallel: each rank schedules its own requests' prompt chunks in its share of the step
    # budget (SGLang: chunked_prefill_size // dp_size under --enable-dp-attention, server_args.py), so a
    # prompt's chunk is at most budget / tp
    ranks = sp.tp if sc.parallel.attention_dp else 1
    # speculating, a decode step runs q = k + 1 positions per request and yields e tokens on average
    # (never more than the O - 1 tokens a request decodes: a step cannot keep tokens past the end)
    q = speculative.queries(sc)
    e = np.minimum(speculative.tokens_per_step(sc), np.maximum(osl - 1, 1.0))
    frac = (osl - 1) / (osl - 1 + 1.0)  # start: a one-step prefill
    stretch = 1.0  # a prefill step over a decode step: the others' prompts arrive for that long
    # whole prompts settle slower (the wait for a step moves the decode fraction): up to 3x the steps, to
    # 1e-4 of throughput, and no more once the decode fraction stops moving
    for _ in range(ITERATIONS if s.chunked_prefill else 3 * ITERATIONS):
        settled = frac
        # the others: d_o decoding, and their prompts at the rate they finish, (run - 1) f / ((O - 1) t / e)
        # requests per second times I' tokens times the step t (a decode step's, or a prefill step's)
        d_o = (run - 1) * frac
        c_o = d_o * prompt * e / np.maximum(osl - 1, 1)
        # the others' prompts come a chunk at a time (a whole prompt when it fits the step's budget), or
        # whole without chunked prefill (the engine admits a prompt only with room for all of it)
        chunk = (np.minimum(prompt, np.maximum((budget - (1 + d_o) * q) / ranks, 1.0)) if s.chunked_prefill
                 else prompt + 0.0 * d_o)
        step = step_time(sc, sp, st, 1 + d_o, c_o, ctx, keys, chunk=chunk, own=np.minimum(c_o, chunk))
        tpot = step / e
        if s.chunked_prefill:  # its prompt in w chunks
            room = np.maximum((budget - d_o * q) / ranks, 1.0)
            chunks = np.maximum(1.0, prompt / room)
            step_tokens = c_o * stretch + prompt / chunks
            prefill_step = step_time(sc, sp, st, d_o, step_tokens, ctx, keys, own=prompt / chunks)
            e2e_run = chunks * prefill_step + (osl - 1) * tpot
        else:  # whole prompts: a step takes those that fit its budget beside the decodes, the rest wait
            per_step = 1 + np.floor(np.maximum(budget - d_o * q - prompt, 0.0) / prompt)
            room, step_tokens = np.inf, np.minimum(c_o * stretch, (per_step - 1) * prompt) + prompt
            prefill_step = step_time(sc, sp, st, d_o, step_tokens, ctx, keys, own=prompt)
            e2e_run = run / whole_prompt_rate(run, prefill_step + (osl - 1) * tpot, prefill_step / per_step)
        stretch = prefill_step / step
        rate = run / e2e_run
        frac = (osl - 1) * tpot / e2e_run
        if not s.chunked_prefill and np.all(np.abs(frac - settled) <= 1e-9):
            break
    # The step budget caps the tokens of a step: at most d_max = B (O - 1) / (q (O - 1) + I' e) requests
    # decode while the rest of each step's B tokens prefill the prompts that replace them, so the engine
    # finishes at most d_max / ((O - 1) / e t(B)) requests per second; past that, TPOT is a full step and
    # the excess waits for prefill (Little's law below).
    d_max = budget * (osl - 1) / (q * (osl - 1) + prompt * e)
    # the prompt tokens a request runs on its rank in a step (attention DP): its share of the budget, or
    # without chunked prefill the whole prompt
    own_cap = np.maximum(budget / ranks, 1.0) if s.chunked_prefill else np.inf
    t_full = step_time(sc, sp, st, d_max, budget - d_max * q, ctx, keys, own=np.minimum(prompt, own_cap))
    rate_max = d_max / ((osl - 1) / e * t_full)
    full = ((1 + d_o) * q + c_o > budget) | (rate > rate_max)
    rate = np.where(full, np.minimum(rate, rate_max), rate)
    tpot = np.where(full, np.maximum(tpot, t_full / e), tpot)
    # waves under attention DP run rank by rank: the busiest rank's ceil(run / tp) prompts in its share of
    # the budget (while there are no more than tp, every prompt ends at the same step); a step is the
    # replica's, those tokens on each of the ranks holding prompts, and its decodes all the replica's
    adp = np.asarray(ranks) > 1
    per_rank = np.where(adp, np.ceil(run / ranks), run)
    wave_budget = np.where(adp, np.maximum(budget / ranks, 1.0), budget)
    wave_step = lambda dd, cc: step_time(sc, sp, st, np.where(adp, dd * run / np.maximum(per_rank, 1.0), dd),
                                         np.where(adp, cc * np.minimum(run, ranks), cc), ctx, keys,
                                         own=np.minimum(prompt, cc))
    replica_rate = lambda wave: np.where(adp, wave["rate"] * run / np.maximum(per_rank, 1.0), wave["rate"])
    if in_waves:
        wave = waves.wave_columns(wave_step, per_rank, prompt, osl, e, wave_budget, s.chunked_prefill)
        rate, tpot = replica_rate(wave), wave["tpot"]
    e2e = n / rate  # Little's law over everything in flight: prefill waits and the queue beyond the limit
    ttft = e2e - (osl - 1) * tpot
    queue = (n - run) / rate  # of which beyond the running limit
    ttft_at = latency_spread.steady_ttft(ttft, prompt, sc.workload.input_len_cv, prefill_step, d_o * q + step_tokens,
                                         room)
    spread = (latency_spread.in_waves(queue, wave["end_of_prompt"], wave["e2e"], per_rank, osl) if in_waves
              else latency_spread.steady(ttft_at, tpot))
    e2e_mean = e2e
    if closed_loop and not in_waves and sc.workload.num_prompts is not None:  # the client's start burst
        first = waves.wave_columns(wave_step, per_rank, prompt, osl, e, wave_budget, s.chunked_prefill)
        share = np.minimum(run * np.minimum(sp.dp, n_total) / sc.workload.num_prompts, 1.0)
        spread = latency_spread.with_burst(ttft_at, ttft, tpot, first, share, per_rank, osl, e)
        ttft, tpot, e2e_mean = spread.pop("ttft_s"), spread.pop("tpot_s"), spread.pop("e2e_latency_s")
    busy = np.minimum(sp.dp, n_total)  # fewer requests than replicas: only that many replicas work
    out_rate = busy * rate * osl  # output tokens/s of the deployment
    per_device = out_rate / num_devices
    kv_used = run * lim["kv_per_seq_bytes"]
    return {
        "dp": sp.dp, "layers_per_stage": sp.layers_per_stage,
        "ttft_s": ttft, "tpot_s": tpot, "e2e_latency_s": e2e_mean, "queueing_delay_s": queue, **spread,
        "requests_per_s": busy * rate,
        "throughput_tokens_per_s": out_rate, "throughput_tokens_per_s_per_device": per_device,
        "tokens_per_s_per_user": 1.0 / tpot,
        "tokens_per_decode_step": np.broadcast_to(e, np.shape(tpot)).astype(float),
        "running_requests_per_replica": run, "max_running_requests_per_replica": lim["max_running"],
        "kv_cache_occupancy": np.where(lim["kv_free_bytes"] > 0, kv_used / lim["kv_free_bytes"], np.inf),
        "kv_cache_gb": kv_used / 1e9,
        "memory_per_device_gb": (kv_used + sc.accelerator.hbm_bytes - lim["kv_free_bytes"]) / 1e9,
        "fits_in_memory": lim["max_running"] >= 1,
    }


def _deployment_limit(sc: Scenario, sp: Split, input_len: int, output_len: int) -> int:
    """Requests the whole deployment runs at once (every replica at its running limit), at least 1."""
    isl, osl = np.array([input_len]), np.array([output_len])
    return max(int(running_limit(sc, sp, isl, osl)["max_running"][0]), 1) * int(np.asarray(sp.dp).ravel()[0])


def _over(sc: Scenario, sp: Split, conc, input_len: int, output_len: int, num_devices: int,
          closed_loop: bool = True) -> dict:
    """``serving_columns`` of the one split ``sp`` at every concurrency of the array ``conc``."""
    return serving_columns(sc, sp, conc, np.full(conc.shape, input_len), np.full(conc.shape, output_len),
                           np.full(conc.shape, num_devices), closed_loop)


def slo_capacity(sc: Scenario, sp: Split, input_len: int, output_len: int, num_devices: int) -> dict:
    """The largest concurrency (over the deployment) whose TTFT and TPOT meet the scenario's ``slo``, and
    the output tokens/s per device there (SLO goodput): every concurrency from 1 to the running limit of
    all replicas evaluated as one column (TTFT and TPOT grow with it). 0 and 0.0 when not even one
    request meets it."""
    slo = sc.serving.slo_ttft_s, sc.serving.slo_tpot_s
    top = _deployment_limit(sc, sp, input_len, output_len)
    if sc.workload.num_prompts is not None:  # a client of num_prompts requests has at most that many in flight
        top = min(top, sc.workload.num_prompts)

    def meeting(conc):
        cols = _over(sc, sp, conc, input_len, output_len, num_devices)
        ok = np.ones(conc.shape, dtype=bool)
        if slo[0] is not None:
            ok &= cols["ttft_s"] <= slo[0]
        if slo[1] is not None:
            ok &= cols["tpot_s"] <= slo[1]
        return ok, cols["throughput_tokens_per_s_per_device"]

    coarse = np.unique(np.round(np.geomspace(1, top, 64)).astype(np.int64))
    ok, _ = meeting(coarse)
    if not ok.any():
        return {"slo_concurrency": 0, "slo_throughput_tokens_per_s_per_device": 0.0}
    i = int(np.flatnonzero(ok)[-1])  # then every concurrency up to the next coarse point that fails
    fine = np.arange(coarse[i], coarse[i + 1] if i + 1 < coarse.size else coarse[i] + 1)
    ok, thr = meeting(fine)
    best = int(np.flatnonzero(ok)[-1])
    return {"slo_concurrency": int(fine[best]), "slo_throughput_tokens_per_s_per_device": float(thr[best])}


def open_loop(sc: Scenario, sp: Split, rate: float, input_len: int, output_len: int, num_devices: int) -> dict:
    """Columns at ``rate`` requests/s arriving at random (Poisson) over the deployment: the closed loop at
    the concurrency whose throughput is that rate (Little's law), every concurrency up to the running
    limit evaluated as one column and interpolated; TTFT percentiles add an M/G/1 queue's waiting-time
    quantile at utilisation rate / capacity (the capacity: the throughput at the running limit; the
    service time spread as the tokens a request puts through the step budget, request_mix) to the mean.
    A rate at or above capacity has no steady state: TTFT is infinite."""
    top = _deployment_limit(sc, sp, input_len, output_len)
    work_cv = float(mix_moments(sc.workload, input_len, output_len, sc.serving.prefix_cache_hit_rate)["work_cv"])
    wait = lambda r, q: mg1_wait_quantile(r, capacity, work_cv, q)
    conc = np.unique(np.geomspace(1, top, 96))
    cols = _over(sc, sp, conc, input_len, output_len, num_devices, closed_loop=False)  # Poisson: no waves
    capacity = float(cols["requests_per_s"][-1])
    n = float(np.interp(rate, cols["requests_per_s"], conc)) if rate < capacity else float(top)
    at = {k: np.asarray(v)[0] for k, v in _over(sc, sp, np.array([n]), input_len, output_len, num_devices,
                                                 closed_loop=False).items()}
    if rate < cols["requests_per_s"][0]:  # fewer than one request in flight on average: the engine idles
        n = rate * float(at["e2e_latency_s"])  # between requests, each served as if alone
        at.update(requests_per_s=rate, throughput_tokens_per_s=rate * output_len,
                  throughput_tokens_per_s_per_device=rate * output_len / num_devices)
    out = {**at, "request_rate_per_s": rate, "concurrency": n, "utilization": rate / capacity}
    for q in (0.5, 0.9, 0.99):
        out[f"ttft_p{int(q * 100)}_s"] = float(at["ttft_s"] + wait(rate, q))
    if rate >= capacity:
        out.update(ttft_s=np.inf, e2e_latency_s=np.inf)
    # the highest rate whose p90 TTFT and TPOT meet the SLO, from the same column of concurrencies
    slo_t, slo_p = sc.serving.slo_ttft_s, sc.serving.slo_tpot_s
    if slo_t is not None or slo_p is not None:
        rates = cols["requests_per_s"]
        p90 = cols["ttft_s"] + wait(rates, 0.9)
        ok = (p90 <= (slo_t if slo_t is not None else np.inf)) & (cols["tpot_s"] <= (slo_p if slo_p else np.inf))
        best = int(np.flatnonzero(ok)[-1]) if ok.any() else None
        out["slo_request_rate_per_s"] = float(rates[best]) if best is not None else 0.0
        out["slo_throughput_tokens_per_s_per_device"] = (
            float(cols["throughput_tokens_per_s_per_device"][best]) if best is not None else 0.0)
    return out
