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


def _step(sc):
    """t(d, c) of the scenario's one split, as scalars."""
    sp = resolve_split(sc).as_column()
    st = strides(sc.parallel.order, sp.degrees)
    one = lambda v: np.array([float(v)])
    # fixed lengths: decode context I + O/2 = 1050, a prompt token attends to I/2 = 500 keys
    return lambda d, c: float(step_time(sc, sp, st, one(d), one(c), one(1050.0), one(500.0))[0])


def test_sglang_defaults_to_prefill_first_and_the_others_mix(registry):
    for engine, want in (("sglang", "prefill_first"), ("vllm", "mixed"), ("tensorrt-llm", "mixed"),
                         ("generic", "mixed")):
        assert _load(registry, "workload.concurrency=8", f"serving.engine={engine}").serving.scheduler == want
    sc = _load(registry, "workload.concurrency=8", "serving.engine=sglang", "serving.scheduler=mixed")
    assert sc.serving.scheduler == "mixed"


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


def test_a_wave_of_chunks_fills_whole_budgets_then_the_rest(registry):
    # 20 x 1,000 = 20,000 prompt tokens in steps of 8,192: two full steps and one of 3,616. Prompts 1-8
    # end in step 1 (8,000 <= 8,192), 9-16 in step 2 (16,000 <= 16,384), 17-20 in the last: exact mean
    # TTFT (8 t1 + 8 (2 t1) + 4 (2 t1 + t3)) / 20 = (32 t1 + 4 t3) / 20. The model's sum of step indices
    # for the 16 is I' m (m + 1) / (2B) + m (q - 1) / (2q) = 1000 x 16 x 17 / 16384 + 16 x 1023 / 2048
    # (q = 8192 / gcd(8192, 1000) = 1024) = 16.602 + 7.992 = 24.594 against the exact 24
    sc = _load(registry, "workload.concurrency=20", "serving.scheduler=prefill_first")
    t = _step(sc)
    t1, t3 = t(0, 8192), t(0, 3616)
    model = (24.594 * t1 + 4 * (2 * t1 + t3)) / 20
    assert est.record(sc)["ttft_s"] == pytest.approx(model, rel=1e-4)
    assert est.record(sc)["ttft_s"] == pytest.approx((32 * t1 + 4 * t3) / 20, rel=0.02)


def test_whole_prompts_fill_a_step_with_as_many_as_fit(registry):
    # chunked prefill off: 8 prompts of 1,000 per 8,192-token step; 20 prompts: 8 + 8 + 4, first tokens
    # at t8, 2 t8 and 2 t8 + t4: TTFT (8 t8 + 16 t8 + 4 (2 t8 + t4)) / 20
    sc = _load(registry, "workload.concurrency=20", "serving.scheduler=prefill_first",
               "serving.chunked_prefill=false")
    t = _step(sc)
    t8, t4 = t(0, 8000), t(0, 4000)
    assert est.record(sc)["ttft_s"] == pytest.approx((32 * t8 + 4 * t4) / 20, rel=1e-9)


def test_waves_make_ttft_grow_with_concurrency_where_mixing_keeps_it_flat(registry):
    # the wave's prompts queue behind each other: TTFT roughly in proportion to N; mixed chunks start
    # each request's decode at once and a closed loop spreads out (TTFT a few steps)
    def ttft(scheduler, n):
        return est.record(_load(registry, f"workload.concurrency={n}", f"serving.scheduler={scheduler}"))["ttft_s"]
    waves = [ttft("prefill_first", n) for n in (8, 32, 128)]
    assert waves[0] < waves[1] < waves[2] and waves[2] > 8 * waves[0]
    assert ttft("mixed", 128) < waves[2] / 4


def test_a_spread_of_lengths_or_poisson_arrivals_take_the_steady_state(registry):
    # waves need fixed lengths (all finish at one step) and a client's burst (closed loop)
    spread = ["workload.concurrency=64", "workload.output_len={mean: 100, cv: 0.5}"]
    a = est.record(_load(registry, *spread, "serving.scheduler=prefill_first"))
    b = est.record(_load(registry, *spread, "serving.scheduler=mixed"))
    assert a["ttft_s"] == b["ttft_s"] and a["tpot_s"] == b["tpot_s"]
    rate = ["workload.request_rate_per_s=2"]
    a = est.record(_load(registry, *rate, "serving.scheduler=prefill_first"))
    b = est.record(_load(registry, *rate, "serving.scheduler=mixed"))
    assert a["ttft_s"] == b["ttft_s"] and a["throughput_tokens_per_s"] == b["throughput_tokens_per_s"]


@pytest.mark.parametrize("n", [1, 2, 7, 64, 300])
def test_waves_keep_the_serving_identities(registry, n):
    # Little's law N = X E2E, E2E = TTFT + (O - 1) TPOT, and throughput never above the running requests'
    row = est.record(_load(registry, f"workload.concurrency={n}", "serving.scheduler=prefill_first"))
    assert row["e2e_latency_s"] == pytest.approx(row["ttft_s"] + 99 * row["tpot_s"], rel=1e-9)
    assert n == pytest.approx(row["requests_per_s"] * row["e2e_latency_s"], rel=1e-9)
    assert row["ttft_s"] > 0 and row["tpot_s"] > 0


def test_throughput_never_falls_as_a_wave_grows(registry):
    rows = [est.record(_load(registry, f"workload.concurrency={n}", "serving.scheduler=prefill_first"))
            for n in (1, 2, 4, 8, 16, 32, 64, 128)]
    thr = [r["throughput_tokens_per_s_per_device"] for r in rows]
    assert all(b >= a for a, b in itertools.pairwise(thr))
