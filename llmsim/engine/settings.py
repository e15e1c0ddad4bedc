"""Scenario settings, each declared once: its type and bounds, default, help text and source.

A section is a frozen dataclass whose fields are ``setting(...)``s: the engine reads it as its frozen
input; the scenario schema (``spec/declared.py``) builds the validating pydantic model from the same
fields (the annotation's ``annotated_types`` bounds and ``Literal`` choices), and ``llmsim settings``
and ``docs/settings.md`` print the help and sources. Adding a setting touches its declaration here and
the engine code that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from annotated_types import Ge, Gt, Le, Lt

MAX_COUNT = 2**40  # any count (devices, layers, batch, tokens): ~1.1e12
MAX_DEVICES = 2**30  # devices and parallel degrees: ~1e9, a thousand times the largest cluster
MAX_VALUE = 1e18  # any other number (rates, prices, sizes)

Degree = Annotated[int, Gt(0), Le(MAX_DEVICES)]
PosInt = Annotated[int, Gt(0), Le(MAX_COUNT)]
NonNegFloat = Annotated[float, Ge(0)]  # at most MAX_VALUE: every spec number (spec/base.py Strict)
ParallelDim = Literal["tp", "cp", "ep", "dp", "pp"]
DEFAULT_ORDER: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")


def setting(default, help: str, source: str = "", flag: str | None = None, record_choice: bool = False):
    """A declared setting: ``default``, one line of ``help``, the ``source`` of the default, the
    command-line ``flag`` of ``llmsim estimate`` that sets it, if any (``spec/flags.py`` builds the flags),
    and whether it is a ``record_choice``: a modelling choice a validation record may fix from its framework
    or launch recipe, where a user of llmsim gets the default (``validate`` reports both errors)."""
    return field(default=default, metadata={"help": help, "source": source, "flag": flag,
                                            "record_choice": record_choice})


@dataclass(frozen=True)
class Parallel:
    """How the model is split and run (the ``parallel`` section)."""

    tp: Degree = setting(1, "tensor-parallel degree", flag="--tp")
    pp: Degree = setting(1, "pipeline-parallel degree (stages)", flag="--pp")
    dp: Degree | None = setting(None, "data-parallel degree; derived as num_devices / (tp x pp x cp) when omitted",
                                flag="--dp")
    cp: Degree = setting(1, "context-parallel degree (ring attention)", flag="--cp")
    ep: Degree = setting(1, "expert-parallel degree of the MoE layers", flag="--ep")
    sequence_parallel: bool = setting(True, "Megatron sequence parallelism on the tensor-parallel group",
                                      "Korthikanti et al. 2022, arXiv 2205.05198")
    flash_attention: bool = setting(True, "fused attention; false: s x s scores in HBM",
                                    "Dao et al. 2022, arXiv 2205.14135", record_choice=True)
    attention_kernel: str = setting("auto", "a kernel of the accelerator's measured_attention_tflops; auto: the fastest",
                                    record_choice=True)
    activation_quant: Literal["fused", "per_gemm"] = setting(
        "fused", "fp8/fp4 inference: each GEMM input quantised by the kernel that writes it (fused) or by a "
        "kernel of its own before every GEMM (per_gemm)",
        "TensorRT-LLM's norm- and SwiGLU-quant kernels; torchao's dynamic activation quantisation",
        record_choice=True)
    tp_all_reduce: Literal["auto", "nccl"] = setting(
        "nccl", "inference tp all-reduce: NCCL's algorithms, or auto: also a one-shot custom all-reduce inside "
        "one scale-up domain where faster (nccl until auto is validated engine by engine)",
        "TensorRT-LLM, vLLM and SGLang custom all-reduce kernels", record_choice=True)
    attention_dp: bool = setting(
        False, "serving: attention data-parallel over the tp ranks: each rank runs its own requests' attention "
        "with every head and caches only their keys and values; the MLP and expert layers run on all the ranks' "
        "tokens (gathered before, reduce-scattered after)",
        "SGLang --enable-dp-attention (python/sglang/srt/layers/dp_attention.py); TensorRT-LLM enable_attention_dp")
    cuda_graphs: Literal["full", "attention", "none"] = setting(
        "full", "training on GPUs: the kernels replayed from CUDA graphs, their launches hidden: the whole step "
        "(full), each layer's attention and router only (attention: Transformer Engine graphs, the MLP, experts "
        "and dispatch launched eagerly), or none: every kernel launched from PyTorch eager at 12.4 us of host "
        "time, so a pass whose kernels run shorter than their launches waits for the host",
        "benchmarks/kernels/h200/launch.csv (measured eager launch); Megatron-Core --cuda-graph-impl "
        "full_iteration | transformer_engine --cuda-graph-modules attn moe_router moe_preprocess",
        record_choice=True)
    tp_comm_overlap: bool = setting(False, "TP collectives overlapped with the GEMMs beside them",
                                    "Transformer Engine userbuffers (Megatron-Core --tp-comm-overlap)",
                                    record_choice=True)
    moe_comm_overlap: Literal["none", "shared_experts", "batch"] = setting(
        "none", "MoE all-to-all: exposed, under the shared experts, or under another microbatch's layer",
        "Megatron-Core --moe-shared-expert-overlap, --overlap-moe-expert-parallel-comm; DeepSeek-V3 DualPipe")
    moe_dispatch: Literal["permute", "einsum"] = setting(
        "permute", "MoE token routing: gathered by index, or GShard's one-hot dispatch/combine einsums",
        "Megatron-Core; MaxText dense_matmul; Lepikhin et al. 2020, arXiv 2006.16668")
    moe_gemm_kernel: Literal["native", "sm80"] = setting(
        "native", "routed-expert grouped GEMM: the accelerator's own kernels, or Ampere CUTLASS (sm80) on Hopper",
        "TensorRT-LLM before v0.10 dispatches its MoE GEMM to cutlass::arch::Sm80",
        record_choice=True)
    microbatch_size: PosInt | Literal["auto"] = setting(
        1, "sequences per microbatch; auto: the fastest that fits, with virtual_stages (estimate says which; a sweep's "
        "row carries it)",
        flag="--microbatch-size")
    virtual_stages: PosInt | Literal["auto"] = setting(
        1, "interleaved 1F1B chunks per device; auto: the fastest that fits (estimate says which; a sweep's row "
        "carries it)",
        "Narayanan et al. 2021, arXiv 2104.04473, sec. 2.2")
    pipeline_embedding_stage: bool = setting(
        False, "the embedding takes a pipeline layer slot", "Megatron-LM --account-for-embedding-in-pipeline-split")
    pipeline_loss_stage: bool = setting(
        False, "the output layer and loss take a pipeline layer slot", "Megatron-LM --account-for-loss-in-pipeline-split")
    recompute: str = setting(
        "selective", "none, selective (core attention), full, or Megatron-Core's modules as "
        "selective:<module>+<module>, e.g. selective:moe_act+layernorm",
        "Korthikanti et al. 2022; Megatron-Core --recompute-modules", flag="--recompute")
    zero_stage: Annotated[int, Ge(0), Le(3)] = setting(
        1, "ZeRO/FSDP: 0 none, 1 optimizer states, 2 + gradients, 3 + weights sharded over dp",
        "Rajbhandari et al. 2020, arXiv 1910.02054", flag="--zero-stage")
    grad_reduce_dtype: Literal["auto", "fp32", "bf16"] = setting(
        "auto", "dtype gradients are accumulated and reduced in; auto: fp32 with bf16/fp8/fp4 parameters, "
        "16-bit under ZeRO-3 (FSDP)", "NeMo optim.grad_sync_dtype; torch.distributed.fsdp MixedPrecision",
        record_choice=True)
    optimizer_states: Literal["fp32", "fp32-remainders", "bf16"] = setting(
        "fp32", "Adam's state per parameter: fp32 master, m, v (12 B); fp32-remainders (10 B); bf16 m, v (4 B)",
        "Megatron-LM dist_optimizer.md; Apex store_param_remainders", record_choice=True)
    order: tuple[ParallelDim, ...] = setting(
        DEFAULT_ORDER, "rank order of the dimensions, innermost first", "Megatron-LM's default tp-cp-ep-dp-pp")


@dataclass(frozen=True)
class CostRates:
    """Prices and rates for system cost and cost per token (the ``cost`` section; engine/cost/system.py)."""

    host_usd_per_device: NonNegFloat = setting(
        4000.0, "non-accelerator content of a node per device (CPUs, memory, NICs, switch baseboard, chassis)",
        "DGX H100 ~$32k per 8 GPUs, SemiAnalysis BOM via Epoch AI, https://github.com/epoch-research/training-cost-trends")
    host_power_w_per_device: NonNegFloat = setting(
        575.0, "host power per device (W)", "DGX H100 datasheet: 10.2 kW at most, 8 x 700 W of it GPUs: 4.6 kW / 8")
    switch_port_usd: NonNegFloat = setting(
        562.5, "scale-out switch port (USD)", "64-port 400G InfiniBand switch ~$36k (FS.com QM9700-class, Aug 2024)")
    link_usd: NonNegFloat = setting(
        1280.0, "cables and transceivers per link (USD)",
        "2 links per GPU at 1,024 H100: $2.62M, Aug 2024 cluster cost sheet on thinkmate/fs.com quotes")
    switch_radix: PosInt = setting(64, "scale-out switch ports", "NVIDIA Quantum-2: 64 ports of 400 Gb/s")
    pue: Annotated[float, Ge(1)] = setting(
        1.58, "power usage effectiveness of the data centre", "Uptime Institute Global Data Center Survey 2023")
    electricity_usd_per_kwh: NonNegFloat = setting(
        0.08, "electricity price (USD/kWh)", "EIA Electric Power Monthly table 5.3: US industrial 2023, 8.0 cents")
    amortization_years: Annotated[float, Gt(0)] = setting(
        5.0, "years the capex is written off over", "Microsoft FY2023 10-K: 6 years for servers; 4 often assumed")
    device_price_usd: NonNegFloat | None = setting(None, "price per device (USD); default: the preset's list price")
    cloud_usd_per_device_hour: NonNegFloat | None = setting(
        None, "rent per device-hour (USD) instead of owning the system")


@dataclass(frozen=True)
class Reliability:
    """Speed spread and failures of the fleet (the ``reliability`` section; engine/reliability.py)."""

    device_speed_cv: Annotated[float, Ge(0), Le(0.5)] = setting(
        0.01, "spread of per-device speed (coefficient of variation)",
        "Sinha et al. SC22, arXiv 2208.11035: 8% max-min over thousands of GPUs, ~2 x 3.9 sd; "
        "Llama 3 (arXiv 2407.21783, 3.3.4): 1-2% diurnal variation")
    failures_per_device_hour: NonNegFloat = setting(
        1.97e-5, "unexpected interruptions per device-hour",
        "Llama 3 405B: 419 in 54 days on 16,384 H100 (Dubey et al. 2024, arXiv 2407.21783, table 5)")
    checkpoint_write_bytes_per_s_per_device: Annotated[float, Gt(0)] = setting(
        1.22e8, "checkpoint write bandwidth per device (B/s)",
        "Llama 3's Tectonic storage: 2 TB/s for 16,384 GPUs (Dubey et al. 2024, sec. 3.3.1)")
    restart_s: NonNegFloat = setting(
        600.0, "time from a failure to training again (detect, reschedule, load, warm up)",
        "engineering estimate, 10 minutes; no published measurement of the whole recovery found")


@dataclass(frozen=True)
class WorkloadSettings:
    """What is run (the ``workload`` section). Its ``precision``, ``input_len``, ``output_len`` and
    ``requests``, which take a mapping, a distribution or a list, are declared in spec/scenario.py."""

    mode: Literal["training", "inference", "serving"] = setting(
        "training", "training, inference (a static batch) or serving (continuous batching at concurrency or "
        "request_rate_per_s)", flag="--mode")
    seq_len: PosInt = setting(2048, "tokens per sequence (training)", flag="--seq-len")
    global_batch_size: PosInt | None = setting(None, "sequences per optimizer step (training)",
                                               flag="--global-batch-size")
    batch_size: PosInt | Literal["max"] | None = setting(
        None, "inference: concurrent sequences, or max (the largest that fits)", flag="--batch-size")
    kv_precision: Literal["fp32", "bf16", "fp16", "fp8", "fp4"] | None = setting(
        None, "inference and serving: KV-cache precision; default the model's 16-bit dtype",
        "vLLM and SGLang kv_cache_dtype auto", flag="--kv-precision")
    concurrency: PosInt | None = setting(
        None, "serving: requests in flight over the deployment (closed loop)", flag="--concurrency")
    request_rate_per_s: Annotated[float, Gt(0)] | None = setting(
        None, "serving: Poisson arrivals per second over the deployment (open loop)", flag="--request-rate")
    num_prompts: PosInt | None = setting(
        None, "serving at a concurrency: requests the benchmark client sends in all, the first concurrency of "
        "them at once (a start burst, in the means and percentiles); unset: the steady state alone",
        "vllm bench serve and sglang.bench_serving --num-prompts, 1,000 by default in both; all requests "
        "sent at time 0 under the concurrency cap (vllm/benchmarks/serve.py v0.11.0; bench_serving.py v0.5.5)",
        flag="--num-prompts")


@dataclass(frozen=True)
class ServingSettings:
    """The serving engine's scheduler (the ``serving`` section; engine/serving.py). Unset, the first five
    take the defaults of ``engine``, each from the engine's source (spec/engines.py). Disaggregated pools
    and speculative decoding are declared in spec/scenario.py."""

    engine: Literal["generic", "vllm", "sglang", "tensorrt-llm", "atom"] = setting(
        "generic", "whose scheduler defaults fill the five settings below when they are not set",
        "spec/engines.py: vLLM 0.10.1.1, SGLang 0.5.2, TensorRT-LLM trtllm-serve, ATOM v0.1.5; generic: "
        "8,192 tokens (TensorRT-LLM docs), 256 requests and blocks of 16 tokens (Kwon et al. 2023)")
    max_batch_tokens: PosInt | None = setting(None, "tokens one step may run (decode tokens + prompt chunk)")
    max_seqs: PosInt | None = setting(None, "requests running at once")
    kv_block_tokens: PosInt | None = setting(None, "tokens per paged KV-cache block")
    chunked_prefill: bool | None = setting(None, "prompts split across steps within the budget (false: whole)")
    scheduler: Literal["mixed", "prefill_first"] | None = setting(
        None, "mixed: prompt chunks share decode steps; prefill_first: a step of prompts whenever any wait "
        "(a closed loop of fixed lengths runs in waves, engine/waves.py)")
    prefix_cache_hit_rate: Annotated[float, Ge(0), Lt(1)] = setting(
        0.0, "share of each prompt found in the prefix cache (not recomputed)")
    slo_ttft_s: Annotated[float, Gt(0)] | None = setting(
        None, "service-level objective on time to first token (s): estimate reports the largest concurrency "
        "meeting the objectives and the throughput there")
    slo_tpot_s: Annotated[float, Gt(0)] | None = setting(
        None, "service-level objective on time per output token (s)")
