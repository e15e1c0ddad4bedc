"""MoE training runs outside the calibration set: NVIDIA's Megatron-Bridge performance tables and the
Megatron Core MoE report's Table 11 against `llmsim estimate`, each run with its own settings.

    python benchmarks/moe_out_of_sample.py

The tables (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, 25.11 container, and
docs/performance-summary-archive.md at commit 0a25f911 for 25.09 and 26.02; the 26.08 container's rows from
docs/performance-summary.md at 067f987d, their recipes at tag v0.6.0 = 51885cf13) force-balance expert load and
run dropless. Each run's settings come from `scripts/performance/` of the release that matches its
container (25.09: v0.1.0rc3 = bf71eba0, `configs/deepseek/deepseek_v3_llm_pretrain.yaml`; 25.11: v0.2.0 =
7af9601c, `configs/qwen3/workload_base_configs.py`; 26.02: v0.3.0 = 21b02e0c,
`configs/{gpt_oss,qwen,deepseek}/*workload_base_configs.py`): recomputation, whether the expert
all-to-all overlaps with the other microbatch's compute (`moe_a2a_overlap` = Megatron-Core's
`overlap_moe_expert_parallel_comm`, llmsim's `moe_comm_overlap: batch`), the precision-aware optimizer's
bf16 moments, the embedding and loss counted in the pipeline split, and Megatron-Core's
`recompute_modules` as `parallel.recompute: selective:<modules>`. The exposed all-to-all is shown beside,
for contrast. None of these rows is in the calibration set:
they are out of sample.
"""

from __future__ import annotations

from llmsim.engine.training import estimate_training
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est


def _row(model, acc, net, n, prec, tp, pp, ep, vp, mbs, gbs, recompute, extra=()):
    return [f"model={model}", f"system.accelerator={acc}", f"system.network={net}", f"system.num_devices={n}",
            f"workload.precision={prec}", f"workload.global_batch_size={gbs}", f"parallel.tp={tp}",
            f"parallel.pp={pp}", f"parallel.ep={ep}", f"parallel.virtual_stages={vp}",
            f"parallel.microbatch_size={mbs}", f"parallel.recompute={recompute}", *extra]


DSV3, QWEN3, BF16M = "deepseek-v3", "qwen3-235b-a22b", ["parallel.optimizer_states=bf16"]
SPLIT_HEAD = ["parallel.pipeline_embedding_stage=true", "parallel.pipeline_loss_stage=true"]
# kernels launched from PyTorch eager (graphs over the router alone count as none: its two kernels); graphs
# over each layer's attention and router (Transformer Engine, Megatron-Core's dropless-MoE scope)
EAGER, ATTN_GRAPHS = ["parallel.cuda_graphs=none"], ["parallel.cuda_graphs=attention"]
# (label, table, measured tokens/s/GPU, --set overrides, the all-to-all overlap the run used, its settings)
RUNS = [
    ("Qwen3-235B-A22B, 256 H100, FP8-CS", "25.11", 1575,
     _row(QWEN3, "h100-sxm", "dgx-h100", 256, "fp8", 2, 8, 32, 4, 1, 2048, "none", SPLIT_HEAD),
     "batch", "no recompute; moe_a2a_overlap; embedding and loss in the pipeline split"),
    ("DeepSeek-V3, 1,024 H100, FP8 (table: no precision column)", "25.09", 1297,
     _row(DSV3, "h100-sxm", "dgx-h100", 1024, "fp8", 2, 8, 64, 4, 1, 8192, "selective:mla_up_proj+mlp", BF16M),
     "batch", "recompute mla_up_proj, mlp; DeepEP; a2a overlap; bf16 moments"),
    ("GPT-OSS 120B, 64 H100, BF16", "26.02", 5993,
     _row("gpt-oss-120b", "h100-sxm", "dgx-h100", 64, "bf16", 1, 4, 8, 1, 1, 1280, "selective:layernorm+moe_act",
          ["parallel.sequence_parallel=false"]),
     "none", "recompute layernorm, moe_act; alltoall dispatcher, no overlap"),
    ("Qwen3-235B-A22B, 256 B200, MXFP8", "26.02", 3805,
     _row(QWEN3, "b200", "dgx-b200", 256, "fp8", 1, 8, 8, 1, 1, 8192, "none", SPLIT_HEAD),
     "none", "no recompute; alltoall dispatcher, no overlap; embedding and loss in the pipeline split"),
    ("DeepSeek-V3, 256 B200, MXFP8", "26.02", 2689,
     _row(DSV3, "b200", "dgx-b200", 256, "fp8", 1, 16, 8, 1, 1, 4096, "selective:mla_up_proj", BF16M),
     "none", "recompute mla_up_proj; HybridEP, no overlap; bf16 moments"),
    # 25.11 (v0.2.0 = 7af9601c, configs/qwen3/workload_base_configs.py): the alltoall dispatcher (HybridEP on
    # GB), Transformer Engine graphs over the router only or none, the op fuser off; the table's MBS and VP
    ("Qwen3-30B-A3B, 8 B200, MXFP8", "25.11", 9299,
     _row("qwen3-30b-a3b", "b200", "dgx-b200", 8, "fp8", 1, 1, 8, 1, 1, 512, "none", EAGER),
     "none", "no recompute; alltoall, no overlap; graphs over the router only"),
    ("Qwen3-30B-A3B, 16 H100, FP8-CS", "25.11", 5275,
     _row("qwen3-30b-a3b", "h100-sxm", "dgx-h100", 16, "fp8", 1, 2, 8, 24, 2, 512, "none", EAGER),
     "batch", "no recompute; alltoall, a2a overlap; no CUDA graphs"),
    ("Qwen3-30B-A3B, 8 GB200, MXFP8", "25.11", 23766,
     _row("qwen3-30b-a3b", "gb200", "gb200-nvl72", 8, "fp8", 1, 1, 8, 1, 4, 512, "none", EAGER),
     "none", "no recompute; HybridEP, no overlap; graphs over the router only"),
    # 26.08 (v0.6.0 = 51885cf13, src/megatron/bridge/perf_recipes/<family>/<gpu>/): every row one CUDA graph of
    # the whole iteration, HybridEP with the all-to-all under the other microbatch, fused grouped MLP (CuTeDSL),
    # MXFP8 with FP8 parameter gather, force-balanced and dropless
    ("DeepSeek-V3, 256 GB300, MXFP8", "26.08", 6288,
     _row(DSV3, "gb300", "gb300-nvl72", 256, "fp8", 1, 2, 32, 8, 1, 4096, "none", BF16M),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap; bf16 moments; MTP on (not modelled)"),
    ("DeepSeek-V3, 256 GB200, MXFP8", "26.08", 4912,
     _row(DSV3, "gb200", "gb200-nvl72", 256, "fp8", 1, 4, 64, 4, 1, 4096, "selective:mla_up_proj", BF16M),
     "batch", "recompute mla_up_proj; full-iteration graph; HybridEP, a2a overlap; bf16 moments"),
    ("GPT-OSS 120B, 64 GB300, MXFP8", "26.08", 33024,
     _row("gpt-oss-120b", "gb300", "gb300-nvl72", 64, "fp8", 1, 1, 16, 1, 4, 1280, "none"),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap"),
    ("GPT-OSS 120B, 64 GB200, MXFP8", "26.08", 28672,
     _row("gpt-oss-120b", "gb200", "gb200-nvl72", 64, "fp8", 1, 1, 64, 1, 4, 1280, "none"),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap"),
    ("Qwen3-30B-A3B, 8 GB300, MXFP8", "26.08", 44544,
     _row("qwen3-30b-a3b", "gb300", "gb300-nvl72", 8, "fp8", 1, 1, 8, 1, 8, 512, "none"),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap"),
    ("Qwen3-30B-A3B, 8 GB200, MXFP8", "26.08", 39936,
     _row("qwen3-30b-a3b", "gb200", "gb200-nvl72", 8, "fp8", 1, 1, 8, 1, 4, 512, "none"),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap"),
    ("Qwen3-235B-A22B, 256 GB300, MXFP8", "26.08", 8816,
     _row(QWEN3, "gb300", "gb300-nvl72", 256, "fp8", 1, 4, 32, 12, 2, 8192, "none", SPLIT_HEAD),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap; embedding and loss in the split"),
    ("Qwen3-235B-A22B, 256 GB200, MXFP8", "26.08", 7280,
     _row(QWEN3, "gb200", "gb200-nvl72", 256, "fp8", 1, 8, 32, 3, 1, 8192, "none", SPLIT_HEAD),
     "batch", "no recompute; full-iteration graph; HybridEP, a2a overlap; embedding and loss in the split"),
]


# NVIDIA's Megatron Core MoE report (arXiv 2603.07685, Table 11 with the options of Appendix B, Megatron
# Core v0.16, force-balanced, sequence 4,096): HybridEP on GB200/GB300, DeepEP on H100, CUDA graphs over
# attention and the router on Blackwell (cuda_graphs: attention; none on H100), MXFP8 on Blackwell and blockwise FP8 on H100. DeepSeek-V3 uses
# bf16 optimizer moments (precision-aware optimizer, sec. 4.1). The H100 DeepSeek-V3 row follows Table 17
# (TP2 PP8 and its four recompute modules; Table 20 gives PP4).
REPORT = [
    ("DeepSeek-V3, 256 GB300, MXFP8", 4730, _row(DSV3, "gb300", "gb300-nvl72", 256, "fp8", 1, 4, 64, 4, 1, 8192,
                                                  "none", BF16M), "batch"),
    ("DeepSeek-V3, 256 GB200, MXFP8", 4020, _row(DSV3, "gb200", "gb200-nvl72", 256, "fp8", 1, 4, 64, 4, 1, 8192,
                                                  "selective:mlp", BF16M), "none"),
    ("DeepSeek-V3, 256 GB200, BF16", 3298, _row(DSV3, "gb200", "gb200-nvl72", 256, "bf16", 1, 8, 32, 4, 1, 4096,
                                                 "selective:mlp", BF16M), "none"),
    ("DeepSeek-V3, 1,024 H100, FP8 blockwise", 1412,
     _row(DSV3, "h100-sxm", "dgx-h100", 1024, "fp8", 2, 8, 64, 4, 1, 8192,
          "selective:layernorm+mla_up_proj+moe_act+mlp", BF16M), "batch"),
    ("Qwen3-235B-A22B, 256 GB300, MXFP8", 6583, _row(QWEN3, "gb300", "gb300-nvl72", 256, "fp8", 1, 4, 64, 6, 2, 3072,
                                                      "none"), "none"),
    ("Qwen3-235B-A22B, 256 GB200, MXFP8", 6212, _row(QWEN3, "gb200", "gb200-nvl72", 256, "fp8", 1, 4, 64, 6, 3, 3072,
                                                      "selective:layernorm+moe_act"), "batch"),
    ("Qwen3-235B-A22B, 256 GB200, BF16", 5100, _row(QWEN3, "gb200", "gb200-nvl72", 256, "bf16", 1, 4, 32, 12, 1, 8192,
                                                     "selective:layernorm+moe_act"), "batch"),
    ("Qwen3-235B-A22B, 256 H100, BF16", 2132, _row(QWEN3, "h100-sxm", "dgx-h100", 256, "bf16", 2, 8, 32, 4, 1, 2048,
                                                    "selective:layernorm+moe_act"), "batch"),
]


def report_table(registry) -> None:
    print("\n| run (Megatron Core report, Table 11) | measured tokens/s/GPU | llmsim | fits |")
    print("| --- | --- | --- | --- |")
    for label, measured, sets, overlap in REPORT:
        graphs = EAGER if "system.accelerator=h100-sxm" in sets else ATTN_GRAPHS  # graphs on Blackwell only
        sc = est.load(None, registry, sets + graphs + ["workload.seq_len=4096", f"parallel.moe_comm_overlap={overlap}"])
        out = estimate_training(sc)
        got = out["tokens_per_s_per_device"]
        print(f"| {label} | {measured:,} | {got:,.0f} ({100 * (got / measured - 1):+.0f}%) "
              f"| {'yes' if out['fits_in_memory'] else 'no'} ({out['memory_per_device_gb']:.0f} GB) |")


def main() -> None:
    registry = PresetRegistry()
    print("| run | table | measured tokens/s/GPU | llmsim, the run's settings | all-to-all exposed | fits | settings |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, table, measured, sets, overlap, said in RUNS:
        cells, fits = [], False
        for mode in (overlap, "none"):
            sc = est.load(None, registry, sets + ["workload.seq_len=4096", f"parallel.moe_comm_overlap={mode}"])
            out = estimate_training(sc)
            got = out["tokens_per_s_per_device"]
            cells.append(f"{got:,.0f} ({100 * (got / measured - 1):+.0f}%)")
            if mode == overlap:
                fits = out["fits_in_memory"]
        exposed = cells[1] if overlap != "none" else "(same)"
        print(f"| {label} | {table} | {measured:,} | {cells[0]} | {exposed} | {'yes' if fits else 'no'} | {said} |")
    report_table(registry)


if __name__ == "__main__":
    main()
