"""A closed loop that runs in waves: a prefill-first scheduler under a benchmark's burst of fixed-length
requests.

A serving benchmark client in closed loop (SGLang's ``bench_serving.py --max-concurrency N`` with
``--request-rate inf``, vLLM's ``benchmark_serving.py``, genai-perf ``--concurrency N``) sends its first
``N`` requests at once and each later one when a request finishes. A scheduler that runs a step of
prompts whenever prompts wait, and decodes only when none do (SGLang: ``get_next_batch_to_run``, "Run
prefill first if possible", unless ``--enable-mixed-chunk``; vLLM V0 without chunked prefill:
``_schedule_default`` schedules no decodes in a step that has prefills), prefills all ``N`` prompts, then
decodes the ``N`` requests in lockstep. With fixed lengths they all finish at the same step, the client
sends ``N`` new ones at once, and the loop stays in waves for the whole run. A scheduler that mixes
prompt chunks into decode steps (vLLM V1, TensorRT-LLM in-flight batching, SGLang's mixed chunk) starts
each request's decode as soon as its own prompt is done, so the finishes, and the arrivals after them,
spread out into the steady state of ``engine/serving.py``; so does a spread of output lengths. Per replica,
with ``I'`` prompt tokens, ``O`` output tokens, ``e`` tokens per decode step and ``t(d, c)`` the step
time over ``d`` decoding requests and ``c`` prompt tokens:

  T_p  = n_B t(0, B) + t(0, r)          the wave's N I' prompt tokens in steps of the budget B (chunked
                                         prefill; whole prompts: as many as fit B), r the remainder
  T_w  = T_p + (O - 1) / e t(N, 0)      then N requests decode together
  TTFT = mean over j of the end of the step that holds the end of prompt j (about T_p (N + 1) / (2 N))
  E2E  = T_w,   X = N / T_w,   TPOT = (E2E - TTFT) / (O - 1)   (bench_serving's per-request TPOT)

Measured by dstack on 8 x H200 and 8 x MI300X (DeepSeek-R1, 3,200 in / 800 out, SGLang 0.4.3 and vLLM
0.7.3, docs/research/serving_records.yaml), mean TTFT grows in proportion to N (H200 vLLM: 0.98 s at 4,
3.4 s at 16, 14.2 s at 64), the signature of a wave's prompts queued behind each other.
"""

from __future__ import annotations

import numpy as np


def applies(sc, closed_loop: bool = True) -> bool:
    """Whether a closed loop of ``sc`` runs in waves: a prefill-first scheduler and a fixed output length
    (prompts of any length are all prefilled before the wave decodes, so only the outputs must agree)."""
    return closed_loop and sc.serving.scheduler == "prefill_first" and sc.workload.output_len_cv == 0


def floor_sum(n, m, a, b):
    """sum_{i=0}^{n-1} floor((a i + b) / m) for arrays of non-negative integers (m > 0): the Euclid-like
    reduction of the lattice points under a line (Graham, Knuth, Patashnik, Concrete Mathematics, 2nd
    ed., sec. 3.5), O(log m) array steps."""
    n, m, a, b = (np.array(v, dtype=np.int64) for v in np.broadcast_arrays(n, m, a, b))
    out = np.zeros(n.shape, dtype=np.int64)
    live = n > 0
    while live.any():
        q = a // m
        out += np.where(live, (n - 1) * n // 2 * q, 0)
        a = a % m
        q = b // m
        out += np.where(live, n * q, 0)
        b = b % m
        top = a * n + b
        live &= top >= m
        n, b, m, a = np.where(live, top // m, 0), np.where(live, top % m, 0), np.where(live, a, 1), m
    return out


def wave_columns(step, run, prompt, osl, e, budget, chunked: bool) -> dict:
    """TTFT, TPOT, E2E and requests/s per replica (arrays) of waves of ``run`` requests, ``step(d, c)``
    the step time over d decoding requests and c prompt tokens, ``budget`` the prompt tokens a step takes
    (per row, or one for all)."""
    zero = np.zeros_like(run)
    if chunked:  # the wave's prompt tokens in full steps of the budget and a last partial one
        budget = np.floor(np.broadcast_to(np.asarray(budget, dtype=float), np.shape(run)))  # whole tokens
        full = np.floor(run * prompt / budget)
        per_step, last = budget + 0.0 * run, run * prompt - full * budget
        done = np.minimum(np.floor(full * budget / prompt), run)  # prompts ending in the full steps
        # request j's prompt ends in step ceil(j I' / B) = floor((I' (j - 1) + I' + B - 1) / B), summed
        # over j = 1 .. done exactly
        b = budget.astype(np.int64)
        index_sum = floor_sum(done, b, prompt, prompt + b - 1).astype(float)
    else:  # whole prompts, as many as fit the budget a step: step s ends prompts (s - 1) p + 1 .. s p
        fit = np.maximum(np.floor(budget / prompt), 1.0)
        full = np.floor(run / fit)
        per_step, last = fit * prompt, (run - full * fit) * prompt
        done = full * fit
        index_sum = fit * full * (full + 1) / 2
    t_full = step(zero, per_step)
    t_last = np.where(last > 0, step(zero, np.maximum(last, 1.0)), 0.0)
    t_prefill = full * t_full + t_last
    # each prompt's first token at the end of the step its last token is in: the full steps', then the
    # last partial step's for the rest
    ttft = (index_sum * t_full + (run - done) * (full * t_full + t_last)) / run
    t_decode = np.maximum(osl - 1, 0.0) / e * step(run, zero)
    wave = t_prefill + t_decode
    tpot = (wave - ttft) / np.maximum(osl - 1, 1.0)

    def end_of_prompt(j):
        """End of the step that holds the end of the j-th prompt of the wave (engine/latency_spread.py)."""
        s = np.ceil(j * prompt / budget) if chunked else np.ceil(j / fit)
        return np.minimum(s, full) * t_full + np.where(s > full, t_last, 0.0)

    return {"ttft": ttft, "tpot": tpot, "e2e": wave, "rate": run / wave, "end_of_prompt": end_of_prompt,
            "prefill_s": t_prefill, "step_full": np.where(full > 0, t_full, t_last)}
