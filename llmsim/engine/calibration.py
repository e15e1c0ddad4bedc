"""The few global calibration factors and documented defaults of the model.

Each one is global (never per validation case), named, and justified here and in
docs/methodology.md. Two kinds:
- ``FITTED``: constants no measurement gives, declared here with their physical bounds and read from
  ``llmsim/data/calibration.json``, which ``llmsim calibrate`` writes (least squares over the calibration
  set, with provenance and cross-validated error). Nobody edits a fitted value by hand.
- every other constant below is read from a datasheet, a paper or a profile, cited beside it.
"""

import json
from dataclasses import dataclass
from pathlib import Path

CALIBRATION_FILE = Path(__file__).resolve().parent.parent / "data" / "calibration.json"


@dataclass(frozen=True)
class Fitted:
    low: float
    high: float
    start: float  # where every fit starts (the hand-set value of earlier versions), so that it is repeatable
    why: str


FITTED = {
    # Fraction of a device's best-shape matmul throughput (MAMF, measured_matmul_tflops) that the GEMM
    # kernels of a real step sustain: MAMF is the best of a shape sweep at a warm, boosted clock, while a
    # step runs fixed shapes back to back at power-capped clocks with launch gaps. Bounds: Megatron-LM
    # reports GEMMs at 50-75% of A100 peak (Narayanan et al. 2021, sec. 5.1), i.e. ~0.58-0.86 of its
    # MAMF; 1.0 is MAMF itself.
    "KERNEL_EFFICIENCY": Fitted(0.5, 1.0, 0.8, "sustained fraction of MAMF in a training or serving step"),
    # Fixed cost of each GPU kernel beyond its roofline time: launch, ramp-up and the tail of the last
    # wave. Bounds: CUDA launch latency is ~2-5 us and back-to-back kernels leave ~1-3 us gaps (NVIDIA
    # CUDA C++ Best Practices Guide, "kernel launch overhead"), so 1-20 us per kernel.
    "KERNEL_OVERHEAD_S": Fitted(1e-6, 20e-6, 5e-6, "fixed time per kernel: launch, ramp-up, tail wave"),
    # The same fixed cost per kernel in a serving engine's step, fitted apart from training's: a training
    # step queues long kernels back to back while the host runs ahead, so only the device-side gap between
    # kernels shows; a decode step runs kernels of a few microseconds, whose ramp-up, tail wave and the
    # engine's per-step scheduling show in full even when the step replays a captured CUDA graph
    # (TensorRT-LLM, vLLM, SGLang). Bounds: a graph node launches in under 1 us (NVIDIA CUDA C++
    # Programming Guide, "CUDA Graphs"), stream launches take 2-5 us: 0.2-20 us.
    "INFERENCE_KERNEL_OVERHEAD_S": Fitted(0.2e-6, 20e-6, 5e-6, "fixed time per kernel in a serving engine"),
}


def fitted_values() -> dict[str, float]:
    """The fitted constants as the calibration file holds them."""
    return dict(json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))["constants"])


_FITTED_VALUES = fitted_values()
KERNEL_EFFICIENCY = _FITTED_VALUES["KERNEL_EFFICIENCY"]
KERNEL_OVERHEAD_S = _FITTED_VALUES["KERNEL_OVERHEAD_S"]
INFERENCE_KERNEL_OVERHEAD_S = _FITTED_VALUES["INFERENCE_KERNEL_OVERHEAD_S"]

# Matmul efficiency when a device preset has no MAMF figure: NVIDIA BF16 default of
# 0.75, from ml-engineering's MAMF table (H100 80%, B200 78%, GB200 73%; github.com/stas00/ml-engineering).
DEFAULT_MATMUL_FRACTION = 0.75

# GEMM time by shape (engine/gemm_shape.py). Output tile: 16 rows, the M of the smallest tensor-core MMA
# (mma.sync m16n8k16, PTX ISA "Matrix shape"; Marlin's m-blocks of 16 rows, vLLM
# csrc/quantization/gptq_marlin/gptq_marlin.cu thread_m_blocks = div_ceil(prob_m, 16)), by 128 columns (the N
# of CUTLASS's Hopper tiles, TileShape 128x128x64). Of 16-, 64- and 128-row tiles the 16-row one fits the H200
# kernels below best (dense bf16 mean error 7.8%, 8.4%, 8.7%) and the serving records of the calibration set
# too (in-sample 8.1%, 8.3%, 10.8%, INFERENCE_KERNEL_OVERHEAD_S refitted on them alone; a one-off experiment of
# 2026-11-28, docs/methodology.md section 2.2).
GEMM_TILE_ROWS = 16
GEMM_TILE_COLS = 128
# Fixed time of a GEMM kernel, and the power that blends its compute and memory times: least squares over
# 170 GEMMs (dense cuBLAS bf16 and fp8, grouped CUTLASS bf16; M 1-8192, N 768-28672, K 768-8192) timed back
# to back in replayed CUDA graphs on an H200, weights streamed from HBM: 3.98 us and 2.65, mean error 7.5-16%
# per kernel class
# (`python benchmarks/kernels/fit_gemm_shape.py`, data benchmarks/kernels/h200/).
GEMM_FIXED_S = 4.0e-6
# Host time of one kernel launched from PyTorch eager (the Python call, the dispatcher, the CUDA launch): 2,000
# element-wise adds back to back take 24.8 ms of wall time whatever their size (1 K or 1 M elements: 12.38 and
# 12.30 us a kernel), against 1.13-2.21 us a node when the same kernels replay from a CUDA graph (H200 SXM,
# PyTorch 2.11, `benchmarks/kernels/measure_gpu.py`, benchmarks/kernels/h200/launch.csv). A training step
# launched this way is host-bound wherever its kernels run shorter than their launches (engine/layer_times.py).
EAGER_LAUNCH_S = 12.4e-6
GEMM_BLEND_POWER = 2.6
# The weight gradient of a grouped expert GEMM reduces over each expert's M rows (its tokens): each N x K
# output tile's loads, stores and pipeline fill cost as much as this many rows of reduction. Least squares over
# the 56 grouped weight-gradient GEMMs (CUTLASS, 16-2048 tokens an expert) timed back to back on an H200 with the
# constants above: 230 rows, mean error 45% -> 13% (`python benchmarks/kernels/fit_gemm_shape.py`, data
# benchmarks/kernels/h200/backward_gemm.csv). Dense weight gradients (cuBLAS) fit 112 rows, 16.5% -> 11%, but the
# training records of the calibration set fit worse with it (in-sample 9.1% -> 9.3% with KERNEL_EFFICIENCY refitted
# on them alone; a one-off experiment of 2026-11-28), so they go without.
WGRAD_TILE_DEPTH = 230.0

# Achievable fraction of peak HBM bandwidth for streaming kernels: H100 coalesced streaming measured at
# ~2.8 of 3.35 TB/s, 84% (Nsight study, mikamirai.com/blog/gpu-memory-bandwidth).
HBM_EFFICIENCY = 0.85

# Achievable fraction of per-direction link bandwidth for ring collectives (nccl-tests busbw / line rate):
# NVLink 370/450 = 0.82 (nccl-tests #212), InfiniBand NDR 46.5/50 = 0.93 (nccl-tests #290).
SCALEUP_LINK_EFFICIENCY = 0.82
SCALEOUT_LINK_EFFICIENCY = 0.93
# All-to-all exchanges with every peer at once and reaches less of the line rate than a ring, in place of
# the ring efficiencies above. Inside a node (NVLink): nccl-tests alltoall busbw 320 of 450 GB/s on 8x H100
# (0.71) and 210 of 300 on 8x A100 (0.70) (NVIDIA GTC25 talk S72583, slide 13), 334.9 of 450 on 4x H100
# (0.74, NVIDIA/nccl#2169), and Megatron Core's EP8 dispatch of 7/8 x 470 MB in 1,265 us (0.72, arXiv
# 2603.07685 Table 7).
ALL_TO_ALL_SCALEUP_EFFICIENCY = 0.72
# Across nodes, each rank's NIC (the (n - k)/n of its buffer for other nodes): 0.74 in GTC25 S72583 (4 DGX,
# H100 and A100), 0.85 in nccl-tests#355 (2 DGX H100, 4 GiB), 0.81-0.94 (median 0.89) in Megatron Core's
# H100 dispatch and combine at EP16-64 (arXiv 2603.07685 Table 7): the median over the three sources,
# derived by `python benchmarks/all_to_all_efficiency.py` (docs/network-validation.md).
ALL_TO_ALL_SCALEOUT_EFFICIENCY = 0.85

# FlashAttention-2 backward does 5 matmuls against the forward's 2 (it recomputes the attention matrix):
# Dao 2023, arXiv 2307.08691, sec. 3.1.2.
FLASH_BWD_FLOPS_RATIO = 2.5

# Fused attention against the device's best GEMM when a preset has no measured attention throughput:
# FlashAttention-3 on H100 (hdim 128, causal, 16k) 616 TF forward / 561 TF backward against an MAMF of
# 794 TF = 0.78 / 0.71 (Shah et al. 2024, arXiv 2407.08608, fig. 5-6); FlashAttention-2 on A100 "up to
# 73% of peak" = 228 TF against an MAMF of 271 TF = 0.84 (Dao 2023, arXiv 2307.08691, abstract).
ATTENTION_MATMUL_RATIO = 0.75

# Sequence length at which a fused attention kernel reaches half its long-sequence throughput (too few
# query tiles to fill the SMs): FlashAttention-2 on H100, hdim 128, reaches 191/335 = 0.57 of its 16k
# forward speed at 512 and 298/335 = 0.89 at 2k, backward 214/322 and 291/322 (arXiv 2407.08608,
# fig. 5-6), i.e. s / (s + 280) within 5%.
ATTENTION_HALF_SEQ = 280

# Compute under an overlapped collective runs this much slower (engine/overlap.py): 18.9% on average (up
# to 40%) over GPT and Llama training on 4x A100, H100, MI210, MI250 (Lee et al., arXiv 2507.03114, 2025,
# abstract); NCCL takes 16 SMs of a DGX's GPUs for its channels (S. Jeaugey, NVIDIA/nccl#689) and the HBM
# bandwidth its copies need.
OVERLAP_COMPUTE_SLOWDOWN = 0.189

# Tensor-parallel comm-GEMM overlap (Megatron-Core --tp-comm-overlap: Transformer Engine userbuffers;
# TorchTitan AsyncTP: symmetric-memory P2P) moves its all-gathers through the copy engines, which take no
# SMs, and runs its reduce-scatters as kernels on UB_SMS of the device's SMs (TE initialize_ub: the
# ring_exchange AG layers and the bulk AGs use use_ce=True, the pipeline/bulk RS kernels num_sm=16). Half
# the overlapped bytes take SMs, and a GEMM left 132 - 16 of an H100's 132 SMs runs 132/116 times as long:
# slowdown 0.5 * 16 / 116 (HBM contention of the copies neglected: the overlapped GEMMs are compute-bound).
UB_SMS, REFERENCE_SMS = 16, 132
TP_OVERLAP_COMPUTE_SLOWDOWN = 0.5 * UB_SMS / (REFERENCE_SMS - UB_SMS)

# Data-parallel gradient buckets of Megatron-Core (--overlap-grad-reduce): "max(40000000, 1000000 *
# dp_size) parameters" per bucket (megatron/core/distributed/distributed_data_parallel_config.py,
# bucket_size docstring). The last bucket (the first layers and the embedding) is reduced after the
# backward ends; the same buckets all-gather the updated weights (--overlap-param-gather).
DP_BUCKET_PARAMS = 40e6
DP_BUCKET_PARAMS_PER_RANK = 1e6

# Max/mean expert load of routed MoE tokens (auxiliary-loss balancing) in a dropless MoE; the slowest
# expert sets the pace. No published device-level max/mean was found; the value sits inside the capacity
# factors 1.0-1.25 that Switch Transformer trains with under its auxiliary loss ("Switch Transformers
# perform better at lower capacity factors (1.0, 1.25)", Fedus et al. 2022, arXiv 2101.03961, sec. 2.2
# and table 1), i.e. the busiest expert stays within ~1.25x the mean; a device averages E/ep experts.
MOE_LOAD_IMBALANCE = 1.1

# Memory not held by tensors. CUDA context ~300 MB with lazy module loading (>1 GB before CUDA 11.7;
# ptrblck in pytorch/pytorch#107667); NCCL ~0.5-0.7 GB per communicator after its first collective (544 MB
# for 2 ranks, 688 MB for more, 4x A100 NVLink: NVIDIA/nccl#964; ~1.6 GB reported in NVIDIA/nccl#864) and
# 3D parallelism keeps tp, dp and pp communicators: 2 GB is the low end of the 2-3 GB these add up to
# (an all-to-all on 8x H100 took 3.3 GB more: NVIDIA/nccl#1685).
RUNTIME_RESERVED_BYTES = 2.0e9
# PyTorch caching-allocator fragmentation, applied to activations only (the weight, grad and optimizer
# buffers are contiguous in Megatron-LM). GMLake (Guo et al., ASPLOS 2024, arXiv 2401.08156) removes 15%
# fragmentation on average (up to 33%) in eight LLM trainings on A100-80GB, STWeaver (arXiv 2507.16274)
# up to 43% with virtual pipeline and recomputation; both as shares of all reserved memory, so 10% of
# activations is at the low end.
ACTIVATION_FRAGMENTATION = 1.10

# Inference engines run prefill in chunks of at most this many tokens per step, which bounds the
# activation workspace they reserve: TensorRT-LLM's default max_num_tokens is 8192 (TensorRT-LLM docs,
# "Tuning max batch size and max num tokens"); vLLM's chunked-prefill default is of the same order.
PREFILL_CHUNK_TOKENS = 8192

# Fixed per-step time outside the model: data loader, logging, gradient-norm all-reduce, launch of the
# optimizer step. A Megatron-LM log in NVIDIA/nccl#743 (BERT, steady state) times batch-generator 5.2 ms,
# optimizer-clip-main-grad 1.2-5.1 ms and optimizer-unscale-and-check-inf 3.5-3.7 ms: ~10-14 ms on a
# small model; 20 ms allows for the larger grad-norm reductions and loggers of big runs.
STEP_OVERHEAD_S = 0.02

# Collective-library constants (NCCL's analytical tuner, src/graph/tuning.cc in github.com/NVIDIA/nccl,
# master 2026): a fixed launch cost per collective (baseLat 6.6-8.4 us), and per protocol a (latency,
# bandwidth) multiplier on a tier's Simple-protocol step latency and link bandwidth: LL 0.6/3.4 us on
# NVLink at half the bandwidth (8-byte flag per 8 bytes), LL128 1.9/3.4 us at 0.92 of it.
COLLECTIVE_BASE_LATENCY_S = 7.0e-6
PROTOCOLS = {"simple": (1.0, 1.0), "ll128": (0.56, 0.92), "ll": (0.18, 0.5)}

# In-network reduction (NVLS on NVSwitch, SHARP on InfiniBand): all-reduce algbw as a fraction of the
# per-direction line rate, 275 of 450 GB/s on 8x H100 (nccl-tests #212, busbw ~480 GB/s), and its
# per-collective latency (NCCL hwLat NVLS 25 us).
IN_NETWORK_EFFICIENCY = 0.61
IN_NETWORK_LATENCY_S = 25e-6
