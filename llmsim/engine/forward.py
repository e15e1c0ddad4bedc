"""Forward-pass pieces that static inference (``inference.py``) and serving (``serving.py``) share: a
token's KV-cache bytes, the decode attention operator, and the prefill workspace and logits per token."""

from __future__ import annotations

from llmsim.engine.compute import ACT_BYTES, Op
from llmsim.engine.heads import kv_width_per_rank, qk_dim, v_dim
from llmsim.engine.types import PRECISION_BYTES, Model, Scenario
from llmsim.engine.window import key_span


def kv_bytes_per_token_layer(m: Model, tp, kv_precision: str):
    """K and V of one token in one layer on one device: GQA/MQA heads split over tp (replicated when
    fewer than tp); MLA caches its compressed latent and RoPE key once (DeepSeek-V2, arXiv 2405.04434)."""
    kvb = PRECISION_BYTES[kv_precision]
    if m.mla is not None:
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * kvb
    return kv_width_per_rank(m, tp) * kvb


def decode_attention(m: Model, b, ctx, tp, kv_precision: str, count: float, queries=1) -> Op:
    """``queries`` new positions per sequence (1; k + 1 verifying a speculative draft) against ``ctx``
    cached keys and values, read once (no causal halving). MLA decodes on its cache as it is: W_UK absorbed
    into the query and W_UV into the output (DeepSeek-V2, arXiv 2405.04434, sec. 2.1.2), every head's
    query scores the kv_lora_rank latent and the RoPE key (576 wide in DeepSeek-V3) and sums the latent
    (512) (FlashMLA, github.com/deepseek-ai/FlashMLA, as vLLM, SGLang and TensorRT-LLM decode MLA); the
    absorbed projections are the kv_up GEMM's FLOPs and weights."""
    qk, v = qk_dim(m), v_dim(m)
    if m.mla is not None:
        qk, v = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, m.mla.kv_lora_rank
    heads = m.heads / tp
    if m.attention_window is not None:  # windowed layers read at most their window (engine/window.py)
        ctx = key_span(m, ctx)
    flops = 2.0 * b * queries * ctx * heads * (qk + v)
    nbytes = b * ctx * kv_bytes_per_token_layer(m, tp, kv_precision) + b * queries * heads * (qk + v) * ACT_BYTES
    return Op("attention", "attention", flops, nbytes, ctx, 1.0, count, True)


def workspace_per_token(sc: Scenario, tp):
    """Activation bytes per prefill token of one layer on one of ``tp`` ranks: the live tensors (input,
    residual, Q/K/V, MLP intermediate; 16-bit)."""
    m = sc.model
    f = max(m.ffn_hidden, (m.moe.expert_ffn_hidden * m.moe.top_k) if m.moe else 0)
    up = 2 if m.gated else 1
    qkv = m.heads * qk_dim(m) / tp + kv_width_per_rank(m, tp)  # the rank's Q heads, its K and V (heads.py)
    return ACT_BYTES * (2 * m.hidden + qkv + (up + 1) * f / tp)


def logits_bytes_per_seq(sc: Scenario, tp):
    """Bytes of the last token's fp32 logits per sequence on one of ``tp`` ranks."""
    return sc.model.vocab / tp * 4.0  # fp32 logits of the last token
