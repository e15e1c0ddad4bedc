"""A prefill-first scheduler keeps a closed loop of fixed lengths in waves (engine/waves.py)."""

import itertools

import numpy as np
import pytest

from llmsim.engine.network.topology import strides
from llmsim.engine.serving import step_time
from llmsim.engine.split import resolve_split
from llmsim.study import records as est

BASE = ["model=llama3-8b", "system.accelerator=h100-sxm", "system.num_devices=1", "parallel.tp=1",
        "parallel.pp=1", "workload.mode=serving", "workload.input_len=1000", "workload.output_len=100"]


def _load(registry, *extra):
    return est.load(None, registry, [*BASE, *extra])


def _step(sc, i=1000, o=100):
    """t(d, c) of the scenario's one split, as scalars (fixed lengths: decode context I + O/2, a prompt
    token attending to I/2 keys)."""
    sp = resolve_split(sc).as_column()
    st = strides(sc.parallel.order, sp.degrees)
    one = lambda v: np.array([float(v)])
    return lambda d, c: float(step_time(sc, sp, st, one(d), one(c), one(i + o / 2), one(i / 2))[0])


def _brute(t, n, i, o, budget, chunked):
    """(mean TTFT, mean TPOT, E2E, requests/s) of one wave by walking its schedule step by step: prompt
    tokens (or whole prompts) taken in order up to the budget a step, each request's first token at the
    end of the step that finishes its prompt, then o - 1 decode steps of all n."""
    ends, clock = [], 0.0
    if chunked:
        done_tokens, total = 0, n * i
        while done_tokens < total:
            take = min(budget, total - done_tokens)
            clock += t(0, take)
            done_tokens += take
            ends += [clock] * (done_tokens // i - len(ends))
    else:
        fit = max(budget // i, 1)
        while len(ends) < n:
            k = min(fit, n - len(ends))
            clock += t(0, k * i)
            ends += [clock] * k
    wave = clock + (o - 1) * t(n, 0)
    ttft = sum(ends) / n
    tpot = sum((wave - e) / (o - 1) for e in ends) / n
    return ttft, tpot, wave, n / wave


def test_sglang_runs_a_closed_loop_in_waves_by_hand(registry):
    # SGLang on an H100 (chunked_prefill_size 8,192 under 160 GB) prefills before it decodes: 20 requests of
    # 1,000 prompt tokens are 20,000 tokens in steps of 8,192, 8,192 and 3,616 (t8 = t(0, 8192), t3 =
    # t(0, 3616)). Prompts 1-8 end in step 1 (8 x 1,000 <= 8,192), 9-16 in step 2 (16,000 <= 16,384),
    # 17-20 in step 3: TTFT = (8 t8 + 8 x 2 t8 + 4 (2 t8 + t3)) / 20 = 1.6 t8 + 0.2 t3; then the 20 decode
    # 99 steps together: E2E = 2 t8 + t3 + 99 t(20, 0), TPOT = (E2E - TTFT) / 99. vLLM V1 mixes prompt
    # chunks into decode steps: no waves, TTFT far below the wave's; so does SGLang told to mix (the
    # scenario's scheduler wins over the engine's default), with the same 8,192 budget and step times
    sglang = _load(registry, "workload.concurrency=20", "serving.engine=sglang")
    t = _step(sglang)
    t8, t3, td = t(0, 8192), t(0, 3616), t(20, 0)
    ttft, e2e = 1.6 * t8 + 0.2 * t3, 2 * t8 + t3 + 99 * td
    row = est.record(sglang)
    assert row["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert row["e2e_latency_s"] == pytest.approx(e2e, rel=1e-9)
    assert row["tpot_s"] == pytest.approx((e2e - ttft) / 99, rel=1e-9)
    assert row["requests_per_s"] == pytest.approx(20 / e2e, rel=1e-9)
    vllm = est.record(_load(registry, "workload.concurrency=20", "serving.engine=vllm"))
    assert vllm["ttft_s"] < ttft / 4
    told = est.record(_load(registry, "workload.concurrency=20", "serving.engine=sglang", "serving.scheduler=mixed"))
    assert told["ttft_s"] == pytest.approx(vllm["ttft_s"], rel=1e-9)


def test_a_wave_by_hand(registry):
    # 4 requests of 1,000 prompt tokens: 4,000 tokens fit one step of the 8,192 budget, T_p = t(0, 4000);
    # then 99 decode steps of all 4, T_w = T_p + 99 t(4, 0); every first token at the end of the one
    # prompt step, TTFT = T_p; TPOT = (T_w - T_p) / 99; throughput 4 x 100 / T_w
    sc = _load(registry, "workload.concurrency=4", "serving.scheduler=prefill_first")
    t = _step(sc)
    t_p = t(0, 4000)
    t_w = t_p + 99 * t(4, 0)
    row = est.record(sc)
    assert row["ttft_s"] == pytest.approx(t_p, rel=1e-9)
    assert row["tpot_s"] == pytest.approx((t_w - t_p) / 99, rel=1e-9)
    assert row["e2e_latency_s"] == pytest.approx(t_w, rel=1e-9)
    assert row["throughput_tokens_per_s"] == pytest.approx(400 / t_w, rel=1e-9)
    assert row["scheduler"] == "prefill_first"


@pytest.mark.parametrize(("n", "i", "budget", "chunked"), [
    (20, 1000, 8192, True),  # two full steps and one of 3,616 tokens; prompts end in steps 1, 2, 3
    (2, 8193, 8192, True),  # a prompt one token over the budget
    (3, 8191, 8192, True),  # one token under
    (4, 999, 2048, True),
    (7, 512, 1024, True),  # two prompts a step exactly
    (1, 5000, 2048, True),  # one prompt in three chunks
    (300, 700, 8192, True),
    (20, 1000, 8192, False),  # whole prompts: 8 a step, 8 + 8 + 4
    (5, 3000, 8192, False),
])
def test_a_wave_matches_its_schedule_walked_step_by_step(registry, n, i, budget, chunked):
    sc = _load(registry, f"workload.concurrency={n}", f"workload.input_len={i}", "serving.scheduler=prefill_first",
               f"serving.max_batch_tokens={budget}", f"serving.chunked_prefill={str(chunked).lower()}",
               "serving.max_seqs=4096")
    ttft, tpot, e2e, rate = _brute(_step(sc, i, 100), n, i, 100, budget, chunked)
    row = est.record(sc)
    assert row["running_requests_per_replica"] == n
    assert row["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert row["tpot_s"] == pytest.approx(tpot, rel=1e-9)
    assert row["e2e_latency_s"] == pytest.approx(e2e, rel=1e-9)
    assert row["requests_per_s"] == pytest.approx(rate, rel=1e-9)


def test_two_replicas_run_a_wave_each(registry):
    # 40 requests over dp 2: two waves of 20 side by side, twice the requests/s of one
    one = _load(registry, "workload.concurrency=20", "serving.scheduler=prefill_first")
    ttft, tpot, _, rate = _brute(_step(one), 20, 1000, 100, 8192, True)
    two = est.record(_load(registry, "workload.concurrency=40", "serving.scheduler=prefill_first",
                           "system.num_devices=2", "parallel.dp=2"))
    assert two["ttft_s"] == pytest.approx(ttft, rel=1e-9) and two["tpot_s"] == pytest.approx(tpot, rel=1e-9)
    assert two["requests_per_s"] == pytest.approx(2 * rate, rel=1e-9)


def test_a_wave_holds_every_request_at_its_full_context_at_once(registry):
    # all requests of a wave reach I + O together: the KV cache is sized at I + O = 1,100 tokens (whole
    # 16-token blocks: 1,104), not the staggered loop's mean I + O/2 = 1,050 (1,056)
    def limit(scheduler):
        row = est.record(_load(registry, "workload.concurrency=4096", f"serving.scheduler={scheduler}",
                               "serving.max_seqs=100000"))
        return row["max_running_requests_per_replica"], row["kv_cache_occupancy"]
    (waves, occ), (mixed, _) = limit("prefill_first"), limit("mixed")
    assert waves < mixed and waves == pytest.approx(mixed * 1056 / 1104, abs=1.0) and occ <= 1.0


def test_waves_make_ttft_grow_with_concurrency_where_mixing_keeps_it_flat(registry):
    # the wave's prompts queue behind each other: TTFT roughly in proportion to N; mixed chunks start
    # each request's decode at once and a closed loop spreads out (TTFT a few steps)
    def ttft(scheduler, n):
        return est.record(_load(registry, f"workload.concurrency={n}", f"serving.scheduler={scheduler}"))["ttft_s"]
    waves = [ttft("prefill_first", n) for n in (8, 32, 128)]
    assert waves[0] < waves[1] < waves[2] and waves[2] > 8 * waves[0]
    assert ttft("mixed", 128) < waves[2] / 4


def test_a_spread_of_outputs_or_poisson_arrivals_take_the_steady_state(registry):
    # waves need one output length (all finish at one step) and a client's burst (closed loop); prompts of
    # any length are all prefilled before the wave decodes, so a spread of them keeps the waves
    spread = ["workload.concurrency=64", "workload.output_len={mean: 100, cv: 0.5}"]
    a = est.record(_load(registry, *spread, "serving.scheduler=prefill_first"))
    b = est.record(_load(registry, *spread, "serving.scheduler=mixed"))
    assert a["ttft_s"] == b["ttft_s"] and a["tpot_s"] == b["tpot_s"]
    prompts = ["workload.concurrency=64", "workload.input_len={mean: 1000, cv: 0.3}"]
    a = est.record(_load(registry, *prompts, "serving.scheduler=prefill_first"))
    b = est.record(_load(registry, *prompts, "serving.scheduler=mixed"))
    assert a["ttft_s"] > 4 * b["ttft_s"]
    rate = ["workload.request_rate_per_s=2"]
    a = est.record(_load(registry, *rate, "serving.scheduler=prefill_first"))
    b = est.record(_load(registry, *rate, "serving.scheduler=mixed"))
    assert a["ttft_s"] == b["ttft_s"] and a["throughput_tokens_per_s"] == b["throughput_tokens_per_s"]


def test_throughput_never_falls_as_a_wave_grows(registry):
    rows = [est.record(_load(registry, f"workload.concurrency={n}", "serving.scheduler=prefill_first"))
            for n in (1, 2, 4, 8, 16, 32, 64, 128)]
    thr = [r["throughput_tokens_per_s_per_device"] for r in rows]
    assert all(b >= a for a, b in itertools.pairwise(thr))


@pytest.mark.parametrize("scheduler", ["mixed", "prefill_first"])
def test_fewer_requests_than_replicas_leave_replicas_idle(registry, scheduler):
    # 3 requests over 8 replicas: 3 replicas serve one each, so the deployment completes 3 / E2E requests
    # per second (Little's law over the 3 in flight), not 8 / E2E
    row = est.record(_load(registry, "workload.concurrency=3", "system.num_devices=8", "parallel.dp=8",
                           f"serving.scheduler={scheduler}"))
    assert row["requests_per_s"] * row["e2e_latency_s"] == pytest.approx(3.0, rel=1e-9)
    assert row["throughput_tokens_per_s"] == pytest.approx(3 * 100 / row["e2e_latency_s"], rel=1e-9)


def test_the_estimate_table_says_when_a_closed_loop_runs_in_waves():
    from conftest import run_cli

    base = ["estimate", "--mode", "serving", "--concurrency", "8", "--input-len", "512", "--output-len", "64"]
    waves = run_cli(*base, "--set", "serving.engine=sglang")
    mixed = run_cli(*base, "--set", "serving.engine=vllm")
    assert waves.returncode == 0 and "in waves" in waves.stdout
    assert mixed.returncode == 0 and "in waves" not in mixed.stdout
