"""TTFT and TPOT percentiles over the requests of a closed loop (``ttft_p50_s`` ... ``tpot_p99_s``).

The steady state of engine/serving.py gives every request the same surroundings: the time-averaged
running batch and the others' prompt chunks. What sets one request apart is

1. **its own prompt length**, under a spread (``workload.input_len: {mean, cv}`` or a request mix): its
   prompt of ``x`` tokens runs in ``chunks(x) = max(1, x / (B - d q))`` steps of the prefill step ``t_p``
   (chunked prefill; whole prompts: one step), and within one step adds ``x - I'`` tokens to a step of
   ``T`` tokens, about ``(x - I') t_p / T`` seconds. TTFT_q = TTFT + that difference at the q-quantile
   of the prompt lengths, taken as lognormal with the mix's mean and cv (only the moments reach the
   engine: request_mix.py). TPOT: every decoding request is in the same steps, so its mean is every
   request's (first order: a request's own length does not change the steps it decodes in);
2. **its place in a wave** (prefill-first scheduler, engine/waves.py): the j-th of the wave's N prompts
   ends in step ceil(j I' / B) (whole prompts: ceil(j / p), p a step), so TTFT_q is that step's end at
   j = ceil(q N); every request of the wave finishes with it, so TPOT_q = (T_w - TTFT at j = N - ceil(q N)
   + 1) / (O - 1): the first prompt done waits longest for its tokens.

Requests beyond the running limit wait in a FIFO queue for as long as each other (Little's law's
``queueing_delay_s``): the same at every percentile.

3. **the benchmark's start burst** (``workload.num_prompts``): a closed-loop client (vllm bench serve,
   sglang.bench_serving, AIPerf, perf_analyzer) sends its first N requests at once, so a replica's first
   ``run`` prompts queue behind each other's prefill steps as one wave does (``with_burst``), and each of
   them decodes beside the rest of the burst's prompts. The run's means and percentiles mix that first
   wave (its share of the replica's num_prompts / replicas requests) with the steady state.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

QUANTILES = (0.5, 0.9, 0.99)


def length_quantile(cv, q: float):
    """q-quantile of a unit-mean lognormal of coefficient of variation ``cv`` (1 for cv 0)."""
    sigma = np.sqrt(np.log1p(np.square(np.asarray(cv, dtype=float))))
    return np.exp(-sigma * sigma / 2 + sigma * NormalDist().inv_cdf(q))


def steady_ttft(ttft, prompt, cv: float, prefill_step, step_tokens, chunk_room):
    """q -> TTFT of the steady state's q-quantile request: the mean shifted by the q-quantile prompt's own
    prefill time against the mean prompt's (``prompt`` I' tokens; ``chunk_room`` the prompt tokens a step
    takes, inf for whole prompts; ``prefill_step`` the prefill step of ``step_tokens`` tokens)."""
    chunks = lambda x: np.maximum(1.0, x / chunk_room)

    def at(q: float):
        x = prompt * length_quantile(cv, q)
        # a mean prompt of one chunk: the q-quantile one adds its extra tokens to that step, or more steps
        more = np.where(x > chunk_room, chunks(x) - 1.0, -np.inf)
        within = np.maximum((x - prompt) / np.maximum(step_tokens, 1.0), more)
        return ttft + np.where(chunks(prompt) > 1, chunks(x) - chunks(prompt), within) * prefill_step

    return at


def steady(ttft_at, tpot) -> dict:
    """Percentile columns of the steady state (``ttft_at``: ``steady_ttft``)."""
    return {**{f"ttft_p{round(q * 100)}_s": ttft_at(q) for q in QUANTILES},
            **{f"tpot_p{round(q * 100)}_s": tpot + 0.0 * ttft_at(0.5) for q in QUANTILES}}


def in_waves(queue, end_of_prompt, wave_s, run, osl) -> dict:
    """Percentile columns of waves: ``end_of_prompt(j)`` the end of the step that holds the end of the
    j-th prompt of a wave of ``run`` (arrays), ``wave_s`` the wave's length."""
    out = {}
    for q in QUANTILES:
        out[f"ttft_p{round(q * 100)}_s"] = queue + end_of_prompt(np.maximum(np.ceil(q * run), 1.0))
    for q in QUANTILES:
        early = end_of_prompt(np.maximum(run - np.ceil(q * run) + 1, 1.0))  # the k-th smallest TPOT: prompt N - k + 1
        out[f"tpot_p{round(q * 100)}_s"] = (wave_s - early) / np.maximum(osl - 1, 1.0)
    return out


GRID = 48  # points of each part of the burst mixture's distribution


def with_burst(ttft_at, ttft, tpot, first: dict, share, run, osl) -> dict:
    """Mean and percentile TTFT and TPOT over a benchmark run whose first ``run`` requests a replica gets
    start at once (a share ``share`` of the replica's requests) and the rest see the steady state
    (``ttft_at``, ``ttft``, ``tpot``). ``first``: engine/waves.py's columns of that first wave. Its j-th
    prompt's first token comes at ``end_of_prompt(j)``; it then decodes beside the rest of the burst's
    prompts, steps of about ``step_full`` s, until the burst's prefill ends at ``prefill_s``, and at the
    steady TPOT after: TPOT_j = (min(k_j, O - 1) step_full + (O - 1 - k_j)+ TPOT) / (O - 1), k_j =
    (prefill_s - end_j) / step_full steps."""
    decode = np.maximum(osl - 1, 1.0)
    u = (np.arange(GRID) + 0.5) / GRID
    j = np.maximum(np.ceil(u[:, None] * run), 1.0)  # (GRID, rows)
    end = first["end_of_prompt"](j)
    k = np.minimum((first["prefill_s"] - end) / np.maximum(first["step_full"], 1e-30), decode)
    burst_tpot = (k * first["step_full"] + (decode - k) * tpot) / decode
    steady_ttft = np.stack([np.broadcast_to(ttft_at(q), np.shape(ttft)) for q in u])
    steady_tpot = np.broadcast_to(tpot, steady_ttft.shape)
    weights = np.concatenate([np.broadcast_to(1 - share, steady_ttft.shape), np.broadcast_to(share, end.shape)]) / GRID
    out = {"ttft_s": (1 - share) * ttft + share * first["ttft"],
           "tpot_s": (1 - share) * tpot + share * burst_tpot.mean(axis=0)}
    for key, parts in (("ttft", (steady_ttft, end)), ("tpot", (steady_tpot, burst_tpot))):
        values = np.concatenate(parts)
        order = np.argsort(values, axis=0)
        cum = np.cumsum(np.take_along_axis(weights, order, axis=0), axis=0)
        for q in QUANTILES:
            at = np.argmax(cum >= q - 1e-12, axis=0)[None]
            out[f"{key}_p{round(q * 100)}_s"] = np.take_along_axis(np.take_along_axis(values, order, axis=0), at, 0)[0]
    out["e2e_latency_s"] = out["ttft_s"] + (osl - 1) * out["tpot_s"]
    return out
