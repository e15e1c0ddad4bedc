"""MoE training runs outside the calibration set: NVIDIA's Megatron-Bridge performance tables against
`llmsim estimate`, with each run's own settings from the performance scripts of its release.

    python benchmarks/moe_out_of_sample.py

The tables (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, 25.11 container, and
docs/performance-summary-archive.md at commit 0a25f911 for 25.09 and 26.02) force-balance expert load and
run dropless. Each run's settings come from `scripts/performance/` of the release that matches its
container (25.09: v0.1.0rc3 = bf71eba0, `configs/deepseek/deepseek_v3_llm_pretrain.yaml`; 25.11: v0.2.0 =
7af9601c, `configs/qwen3/workload_base_configs.py`; 26.02: v0.3.0 = 21b02e0c,
`configs/{gpt_oss,qwen,deepseek}/*workload_base_configs.py`): recomputation, whether the expert
all-to-all overlaps with the other microbatch's compute (`moe_a2a_overlap` = Megatron-Core's
`overlap_moe_expert_parallel_comm`, llmsim's `moe_comm_overlap: batch`), the precision-aware optimizer's
bf16 moments, and the embedding and loss counted in the pipeline split. llmsim's `selective` recomputes
attention's core (Korthikanti et al.); Megatron-Core's `recompute_modules` (`mla_up_proj`, `mlp`,
`moe_act`, `layernorm`) recompute other parts, so where a run names modules the nearest knob is used and
said. The exposed all-to-all is shown beside, for contrast. None of these rows is in the calibration set:
they are out of sample.
"""

from __future__ import annotations

from llmsim.engine.training import estimate_training
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

COMMON = ["workload.seq_len=4096", "parallel.microbatch_size=1"]
# (label, table, measured tokens/s/GPU, --set overrides, the all-to-all overlap the run used, its settings)
RUNS = [
    ("Qwen3-235B-A22B, 256 H100, FP8-CS", "25.11", 1575,
     ["model=qwen3-235b-a22b", "system.accelerator=h100-sxm", "system.network=dgx-h100",
      "system.num_devices=256", "workload.precision=fp8", "workload.global_batch_size=2048", "parallel.tp=2",
      "parallel.pp=8", "parallel.virtual_stages=4", "parallel.ep=32", "parallel.recompute=none",
      "parallel.pipeline_embedding_stage=true", "parallel.pipeline_loss_stage=true"],
     "batch", "no recompute; moe_a2a_overlap; embedding and loss in the pipeline split"),
    ("DeepSeek-V3, 1,024 H100, FP8 (table: no precision column)", "25.09", 1297,
     ["model=deepseek-v3", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=1024",
      "workload.precision=fp8", "workload.global_batch_size=8192", "parallel.tp=2", "parallel.pp=8",
      "parallel.virtual_stages=4", "parallel.ep=64", "parallel.recompute=selective",
      "parallel.optimizer_states=bf16"],
     "batch", "recompute mla_up_proj, mlp (llmsim: selective); DeepEP; a2a overlap; bf16 moments"),
    ("GPT-OSS 120B, 64 H100, BF16", "26.02", 5993,
     ["model=gpt-oss-120b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=64",
      "workload.precision=bf16", "workload.global_batch_size=1280", "parallel.tp=1", "parallel.pp=4",
      "parallel.ep=8", "parallel.recompute=selective", "parallel.sequence_parallel=false"],
     "none", "recompute layernorm, moe_act (llmsim: selective); alltoall dispatcher, no overlap"),
    ("Qwen3-235B-A22B, 256 B200, MXFP8", "26.02", 3805,
     ["model=qwen3-235b-a22b", "system.accelerator=b200", "system.network=dgx-b200", "system.num_devices=256",
      "workload.precision=fp8", "workload.global_batch_size=8192", "parallel.tp=1", "parallel.pp=8",
      "parallel.ep=8", "parallel.recompute=none", "parallel.pipeline_embedding_stage=true",
      "parallel.pipeline_loss_stage=true"],
     "none", "no recompute; alltoall dispatcher, no overlap; embedding and loss in the pipeline split"),
    ("DeepSeek-V3, 256 B200, MXFP8", "26.02", 2689,
     ["model=deepseek-v3", "system.accelerator=b200", "system.network=dgx-b200", "system.num_devices=256",
      "workload.precision=fp8", "workload.global_batch_size=4096", "parallel.tp=1", "parallel.pp=16",
      "parallel.ep=8", "parallel.recompute=selective", "parallel.optimizer_states=bf16"],
     "none", "recompute mla_up_proj (llmsim: selective); HybridEP, no overlap; bf16 moments"),
]


def main() -> None:
    registry = PresetRegistry()
    print("| run | table | measured tokens/s/GPU | llmsim, the run's settings | all-to-all exposed | fits | settings |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, table, measured, sets, overlap, said in RUNS:
        cells, fits = [], False
        for mode in (overlap, "none"):
            sc = est.load(None, registry, sets + COMMON + [f"parallel.moe_comm_overlap={mode}"])
            out = estimate_training(sc)
            got = out["tokens_per_s_per_device"]
            cells.append(f"{got:,.0f} ({100 * (got / measured - 1):+.0f}%)")
            if mode == overlap:
                fits = out["fits_in_memory"]
        exposed = cells[1] if overlap != "none" else "(same)"
        print(f"| {label} | {table} | {measured:,} | {cells[0]} | {exposed} | {'yes' if fits else 'no'} | {said} |")


if __name__ == "__main__":
    main()
