"""Published engine sweeps of the step-token budget and of the running batch, held against llmsim (issue 36,
acceptance: "the step-token budget moves TTFT, TPOT and E2E as a published engine sweep of that budget does;
the running-batch growth of TPOT holds against a published decode sweep of a dense 30-70B model").

    python benchmarks/batching_sweeps.py

1. **Step-token budget** (`serving.max_batch_tokens`): TensorRT-LLM's performance-tuning guide, "Tuning Max
   Batch Size and Max Num Tokens" (TensorRT-LLM 0.16.0, https://nvidia.github.io/TensorRT-LLM/performance/
   performance-tuning-guide/tuning-max-batch-size-and-max-num-tokens.html): Llama-3.3-70B-Instruct BF16 on
   4 H100 SXM, TP4, 2,048 in / 2,048 out, 1,000 requests sent at once by `trtllm-bench throughput`,
   max_batch_size 512, context chunking on. Output tokens/s at max_num_tokens 2,048 / 8,192 / 16,384, and at
   max_batch_size 64 / 512 / 2,048 (budget 8,192). The guide's TTFT and ITL come from `trtllm-bench
   latency` at batch 1, so they cannot show the budget; only throughput is compared. llmsim runs the same
   point as a closed loop of 1,000 requests, all sent at once (`workload.num_prompts` 1,000).
2. **Running batch** (static batches, `--mode inference`): AMD's ROCm blog "Best practices for competitive
   inference optimization on AMD Instinct MI300X GPUs" (2025-01-29, "vLLM Latency Benchmark Results";
   https://github.com/ROCm/rocm-blogs/blob/11235ac299a174b730d359a6b3d9eab85a520f59/blogs/
   artificial-intelligence/LLM_Inference/README.md): Llama-3.1-70B FP8, TP8, end-to-end latency of a static
   batch of 1-128 requests of 128 in / 2,048 out, on 8 H100 SXM (TensorRT-LLM 0.16.0, emulated static
   batching) and 8 MI300X (vLLM 0.6.7.dev, FP8 KV cache); and ROCm/vllm's dev-docker README "Latency
   Measurements" (vLLM 0.10.0, 8 MI300X, the same model; https://github.com/ROCm/vllm/blob/
   040de12d45c16d6de6ad386cc57dd68b8c5b805e/docs/dev-docker/README.md). Compared: the growth of the
   latency from batch 1 (llmsim's batch-1 decode is calibrated on batch-1 records; the growth is not).
"""

from __future__ import annotations

from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

# TensorRT-LLM 0.16.0 tuning guide: output tokens/s
BUDGET = {2048: 2474.26, 8192: 2466.79, 16384: 2461.02}  # max_num_tokens, max_batch_size 512
MAX_BATCH = {64: 1944.0, 512: 2467.0, 2048: 2044.0}  # max_batch_size, max_num_tokens 8,192
# end-to-end latency (ms) of a static batch, 128 in / 2,048 out
DECODE = {
    "H100, TensorRT-LLM 0.16": ("h100-sxm", "dgx-h100", None, {
        1: 20923, 2: 20352, 4: 21134, 8: 22102, 16: 23961, 32: 26543, 64: 29599, 128: 42398}),
    "MI300X, vLLM 0.6.7": ("mi300x", "mi300x-8", "fp8", {
        1: 19089, 2: 19610, 4: 19911, 8: 21859, 16: 23538, 32: 25343, 64: 32548, 128: 45216}),
    "MI300X, vLLM 0.10.0": ("mi300x", "mi300x-8", "fp8", {
        1: 17236, 2: 18057, 4: 18450, 8: 19677, 16: 22072, 32: 24932, 64: 33287, 128: 46484}),
}


def _row(registry, sets: list[str]) -> dict:
    return est.record(est.load(None, registry, sets))


def budget_rows(registry) -> list[dict]:
    base = ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=4",
            "parallel.tp=4", "parallel.pp=1", "workload.mode=serving", "workload.precision=bf16",
            "workload.input_len=2048", "workload.output_len=2048", "workload.concurrency=1000",
            "workload.num_prompts=1000", "serving.engine=tensorrt-llm", "serving.chunked_prefill=true"]
    out = []
    for knob, table, fixed in (("max_batch_tokens", BUDGET, "serving.max_seqs=512"),
                               ("max_seqs", MAX_BATCH, "serving.max_batch_tokens=8192")):
        for value, measured in table.items():
            r = _row(registry, [*base, fixed, f"serving.{knob}={value}"])
            out.append({"knob": knob, "value": value, "measured": measured,
                        "predicted": r["throughput_tokens_per_s"], "running": r["running_requests_per_replica"],
                        "ttft_s": r["ttft_s"], "tpot_s": r["tpot_s"]})
    return out


def decode_rows(registry) -> list[dict]:
    out = []
    for name, (acc, net, kv, table) in DECODE.items():
        for batch, measured_ms in table.items():
            r = _row(registry, ["model=llama3-70b", f"system.accelerator={acc}", f"system.network={net}",
                                "system.num_devices=8", "parallel.tp=8", "parallel.pp=1", "workload.mode=inference",
                                "workload.precision=fp8", *([f"workload.kv_precision={kv}"] if kv else []),
                                f"workload.batch_size={batch}", "workload.input_len=128",
                                "workload.output_len=2048"])
            out.append({"sweep": name, "batch": batch, "measured_s": measured_ms / 1e3,
                        "predicted_s": r["e2e_latency_s"]})
    return out


def main() -> None:
    registry = PresetRegistry()
    rows = budget_rows(registry)
    print("TensorRT-LLM 0.16, Llama-3.3-70B BF16, 4 x H100 TP4, 2,048/2,048, 1,000 requests at once")
    print("| setting | output tok/s measured | llmsim | llmsim / measured | change from the first, measured | llmsim |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for knob in ("max_batch_tokens", "max_seqs"):
        sel = [r for r in rows if r["knob"] == knob]
        for r in sel:
            print(f"| {knob} {r['value']:,} | {r['measured']:,.0f} | {r['predicted']:,.0f} | "
                  f"{r['predicted'] / r['measured']:.2f} | {100 * (r['measured'] / sel[0]['measured'] - 1):+.1f}% | "
                  f"{100 * (r['predicted'] / sel[0]['predicted'] - 1):+.1f}% |")
    print()
    print("Static batches, Llama-3.1-70B FP8 TP8, 128 in / 2,048 out: end-to-end latency over batch 1's")
    print("| sweep | batch | measured s | llmsim s | growth measured | growth llmsim | growth error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    errors = []
    for r in (d := decode_rows(registry)):
        first = next(x for x in d if x["sweep"] == r["sweep"] and x["batch"] == 1)
        g_m, g_p = r["measured_s"] / first["measured_s"], r["predicted_s"] / first["predicted_s"]
        if r["batch"] > 1:
            errors.append(g_p / g_m - 1)
        print(f"| {r['sweep']} | {r['batch']} | {r['measured_s']:.2f} | {r['predicted_s']:.2f} | {g_m:.2f} | "
              f"{g_p:.2f} | {100 * (g_p / g_m - 1):+.1f}% |")
    print(f"\ngrowth from batch 1, mean absolute error over {len(errors)} rows: "
          f"{100 * sum(abs(e) for e in errors) / len(errors):.1f}% (signed {100 * sum(errors) / len(errors):+.1f}%)")


if __name__ == "__main__":
    main()
