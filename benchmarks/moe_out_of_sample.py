"""MoE training runs outside the calibration set: NVIDIA's Megatron-Bridge performance tables against
`llmsim estimate`, with the expert all-to-all exposed and overlapped.

    python benchmarks/moe_out_of_sample.py

The tables (NVIDIA/Megatron-Bridge docs/performance-summary.md, 25.11 container, and
docs/performance-summary-archive.md at commit 0a25f911 for 25.09 and 26.02) force-balance expert load and
run dropless; they do not say whether the all-to-all overlaps (`--overlap-moe-expert-parallel-comm`), so
both are shown. None of these rows is in the calibration set: they are out of sample.
"""

from __future__ import annotations

from llmsim.engine.training import estimate_training
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

# (label, model, accelerator, network, devices, precision, gbs, mbs, tp, pp, vp, ep, measured tokens/s/GPU,
#  table)
RUNS = [
    ("Qwen3-235B-A22B, 256 H100", "qwen3-235b-a22b", "h100-sxm", "dgx-h100", 256, "fp8", 2048, 1, 2, 8, 4, 32,
     1575, "25.11"),
    ("DeepSeek-V3, 1,024 H100", "deepseek-v3", "h100-sxm", "dgx-h100", 1024, "bf16", 8192, 1, 2, 8, 4, 64,
     1297, "25.09"),
    ("GPT-OSS 120B, 64 H100", "gpt-oss-120b", "h100-sxm", "dgx-h100", 64, "bf16", 1280, 1, 1, 4, 1, 8,
     5993, "26.02"),
    ("Qwen3-235B-A22B, 256 B200", "qwen3-235b-a22b", "b200", "dgx-b200", 256, "fp8", 8192, 1, 1, 8, 1, 8,
     3805, "26.02"),
    ("DeepSeek-V3, 256 B200", "deepseek-v3", "b200", "dgx-b200", 256, "fp8", 4096, 1, 1, 16, 1, 8,
     2689, "26.02"),
]


def main() -> None:
    registry = PresetRegistry()
    print("| run | table | measured tokens/s/GPU | exposed all-to-all | overlapped (batch) | fits |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, model, acc, net, n, prec, gbs, mbs, tp, pp, vp, ep, measured, table in RUNS:
        cells = []
        for overlap in ("none", "batch"):
            sc = est.load(None, registry, [
                f"model={model}", f"system.accelerator={acc}", f"system.network={net}", f"system.num_devices={n}",
                f"workload.precision={prec}", "workload.seq_len=4096", f"workload.global_batch_size={gbs}",
                f"parallel.microbatch_size={mbs}", f"parallel.tp={tp}", f"parallel.pp={pp}",
                f"parallel.virtual_stages={vp}", f"parallel.ep={ep}", f"parallel.moe_comm_overlap={overlap}"])
            out = estimate_training(sc)
            got = out["tokens_per_s_per_device"]
            cells.append(f"{got:,.0f} ({100 * (got / measured - 1):+.0f}%)")
        print(f"| {label} | {table} | {measured:,} | {cells[0]} | {cells[1]} | {'yes' if out['fits_in_memory'] else 'no'} |")


if __name__ == "__main__":
    main()
