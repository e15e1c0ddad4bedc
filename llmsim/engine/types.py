"""Plain frozen values the engine computes on, in SI units (names carry units).

The spec layer validates user input and converts it into these; the engine never sees pydantic
objects or raw dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the settings sections are declared in settings.py (one place per setting) and read from here too
from llmsim.engine.settings import CostRates, Parallel, Reliability, ServingSettings, WorkloadSettings

# Bytes per element as stored. fp8: per-tensor scaling (Transformer Engine, TensorRT-LLM FP8), no block
# scales. fp4 is NVFP4: 4-bit E2M1 values plus one E4M3 scale per 16 values = 4.5 bits = 0.5625 B (NeMo
# AutoModel nvfp4 docs, "0.5625 bytes per parameter", https://docs.nvidia.com/nemo/automodel/nemo-automodel/nemo_automodel/components/quantization/nvfp4 ;
# Intel Neural Compressor NVFP4 table https://intel.github.io/neural-compressor/latest/docs/source/3x/PT_NVFP4Quant.html)
PRECISION_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5625,
                   # OCP Microscaling (MX) v1.0: 4-bit E2M1 elements and one 8-bit E8M0 scale per 32 (gpt-oss's
                   # released experts); fp4 is NVFP4's 4 bits with an 8-bit scale per 16
                   "mxfp4": 0.53125}
PRECISION_BITS = {"fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp4": 4, "mxfp4": 4}  # element width


@dataclass(frozen=True)
class MoE:
    experts: int
    top_k: int
    shared_experts: int
    expert_ffn_hidden: int
    first_dense_layers: int
    capacity_factor: float | None
    layer_frequency: int = 1  # one MoE layer in this many after the first dense layers


@dataclass(frozen=True)
class MLA:
    q_lora_rank: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class AttentionWindow:
    """Local attention on some layers: ``sliding`` (each query sees the last ``tokens`` tokens: Mistral,
    Gemma 2/3, gpt-oss) or ``chunked`` (queries see only their own block of ``tokens``: Llama 4)."""

    kind: str  # sliding | chunked
    tokens: int
    layers: int  # layers with the window; the others attend to the whole context


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    activation: str
    tied_embeddings: bool
    bias: bool
    moe: MoE | None = None
    dropout: float = 0.0
    mla: MLA | None = None
    attention_window: AttentionWindow | None = None

    @property
    def moe_layers(self) -> int:
        """Layers with experts: one in ``layer_frequency`` after the first dense ones (0 without MoE)."""
        if self.moe is None:
            return 0
        return -(-(self.layers - self.moe.first_dense_layers) // self.moe.layer_frequency)

    @property
    def moe_layer_share(self) -> float:
        """The share of the layers that have experts (0 for a dense model)."""
        return self.moe_layers / self.layers

    @property
    def gated(self) -> bool:
        """Gated MLPs (SwiGLU, GeGLU) have three weight matrices instead of two."""
        return self.activation in ("swiglu", "geglu")


@dataclass(frozen=True)
class Accelerator:
    name: str
    peak_flops_per_s: dict[str, float]  # dense, per precision
    measured_matmul_flops_per_s: dict[str, float]
    hbm_bytes: float
    hbm_bw_bytes_per_s: float
    sram_bytes: float
    scaleup_bw_bytes_per_s: float  # per direction
    scaleout_bw_bytes_per_s: float  # per direction
    tdp_w: float | None
    die_area_mm2: float | None = None
    num_dies: int | None = None
    hbm_stacks: int | None = None
    list_price_usd: float | None = None
    cloud_usd_per_hour: float | None = None
    # kernel -> (forward, backward) FLOP/s of fused attention; empty: derived from the matmul efficiency
    attention_flops_per_s: dict[str, tuple[float, float]] = field(default_factory=dict)
    device_cost_usd: float | None = None  # manufacturing cost (silicon cost model), when it can be derived
    # compute rate of Ampere-generation (SM80, mma.sync) GEMM kernels over the device's own; None: unmeasured
    sm80_matmul_fraction: float | None = None

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision``; 0 when the device does not support it."""
        return self.peak_flops_per_s.get(precision, 0.0)


@dataclass(frozen=True)
class Tier:
    name: str
    size: int
    topology: str
    bw_bytes_per_s: float  # per device per direction
    latency_s: float
    oversubscription: float = 1.0
    in_network_reduction: bool = False
    dims: tuple[int, ...] = ()
    radix: int | None = None
    levels: int | None = None
    rail_optimized: bool = False
    group_size: int | None = None
    global_bw_bytes_per_s: float = 0.0
    ll_latency_s: float | None = None  # NCCL LL step where measured; None: latency_s x PROTOCOLS['ll']


@dataclass(frozen=True)
class Network:
    name: str
    tiers: tuple[Tier, ...]


@dataclass(frozen=True)
class Workload(WorkloadSettings):
    """The ``workload`` section: its declared settings (engine/settings.py) and what spec/convert.py
    derives from the precision, the lengths and the request mix."""

    precision: str = "bf16"  # the GEMM inputs' (activations'): the tensor cores' math
    input_len: int | float | None = None  # tokens; serving: the mean over the request mix
    output_len: int | float | None = None
    input_len_cv: float = 0.0  # serving: spread of the request mix (standard deviation / mean), 0: fixed
    output_len_cv: float = 0.0
    length_corr: float = 0.0  # correlation of a request's input and output lengths
    weight_precision: str | None = None  # attention and dense weights; None: ``precision``
    expert_precision: str | None = None  # routed experts' weights; None: the weights'
    kv_cache_precision: str | None = None  # the KV cache's by ``workload.precision.kv_cache``

    @property
    def weights(self) -> str:
        return self.weight_precision or self.precision

    @property
    def experts(self) -> str:
        return self.expert_precision or self.weights

    @property
    def kv_cache(self) -> str:
        """The KV cache's precision: as given, else the serving engines' default, the model's 16-bit dtype
        whatever its weights (vLLM and SGLang ``kv_cache_dtype auto``; an FP8 cache is asked for)."""
        if self.kv_precision is not None or self.kv_cache_precision is not None:
            return self.kv_precision or self.kv_cache_precision
        return self.precision if PRECISION_BYTES[self.precision] >= 2 else "bf16"

    @property
    def precision_label(self) -> str:
        """The ``precision`` column: one name, or the activations' with the narrower weights
        (``bf16, experts fp4``; ``bf16, weights fp8``)."""
        parts = [f"weights {self.weights}"] if self.weights != self.precision else []
        if self.experts != self.weights:
            parts.append(f"experts {self.experts}")
        return ", ".join([self.precision, *parts])


@dataclass(frozen=True)
class Disaggregation:
    """Prefill and decode in separate pools (``serving.disaggregation``; engine/disaggregation.py)."""

    prefill_tp: int = 1
    prefill_pp: int = 1
    decode_tp: int = 1
    decode_pp: int = 1
    prefill_ep: int = 1
    decode_ep: int = 1
    prefill_attention_dp: bool = False
    decode_attention_dp: bool = False
    prefill_devices: int | None = None  # None: the split that serves most within the SLO (auto)
    kv_transfer_free: bool = False  # what-if (and tests): the KV cache moves at no cost
    kv_transfer_layerwise: bool = False  # sent layer by layer under the prefill (kv_transfer: layerwise)


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding with a draft head or a draft model (``serving.speculative``; engine/speculative.py)."""

    acceptance_rate: float
    draft_tokens: int = 3
    draft_layers: int = 1
    draft_model: Model | None = None  # None: a head of draft_layers target-shaped layers
    draft_precision: str = "bf16"  # a draft model's GEMM inputs (a head runs at the target's precision)
    draft_weight_precision: str | None = None  # its weights; None: draft_precision
    draft_expert_precision: str | None = None  # its routed experts' weights; None: as its weights


@dataclass(frozen=True)
class Serving(ServingSettings):
    """The serving engine's scheduler: its declared settings (engine/settings.py), those the engine fills
    filled in by spec/convert.py, and the disaggregated pools and draft of speculative decoding."""

    disaggregation: Disaggregation | None = None  # None: prefill and decode share every replica
    speculative: Speculative | None = None  # None: one token per request per decode step

    @property
    def has_slo(self) -> bool:
        """Whether a service-level objective is set (on TTFT, TPOT or both)."""
        return self.slo_ttft_s is not None or self.slo_tpot_s is not None


@dataclass(frozen=True)
class Scenario:
    model: Model
    accelerator: Accelerator
    num_devices: int
    network: Network
    parallel: Parallel
    workload: Workload
    names: dict[str, str] = field(default_factory=dict)  # preset names for the output record
    cost: CostRates | None = None  # prices and rates of the scenario's cost section
    reliability: Reliability = Reliability()  # stragglers and failures (reliability section)
    serving: Serving = Serving()  # continuous-batching scheduler (serving section)
