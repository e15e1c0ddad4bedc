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

import numpy as np
from scipy.special import ndtri

QUANTILES = (0.5, 0.9, 0.99)


def length_quantile(cv, q):
    """q-quantile (q may be an array) of a unit-mean lognormal of coefficient of variation ``cv`` (1 for
    cv 0)."""
    sigma = np.sqrt(np.log1p(np.square(np.asarray(cv, dtype=float))))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(sigma > 0, np.exp(-sigma * sigma / 2 + sigma * ndtri(q)), 1.0)


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
    ttft = {f"ttft_p{round(q * 100)}_s": ttft_at(q) for q in QUANTILES}
    shape = np.shape(ttft["ttft_p50_s"])
    return {**ttft, **{f"tpot_p{round(q * 100)}_s": np.broadcast_to(tpot, shape) for q in QUANTILES}}


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


GRID = 240  # burst prompts sampled (240 splits evenly into 1-6, 8, 10, 12, 15, 16, 20, ... prompts)


def with_burst(ttft_at, ttft, tpot, first: dict, share, run, osl, e) -> dict:
    """Mean and percentile TTFT and TPOT over a benchmark run whose first ``run`` requests a replica gets
    start at once (a share ``share`` of the replica's requests) and the rest see the steady state
    (``ttft_at``, ``ttft``, ``tpot``). ``first``: engine/waves.py's columns of that first wave. Its j-th
    prompt's first token comes at ``end_of_prompt(j)``; it then decodes beside the rest of the burst's
    prompts, ``k_j = (prefill_s - end_j) / step_full`` steps of ``e`` tokens each, and at the steady TPOT
    after: TPOT_j = (k_j step_full + (O - 1 - k_j e) TPOT) / (O - 1), k_j e <= O - 1."""
    decode = np.maximum(osl - 1, 1.0)
    u = (np.arange(GRID) + 0.5) / GRID
    end = first["end_of_prompt"](np.maximum(np.ceil(u[:, None] * run), 1.0))  # (GRID, rows)
    k = np.minimum((first["prefill_s"] - end) / np.maximum(first["step_full"], 1e-30), decode / e)
    burst_tpot = (k * first["step_full"] + (decode - k * e) * tpot) / decode
    out = {"ttft_s": (1 - share) * ttft + share * first["ttft"],
           "tpot_s": (1 - share) * tpot + share * burst_tpot.mean(axis=0)}
    for q in QUANTILES:
        out[f"ttft_p{round(q * 100)}_s"] = mixture_quantile(q, ttft_at, end, share)
    for q in QUANTILES:
        out[f"tpot_p{round(q * 100)}_s"] = mixture_quantile(q, lambda p: tpot + 0.0 * p, burst_tpot, share)
    out["e2e_latency_s"] = out["ttft_s"] + (osl - 1) * out["tpot_s"]
    return out


def mixture_quantile(q: float, steady_at, atoms, share):
    """inf {x : (1 - w) F(x) + w G(x) >= q} per row: F the steady distribution, whose quantile function is
    ``steady_at`` (non-decreasing in its level; continuous or one atom), G the uniform distribution over
    the ``atoms`` (rows in columns), w = ``share``. Between the c-th and (c+1)-th smallest atoms G = c / J,
    so the mixture reaches q there at the steady level p_c = (q - w c / J) / (1 - w) if steady_at(p_c) lies
    in that interval; else at an atom, b_(c+1), when the steady part at it already reaches p_(c+1). The
    first of these, in order, is the quantile (exact, the atoms standing for the burst)."""
    b = np.sort(atoms, axis=0)
    count, rows = b.shape
    c = np.arange(count + 1, dtype=float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(share < 1, (q - share * c / count) / (1 - share), np.sign(q - c / count) * np.inf)
    x = np.broadcast_to(steady_at(np.clip(p, 0.0, 1.0)), (count + 1, rows))
    lo = np.concatenate([np.full((1, rows), -np.inf), b])
    hi = np.concatenate([b, np.full((1, rows), np.inf)])
    inside = (p >= 0) & (p <= 1) & (x >= lo) & (x < hi)
    at_atom = (p[1:] <= 0) | ((p[1:] <= 1) & (x[1:] <= b))  # the steady part at b_(c+1) reaches p_(c+1)
    values = np.empty((2 * count + 1, rows))
    ok = np.empty((2 * count + 1, rows), dtype=bool)
    values[0::2], ok[0::2] = x, inside  # interval c, then atom c + 1, in order of x
    values[1::2], ok[1::2] = b, at_atom
    first = np.argmax(ok, axis=0)
    return np.take_along_axis(values, first[None], axis=0)[0]
