"""Schema of a transformer model (dense, MoE, MLA)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from llmsim.engine.types import PRECISION_BITS
from llmsim.spec.base import NonNegInt, PosFloat, PosInt, Sources, Strict

# layers x hidden x widest layer: far above any real model (~1e15 weights), far below 2**63
MAX_MODEL = 2**53

Activation = Literal["gelu", "relu", "squared-relu", "swiglu", "geglu"]
PrecisionName = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4"]
StoredPrecision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "mxfp4"]  # weights may be MX-scaled


class PrecisionSpec(Strict):
    """Precision by component, as quantised models ship and engines run them: the GEMM inputs
    (``activations``: the tensor cores' math), the weights of attention and dense layers, the routed
    experts' weights and the KV cache. Weights narrower than the activations run weight-only (W4A16, W8A16:
    dequantised inside the GEMM, Marlin-class kernels). gpt-oss ships MXFP4 experts beside BF16 attention
    (its config.json quantization_config: mxfp4, modules_to_not_convert self_attn, router, embed, lm_head)."""

    activations: PrecisionName = "bf16"
    weights: StoredPrecision | None = None  # default: the activations'
    experts: StoredPrecision | None = None  # default: the weights'
    kv_cache: Literal["fp32", "bf16", "fp16", "fp8", "fp4"] | None = None  # default: the engines' (16-bit)

    @model_validator(mode="after")
    def _check(self) -> PrecisionSpec:
        for key in ("weights", "experts"):
            value = getattr(self, key)
            if value is not None and PRECISION_BITS[value] > PRECISION_BITS[self.activations]:
                raise ValueError(f"{key} {value} is wider than activations {self.activations}: GEMMs run at the "
                                 "wider of the two, so give activations at least the weights' width")
        return self

    @property
    def uniform(self) -> bool:
        """One precision for weights, experts and activations (the string form)."""
        return {self.weights or self.activations, self.experts or self.weights or self.activations} == {
            self.activations}


class MoESpec(Strict):
    experts: PosInt
    top_k: PosInt
    shared_experts: NonNegInt = 0
    expert_ffn_hidden: PosInt
    first_dense_layers: NonNegInt = 0
    capacity_factor: PosFloat | None = None
    # after the first dense layers, one layer in layer_frequency is MoE, the others dense (Megatron-Core
    # --moe-layer-freq; Llama 4 Maverick alternates dense and MoE layers: 2)
    layer_frequency: PosInt = 1

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        return self


class MLASpec(Strict):
    """DeepSeek multi-head latent attention (DeepSeek-V2 paper, arXiv 2405.04434, sec. 2.1)."""

    q_lora_rank: NonNegInt = 0
    kv_lora_rank: PosInt
    qk_rope_head_dim: PosInt
    v_head_dim: PosInt


class AttentionWindowSpec(Strict):
    """Local attention on some layers (engine/window.py): ``sliding`` - each query sees the last
    ``tokens`` tokens (Mistral, Gemma 2/3, gpt-oss); ``chunked`` - queries see only their own block of
    ``tokens`` (Llama 4 attention_chunk_size). ``layers``: how many layers have it (default all)."""

    kind: Literal["sliding", "chunked"] = "sliding"
    tokens: PosInt
    layers: PosInt | None = None


class ModelSpec(Strict):
    name: str
    description: str = ""
    layers: PosInt
    hidden: PosInt
    ffn_hidden: PosInt
    heads: PosInt
    kv_heads: PosInt | None = None
    head_dim: PosInt | None = None
    vocab: PosInt
    activation: Activation = "gelu"
    tied_embeddings: bool = False
    bias: bool = False
    # attention/hidden dropout probability in training; a validation record may fix it from its framework
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, json_schema_extra={"record_choice": True})
    max_seq_len: PosInt | None = None
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    attention_window: AttentionWindowSpec | None = None
    # the precision the model is published in (``workload.precision: native``)
    precision: PrecisionSpec | None = None
    sources: Sources = {}

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        kv = self.kv_heads if self.kv_heads is not None else self.heads
        if kv > self.heads or self.heads % kv:
            raise ValueError(f"kv_heads ({kv}) must divide heads ({self.heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(
                f"heads ({self.heads}) must divide hidden ({self.hidden}) when head_dim is not given")
        if self.moe is not None and self.moe.first_dense_layers > self.layers:
            raise ValueError(
                f"moe.first_dense_layers ({self.moe.first_dense_layers}) exceeds layers ({self.layers})")
        w = self.attention_window
        if w is not None and w.layers is not None and w.layers > self.layers:
            raise ValueError(f"attention_window.layers ({w.layers}) exceeds layers ({self.layers})")
        if self.size_bound() > MAX_MODEL:
            raise ValueError(f"layers x hidden x ffn widths exceed {MAX_MODEL:.1e}: too large to compute exactly")
        return self

    def size_bound(self) -> int:
        """An upper bound of any per-layer product the engine forms (weights, or one token's activations),
        times the layers: refused past ``MAX_MODEL`` so the engine's integers cannot overflow."""
        width = max(self.hidden, self.ffn_hidden, self.heads * (self.head_dim or 1), self.vocab)
        if self.moe is not None:
            width = max(width, self.moe.expert_ffn_hidden * (self.moe.experts + self.moe.shared_experts))
        return self.layers * self.hidden * width
