"""Serving engine profiles: each engine's scheduler defaults for the accelerator (spec/engines.py)."""

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
