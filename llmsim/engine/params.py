"""Parameter counts of a transformer, per layer kind (used for memory and for FLOP conventions)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmsim.engine.types import Model


@dataclass(frozen=True)
class ParamCounts:
    attention: float  # per layer
    dense_mlp: float  # per dense layer (first_dense_layers of an MoE, or every layer of a dense model)
    expert: float  # one routed expert's MLP
    shared_experts: float  # all shared experts of one MoE layer
    router: float  # per MoE layer
    norms: float  # per layer
    embedding: float  # input embedding (+ output projection when untied)
    dense_layers: int
    moe_layers: int
    experts: int
    top_k: int

    @property
    def total(self) -> float:
        moe = self.experts * self.expert + self.shared_experts + self.router
        return (self.dense_layers * (self.attention + self.dense_mlp + self.norms)
                + self.moe_layers * (self.attention + moe + self.norms) + self.embedding)

    @property
    def active(self) -> float:
        """Parameters a token passes through (routed experts counted top_k times, not experts times)."""
        moe = self.top_k * self.expert + self.shared_experts + self.router
        return (self.dense_layers * (self.attention + self.dense_mlp + self.norms)
                + self.moe_layers * (self.attention + moe + self.norms) + self.embedding)


def mlp_params(m: Model, ffn: int) -> float:
    """Gated MLPs have three h x ffn matrices (Shazeer 2020, arXiv 2002.05202), plain ones two."""
    mats = 3 if m.gated else 2
    bias = (ffn * (2 if m.gated else 1) + m.hidden) if m.bias else 0
    return mats * m.hidden * ffn + bias


def attention_params(m: Model) -> float:
    h = m.hidden
    if m.mla is not None:  # DeepSeek-V2 sec. 2.1: low-rank joint compression of K/V (and Q)
        a = m.mla
        qk_dim = m.head_dim + a.qk_rope_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.heads * qk_dim if a.q_lora_rank
             else h * m.heads * qk_dim)
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank \
            + a.kv_lora_rank * m.heads * (m.head_dim + a.v_head_dim)
        return q + kv + m.heads * a.v_head_dim * h
    q_out = m.heads * m.head_dim
    kv_out = m.kv_heads * m.head_dim
    weights = h * q_out * 2 + h * kv_out * 2  # Q and O projections, K and V projections
    return weights + ((q_out + 2 * kv_out + h) if m.bias else 0)


def param_counts(m: Model) -> ParamCounts:
    moe = m.moe
    dense_layers = m.layers - m.moe_layers
    norm_width = m.hidden * (2 if m.bias else 1)  # LayerNorm has a bias, RMSNorm does not
    return ParamCounts(
        attention=attention_params(m),
        dense_mlp=mlp_params(m, m.ffn_hidden),
        expert=mlp_params(m, moe.expert_ffn_hidden) if moe else 0.0,
        shared_experts=moe.shared_experts * mlp_params(m, moe.expert_ffn_hidden) if moe else 0.0,
        router=m.hidden * moe.experts if moe else 0.0,
        norms=2 * norm_width,
        embedding=m.vocab * m.hidden * (1 if m.tied_embeddings else 2) + norm_width,  # + final norm
        dense_layers=dense_layers,
        moe_layers=m.layers - dense_layers,
        experts=moe.experts if moe else 0,
        top_k=moe.top_k if moe else 0,
    )


def local_params(m: Model, stage_layers: int, pp: int, tp: int, ep: int, etp=None) -> tuple[float, float]:
    """(non-expert, expert) parameters one device of the fullest pipeline stage holds: its share of the
    layers split over tp (experts also over ep), with the input embedding on the first stage and the
    output projection on the last (both on one stage when pp = 1); each expert is split over ``etp`` ranks
    (default tp)."""
    c = param_counts(m)
    dense_layer = c.attention + c.dense_mlp + c.norms
    moe_nonexpert = c.attention + c.norms + c.router + c.shared_experts
    frac = stage_layers / m.layers
    embed = m.vocab * m.hidden * np.where((pp == 1) & (not m.tied_embeddings), 2, 1)
    dense = (frac * (c.dense_layers * dense_layer + c.moe_layers * moe_nonexpert) + embed) / tp
    expert = frac * c.moe_layers * c.experts * c.expert / ((tp if etp is None else etp) * ep)
    return dense, expert
