"""Serving engine profiles: each engine's scheduler defaults for the accelerator (spec/engines.py)."""

import numpy as np
import pytest
from conftest import run_cli

from llmsim.study import records as est


def _serving(registry, accelerator, engine, extra=()):
    sc = est.load(None, registry, ["model=llama3-8b", f"system.accelerator={accelerator}", "system.num_devices=1",
                                   "parallel.tp=1", "parallel.pp=1", "workload.mode=serving",
                                   "workload.concurrency=8", "workload.input_len=512", "workload.output_len=128",
                                   f"serving.engine={engine}", *extra])
    s = sc.serving
    return s.max_batch_tokens, s.max_seqs, s.kv_block_tokens


@pytest.mark.parametrize(("accelerator", "engine", "expected"), [
    # vLLM V1 (arg_utils.py): 70 GiB or more and not an A100: 8,192 tokens, 1,024 sequences; blocks of 16.
    # The H100 SXM's 80 GB are 74.5 GiB; the A100 80GB is excluded by name
    ("h100-sxm", "vllm", (8192, 1024, 16)),
    ("a100-sxm-80gb", "vllm", (2048, 256, 16)),
    # SGLang 0.5.2: chunked prefill 8,192 under 160 GiB (H100's 76,294 MiB), 16,384 above (B200's 192 GB =
    # 183,105 MiB); page size 1; running requests capped by the 4,096-request pool
    ("h100-sxm", "sglang", (8192, 4096, 1)),
    ("b200", "sglang", (16384, 4096, 1)),
    # TensorRT-LLM: max_num_tokens 8,192, max_batch_size 2,048, tokens_per_block 32, on any GPU
    ("h100-sxm", "tensorrt-llm", (8192, 2048, 32)),
    # generic: llmsim's earlier defaults
    ("h100-sxm", "generic", (8192, 256, 16)),
])
def test_each_engine_fills_its_documented_defaults(registry, accelerator, engine, expected):
    assert _serving(registry, accelerator, engine) == expected


def test_a_value_the_scenario_sets_wins(registry):
    assert _serving(registry, "h100-sxm", "vllm", ["serving.max_seqs=64"]) == (8192, 64, 16)


def test_more_running_requests_past_generic_saturation_serve_more(registry):
    # at 512 requests generic's 256 running requests queue the rest (TTFT grows by the queue), where
    # vLLM's 1,024 run them all: more throughput, no queue
    def row(engine):
        return est.record(est.load(None, registry, [
            "model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=8",
            "parallel.tp=8", "parallel.pp=1", "workload.mode=serving", "workload.precision=fp8",
            "workload.input_len=1024", "workload.output_len=256", "workload.concurrency=512",
            f"serving.engine={engine}"]))
    generic, vllm = row("generic"), row("vllm")
    assert generic["queueing_delay_s"] > 0 and vllm["queueing_delay_s"] == 0
    assert vllm["throughput_tokens_per_s_per_device"] > generic["throughput_tokens_per_s_per_device"]
    assert (generic["engine"], vllm["engine"]) == ("generic", "vllm")


def test_an_unknown_engine_is_refused_in_one_line():
    r = run_cli("estimate", "--mode", "serving", "--concurrency", "8", "--input-len", "512", "--output-len", "128",
                "--set", "serving.engine=triton")
    assert r.returncode == 2 and "serving.engine" in r.stderr and "tensorrt-llm" in r.stderr
    assert "Traceback" not in r.stderr


def test_tensorrt_llm_runs_whole_prompts_and_refuses_longer_ones_than_a_step(registry):
    # TensorRT-LLM's LLM API: enable_chunked_prefill False; a prompt then runs in one step, so one
    # longer than max_num_tokens (8,192) cannot be served
    sc = est.load(None, registry, ["model=llama3-8b", "system.num_devices=1", "parallel.tp=1", "parallel.pp=1",
                                   "workload.mode=serving", "workload.input_len=512", "workload.output_len=128",
                                   "workload.concurrency=8", "serving.engine=tensorrt-llm"])
    assert sc.serving.chunked_prefill is False
    r = run_cli("estimate", "--mode", "serving", "--concurrency", "8", "--input-len", "10000", "--output-len", "128",
                "--set", "serving.engine=tensorrt-llm")
    assert r.returncode == 2 and "exceeds the step budget (8,192) with chunked prefill off" in r.stderr
    r = run_cli("estimate", "--mode", "serving", "--concurrency", "8", "--input-len", "10000", "--output-len", "128",
                "--set", "serving.engine=tensorrt-llm", "--set", "serving.chunked_prefill=true")
    assert r.returncode == 0, r.stderr


def test_each_engine_gives_its_kv_cache_its_documented_share_of_memory():
    # 80 GB device, 35 GB of weights, 1 GB workspace, 2 GB reserve: llmsim's own accounting leaves 42 GB
    from llmsim.engine.kv_capacity import kv_budget

    gib = 2**30
    args = (80e9, 35e9, 1e9, 2e9, 2)
    assert kv_budget("generic", *args) == pytest.approx(42e9)
    assert kv_budget("tensorrt-llm", *args) == pytest.approx(0.9 * 42e9)  # free_gpu_memory_fraction 0.9
    assert kv_budget("vllm", *args) == pytest.approx(42e9 - 8e9)  # gpu_memory_utilization 0.9 of 80 GB
    # SGLang 0.5.2 under 90 GB: the device less (9.5 + tp x pp / 2) GiB = 10.5 GiB, less the weights
    assert kv_budget("sglang", *args) == pytest.approx(80e9 - 10.5 * gib - 35e9)
    assert kv_budget("sglang", 192e9, 35e9, 1e9, 2e9, 8) == pytest.approx(192e9 - 32 * gib - 35e9)  # over 160 GB


def test_tensorrt_llm_runs_fewer_requests_at_once_than_llmsims_own_accounting(registry):
    # NIM's Llama 3.3 70B FP8 on 2 H100 (5,000 in / 500 out) saturates at ~86 running requests
    # (docs/research/serving_records.yaml: ~920 tokens/s x 93 ms); 90% of the KV memory llmsim counts
    from llmsim.engine.kv_capacity import running_limit
    from llmsim.engine.split import resolve_split

    base = ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=2",
            "parallel.tp=2", "parallel.pp=1", "workload.mode=serving", "workload.precision=fp8",
            "workload.kv_precision=fp8", "workload.input_len=5000", "workload.output_len=500",
            "workload.concurrency=100"]
    limits = {}
    for engine in ("generic", "tensorrt-llm"):
        sc = est.load(None, registry, base + [f"serving.engine={engine}", "serving.max_seqs=256",
                                              "serving.max_batch_tokens=8192", "serving.kv_block_tokens=32"])
        sp = resolve_split(sc).as_column()
        limits[engine] = int(running_limit(sc, sp, np.array([5000.0]), np.array([500.0]))["max_running"][0])
    assert limits["tensorrt-llm"] == pytest.approx(0.9 * limits["generic"], abs=1)
    assert 80 <= limits["tensorrt-llm"] <= 92


def test_whole_prompts_that_cannot_share_a_step_queue_for_prefill(registry):
    # TensorRT-LLM (chunked prefill off, 8,192 tokens a step): prompts of 5,000 tokens run one a step, so a
    # prompt arriving while another prefills waits: an M/D/1 queue with the Pollaczek-Khinchine mean wait
    # W = rho S / (2 (1 - rho)), rho = X S, S the prefill step. Alone, nothing waits.
    from test_serving import _columns

    from llmsim.engine.serving import whole_prompt_rate

    # the solver: 10 requests each busy 2 s, service 0.1 s: X = 10 / (W + 2) with rho = 0.1 X gives
    # X = 4.8835 requests/s (rho 0.488, W = 0.0488 x 0.1 / (2 x 0.512) = 0.0477 s: 4.8835 x 2.0477 = 10.00)
    x = float(whole_prompt_rate(np.array(10.0), np.array(2.0), np.array(0.1))[()])
    rho = 0.1 * x
    assert x * (rho * 0.1 / (2 * (1 - rho)) + 2.0) == pytest.approx(10.0, rel=1e-9)
    assert float(whole_prompt_rate(np.array(1.0), np.array(2.0), np.array(0.1))[()]) == pytest.approx(0.5)

    base = ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=2",
            "parallel.tp=2", "parallel.pp=1", "workload.mode=serving", "workload.precision=fp8",
            "workload.kv_precision=fp8", "workload.input_len=5000", "workload.output_len=500",
            "workload.concurrency=1", "serving.engine=tensorrt-llm"]
    conc = np.array([1, 5, 25, 50])
    cols = _columns(est.load(None, registry, base), conc)
    assert (np.diff(cols["ttft_s"]) > 0).all()
    assert cols["requests_per_s"] * cols["e2e_latency_s"] == pytest.approx(conc)
    # NVIDIA NIM on TensorRT-LLM measured TTFT 0.41, 0.55, 0.69, 0.83 s at these loads
    # (docs/research/serving_records.yaml); the queue keeps the model within 15% of each
    assert cols["ttft_s"] == pytest.approx([0.40677, 0.5467, 0.68869, 0.83451], rel=0.15)
