"""TTFT and TPOT percentiles of a closed loop (engine/latency_spread.py): by hand where the mechanism gives
a closed form, and as properties over the bundled engines."""

import math

import numpy as np
import pytest

from llmsim.engine.latency_spread import length_quantile
from llmsim.spec.presets import PresetRegistry
from llmsim.study.records import load, record

SERVING = ["model=llama3-8b", "system.num_devices=8", "parallel.tp=1", "parallel.pp=1", "workload.mode=serving",
           "workload.output_len=200"]


def _row(*overrides):
    return record(load(None, PresetRegistry(), [*SERVING, *overrides]))


def test_lognormal_length_quantiles_by_hand():
    # unit mean, cv 1: sigma^2 = ln(1 + 1) = ln 2, median exp(-sigma^2 / 2) = 2^-0.5
    assert float(length_quantile(1.0, 0.5)) == pytest.approx(2 ** -0.5)
    # p90: exp(-ln2/2 + sqrt(ln 2) x 1.2816) = 0.7071 x exp(1.0670) = 2.0552
    assert float(length_quantile(1.0, 0.9)) == pytest.approx(2 ** -0.5 * math.exp(math.sqrt(math.log(2)) * 1.281552),
                                                             rel=1e-5)
    assert float(length_quantile(0.0, 0.99)) == 1.0  # fixed lengths


def test_a_wave_of_two_steps_by_hand():
    # SGLang on an 80 GB H100: a budget of 8,192 tokens, prefill first. 8 replicas of 8 requests of 1,000
    # prompt tokens... use 16 a replica (concurrency 128): 16,000 tokens = one full step (prompts 1-8 end
    # in it) and a step of 7,808 (prompts 9-16). TTFT: 8 requests at t1, 8 at t1 + t2, so the mean is
    # (p50 + p90) / 2, p90 = p99 (both in the second step). The wave's first prompt (done at t1) waits
    # longest for its tokens: TPOT p99 = (E2E - t1) / 199.
    r = _row("workload.input_len=1000", "workload.concurrency=128", "serving.engine=sglang")
    assert r["running_requests_per_replica"] == 16
    assert r["ttft_s"] == pytest.approx((r["ttft_p50_s"] + r["ttft_p90_s"]) / 2, rel=1e-9)
    assert r["ttft_p90_s"] == r["ttft_p99_s"] > r["ttft_p50_s"]
    assert r["tpot_p99_s"] == pytest.approx((r["e2e_latency_s"] - r["ttft_p50_s"]) / 199, rel=1e-9)
    assert r["tpot_p50_s"] <= r["tpot_s"] <= r["tpot_p99_s"]


def test_fixed_lengths_in_steady_state_give_every_request_the_mean():
    r = _row("workload.input_len=1000", "workload.concurrency=64")  # generic engine: mixed steps
    for metric in ("ttft", "tpot"):
        assert {r[f"{metric}_p{q}_s"] for q in (50, 90, 99)} == {r[f"{metric}_s"]}


@pytest.mark.parametrize("engine", ["generic", "vllm", "sglang", "tensorrt-llm", "atom"])
@pytest.mark.parametrize("cv", [0.0, 0.5, 1.5])
def test_percentiles_are_ordered_and_the_spread_puts_the_median_below_the_mean(engine, cv):
    r = _row(f"workload.input_len={{mean: 1500, cv: {cv}}}", "workload.concurrency=96", f"serving.engine={engine}")
    for metric in ("ttft", "tpot"):
        p = [r[f"{metric}_p{q}_s"] for q in (50, 90, 99)]
        assert np.all(np.diff(p) >= 0) and p[0] > 0, (metric, p)
    if cv > 0 and engine in ("generic", "vllm", "tensorrt-llm"):  # mixed steps: the prompt's own length
        assert r["ttft_p50_s"] < r["ttft_s"] < r["ttft_p99_s"]


def test_a_start_burst_of_one_step_by_hand():
    # 8 replicas of 8 requests (concurrency 64) of 1,000 prompt tokens under a budget of 8,192: the burst's
    # 8,000 prompt tokens of a replica run in one step, T1 (= the mean TTFT when every request is in the
    # burst, num_prompts = concurrency). With num_prompts 640 the burst is 64 / 640 = 10% of the requests:
    # mean TTFT = 0.9 T_ss + 0.1 T1; the burst is the slowest 10%, so p90 = T_ss and p99 = T1. Its decode
    # starts after the burst's prefill: TPOT unchanged.
    base = ["workload.input_len=1000", "workload.concurrency=64"]
    steady, everyone, tenth = (_row(*base, *more) for more in ([], ["workload.num_prompts=64"],
                                                                ["workload.num_prompts=640"]))
    t_ss, t1 = steady["ttft_s"], everyone["ttft_s"]
    assert t1 > 3 * t_ss  # 8,000 prompt tokens against one prompt's chunk beside decodes
    assert tenth["ttft_s"] == pytest.approx(0.9 * t_ss + 0.1 * t1, rel=1e-9)
    assert tenth["ttft_p90_s"] == pytest.approx(t_ss, rel=1e-9) and tenth["ttft_p99_s"] == pytest.approx(t1, rel=1e-9)
    assert tenth["tpot_s"] == pytest.approx(steady["tpot_s"], rel=1e-12)
    assert tenth["e2e_latency_s"] == pytest.approx(tenth["ttft_s"] + 199 * tenth["tpot_s"], rel=1e-12)
    assert tenth["throughput_tokens_per_s"] == steady["throughput_tokens_per_s"]  # the steady state's


def test_a_burst_of_several_steps_slows_the_first_prompts_decode():
    # 32 a replica: 32,000 prompt tokens, three full steps and a partial one; the first prompt done decodes
    # beside the other three steps of prompts, so its TPOT (the p99) exceeds the steady state's
    base = ["workload.input_len=1000", "workload.concurrency=256"]
    steady, burst = _row(*base), _row(*base, "workload.num_prompts=256")
    assert burst["tpot_p99_s"] > burst["tpot_p50_s"] >= steady["tpot_s"] * (1 - 1e-12)
    assert burst["tpot_s"] > steady["tpot_s"] and burst["ttft_s"] > steady["ttft_s"]
    for metric in ("ttft", "tpot"):
        assert all(burst[f"{metric}_p{q}_s"] >= steady[f"{metric}_p{q}_s"] * (1 - 1e-12) for q in (50, 90, 99))


@pytest.mark.parametrize("extra, says", [
    (["workload.concurrency=64", "workload.num_prompts=10"], "fewer than the concurrency 64"),
    (["workload.request_rate_per_s=4", "workload.num_prompts=100"], "needs mode serving at a concurrency"),
])
def test_num_prompts_outside_a_closed_loop_is_refused(extra, says):
    from llmsim.spec.errors import SpecError

    with pytest.raises(SpecError, match=says):
        _row("workload.input_len=1000", *extra)
