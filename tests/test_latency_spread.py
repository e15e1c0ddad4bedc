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
    (["workload.request_rate_per_s=4", "workload.num_prompts=100"], "modelled for mode serving at a concurrency"),
])
def test_num_prompts_outside_a_closed_loop_is_refused(extra, says):
    from llmsim.spec.errors import SpecError

    with pytest.raises(SpecError, match=says):
        _row("workload.input_len=1000", *extra)


def test_mixture_quantile_by_hand():
    from llmsim.engine.latency_spread import mixture_quantile

    # steady: uniform on [0, 1] (quantile p -> p); burst atoms at 2 and 3, share 0.2 (0.1 each):
    # F(x) = 0.8 x on [0, 1], 0.8 up to 2, 0.9 at 2, 1.0 at 3
    steady, atoms = (lambda p: p + 0.0), np.array([[3.0], [2.0]])
    assert mixture_quantile(0.4, steady, atoms, 0.2)[0] == pytest.approx(0.5)  # 0.8 x = 0.4
    assert mixture_quantile(0.8, steady, atoms, 0.2)[0] == pytest.approx(1.0)
    assert mixture_quantile(0.85, steady, atoms, 0.2)[0] == 2.0
    assert mixture_quantile(0.95, steady, atoms, 0.2)[0] == 3.0
    # an atom inside the steady range: atoms at 0.5 and 0.75, share 0.5: F(x) = 0.5 x below 0.5, jumps to
    # 0.5, then 0.5 x + 0.25 to 0.75 (0.625), jumps to 0.875, then 0.5 x + 0.5
    atoms = np.array([[0.5], [0.75]])
    assert mixture_quantile(0.2, steady, atoms, 0.5)[0] == pytest.approx(0.4)
    assert mixture_quantile(0.45, steady, atoms, 0.5)[0] == 0.5
    assert mixture_quantile(0.55, steady, atoms, 0.5)[0] == pytest.approx(0.6)
    assert mixture_quantile(0.7, steady, atoms, 0.5)[0] == 0.75
    assert mixture_quantile(0.95, steady, atoms, 0.5)[0] == pytest.approx(0.9)
    # no burst: the steady quantile exactly; all burst: the atoms'
    assert mixture_quantile(0.9, steady, atoms, 0.0)[0] == pytest.approx(0.9)
    assert mixture_quantile(0.4, steady, atoms, 1.0)[0] == 0.5


def test_a_vanishing_burst_leaves_the_steady_percentiles():
    base = ["workload.input_len={mean: 1500, cv: 1.5}", "workload.concurrency=96"]
    steady, far = _row(*base), _row(*base, f"workload.num_prompts={2 ** 40}")
    for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p99_s", "ttft_s", "tpot_s"):
        assert far[key] == pytest.approx(steady[key], rel=1e-6), key


def test_a_burst_requests_tpot_by_hand():
    from llmsim.engine.latency_spread import with_burst

    # a burst of 3 prompts ending at steps 1, 2, 3 (steps of 1 s, the burst's prefill done at 3 s); 10 tokens
    # to decode at a steady 0.1 s each, e = 2 tokens a step (speculating). Prompt 1 decodes k = 2 steps
    # beside the burst (4 tokens), then 6 at 0.1: (2 + 0.6) / 10 = 0.26; prompt 2: (1 + 0.8) / 10 = 0.18;
    # prompt 3: 0.1. All in the burst (share 1): mean 0.18, p50 0.18, p99 0.26; TTFT mean 2, p99 3.
    first = {"end_of_prompt": lambda j: j + 0.0, "prefill_s": np.array([3.0]), "step_full": np.array([1.0]),
             "ttft": np.array([2.0])}
    out = with_burst(lambda p: np.full_like(np.asarray(p, dtype=float), 0.5), np.array([0.5]), np.array([0.1]),
                     first, 1.0, np.array([3.0]), np.array([11.0]), 2.0)
    assert out["tpot_s"][0] == pytest.approx(0.18) and out["tpot_p50_s"][0] == pytest.approx(0.18)
    assert out["tpot_p99_s"][0] == pytest.approx(0.26) and out["ttft_p99_s"][0] == 3.0
    assert out["ttft_s"][0] == 2.0 and out["e2e_latency_s"][0] == pytest.approx(2.0 + 10 * 0.18)
    # one token a step (no speculation): prompt 1's (2 + 0.8) / 10
    plain = with_burst(lambda p: 0.5 + 0.0 * np.asarray(p), np.array([0.5]), np.array([0.1]), first, 1.0,
                       np.array([3.0]), np.array([11.0]), 1.0)
    assert plain["tpot_p99_s"][0] == pytest.approx(0.28)


def test_num_prompts_with_disaggregated_pools_is_refused():
    from llmsim.spec.errors import SpecError

    with pytest.raises(SpecError, match="co-located prefill and decode"):
        _row("workload.input_len=1000", "workload.concurrency=16", "workload.num_prompts=160",
             "serving.disaggregation={prefill: {tp: 1}, decode: {tp: 1}}")


def test_a_sweep_row_above_num_prompts_is_infeasible(tmp_path):
    import pandas as pd
    import yaml
    from typer.testing import CliRunner

    from llmsim.cli import app

    spec = {"base": {"model": "llama3-8b", "system": {"accelerator": "h100-sxm", "num_devices": 8,
                                                     "network": "dgx-h100"},
                     "parallel": {"tp": 1, "pp": 1},
                     "workload": {"mode": "serving", "input_len": 1000, "output_len": 100, "concurrency": 64,
                                  "num_prompts": 1000}},
            "grid": {"workload.concurrency": [64, 2048]}, "keep": "all"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "r.csv"
    result = CliRunner().invoke(app, ["sweep", str(tmp_path / "s.yaml"), "-o", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out).set_index("concurrency")
    assert pd.isna(rows.loc[64, "infeasible_reason"])
    assert "num_prompts 1,000 is fewer than the concurrency" in rows.loc[2048, "infeasible_reason"]


def test_clashing_load_flags_blame_the_load_flag():
    from typer.testing import CliRunner

    from llmsim.cli import app

    result = CliRunner().invoke(app, ["estimate", "--model", "llama3-8b", "--input-len", "1000", "--output-len", "100",
                                      "--mode", "serving", "--concurrency", "8", "--request-rate", "2"])
    # the error names the last of the two clashing flags (cli.main prints it as one line, exit 2)
    assert str(result.exception).startswith("--request-rate 2.0: workload: serving needs one of concurrency")
