"""llmsim's per-operator figures held against the kernels measured on an H200 (benchmarks/kernels/h200/).

    python benchmarks/kernels/compare_ops.py

Prints one markdown table: memory bandwidth, fused attention, launch costs and one routed-expert MLP forward
(Qwen3-30B-A3B's sizes), each with what llmsim assumes for the h200-sxm preset and the measured/llmsim ratio.
GEMMs by shape have their own script (fit_gemm_shape.py). docs/methodology.md section 2.2 quotes the table.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from llmsim.engine import calibration as cal
from llmsim.engine.compute import attention_rates, kernel_time, layer_ops
from llmsim.spec.convert import accelerator_values
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

H200 = Path(__file__).parent / "h200"
MOE_OPS = ("router", "router_topk", "permute", "experts_up", "experts_act", "experts_down", "unpermute")


def rows() -> list[tuple[str, str, str, float]]:
    reg = PresetRegistry()
    acc = accelerator_values(reg.get("accelerators", "h200-sxm"))
    h100 = accelerator_values(reg.get("accelerators", "h100-sxm"))
    out = []
    mem = pd.read_csv(H200 / "memory.csv")
    copy = mem[mem["op"] == "copy"]["gb_per_s"].max() * 1e9
    bw = acc.hbm_bw_bytes_per_s * cal.HBM_EFFICIENCY
    out.append(("device copy, largest (2.8 GB read + written)", f"{copy / 1e12:.2f} TB/s",
                f"{bw / 1e12:.2f} TB/s (4.8 x HBM_EFFICIENCY)", copy / bw))
    att = pd.read_csv(H200 / "attention.csv")
    for backend, key in (("cudnn", "cudnn"), ("flash", "fa2")):
        for i, pas in enumerate(("fwd", "bwd")):
            meas = float(att[(att["backend"] == backend) & (att["pass"] == pas) & (att["seq"] == 16384)]["tflops"].iloc[0])
            ref = attention_rates(h100, key)[i] / 1e12  # the H100 preset's measurement: the same GH100 SMs
            out.append((f"attention {backend} {pas}, 16k causal, hdim 128", f"{meas:.0f} TFLOP/s",
                        f"{ref:.0f} TFLOP/s (h100-sxm preset, {key}; h200-sxm has none)", meas / ref))
    launch = pd.read_csv(H200 / "launch.csv").set_index(["mode", "elements"])["per_kernel_s"]
    out.append(("eager launch, back to back (PyTorch add)", f"{launch[('eager', 1024)] * 1e6:.1f} us",
                f"{cal.KERNEL_OVERHEAD_S * 1e6:.2f} us (KERNEL_OVERHEAD_S, training)",
                launch[("eager", 1024)] / cal.KERNEL_OVERHEAD_S))
    out.append(("graph node, back to back (same kernel)", f"{launch[('graph', 1024)] * 1e6:.2f} us",
                f"{cal.INFERENCE_KERNEL_OVERHEAD_S * 1e6:.2f} us (INFERENCE_KERNEL_OVERHEAD_S)",
                launch[("graph", 1024)] / cal.INFERENCE_KERNEL_OVERHEAD_S))
    layer = pd.read_csv(H200 / "moe_layer.csv")
    m = est.load(None, reg, ["model=qwen3-30b-a3b", "system.accelerator=h200-sxm"]).model
    for tokens in (1024, 4096, 16384):
        ops = [o for o in layer_ops(m, 1, tokens, 1, 1, False, "bf16", True) if o.name in MOE_OPS]
        pred = sum(kernel_time(o, acc, "bf16") for o in ops)
        sel = layer[(layer["model"] == "qwen3-30b-a3b") & (layer["tokens"] == tokens)].set_index("mode")["gpu_s"]
        out.append((f"MoE MLP forward, {tokens:,} tokens, graph (eager {sel['eager'] * 1e3:.2f} ms)",
                    f"{sel['graph'] * 1e3:.2f} ms", f"{pred * 1e3:.2f} ms ({len(ops)} ops, training kernels)",
                    sel["graph"] / pred))
    return out


def main() -> None:
    print("| kernel | measured (H200) | llmsim | measured / llmsim |")
    print("| --- | --- | --- | ---: |")
    for name, meas, ref, ratio in rows():
        print(f"| {name} | {meas} | {ref} | {ratio:.2f} |")
    print("\nThe MoE MLP ran with routing forced to balance (each expert 8 x tokens / 128 rows); llmsim sizes the"
          f" busiest expert {cal.MOE_LOAD_IMBALANCE}x the mean (MOE_LOAD_IMBALANCE) and reads PyTorch's eager"
          " permute and SwiGLU as single fused kernels.")


if __name__ == "__main__":
    main()
