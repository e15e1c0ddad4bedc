"""Attention head widths, one rule for every phase: training, prefill, decode, memory and the CP ring.

A query head is ``head_dim`` wide, plus MLA's decoupled RoPE key (DeepSeek-V2, arXiv 2405.04434, sec.
2.1.3); a value head ``head_dim``, or MLA's ``v_head_dim``. Tensor parallelism splits the query heads
over the tp ranks; GQA/MQA key-value heads too, but a rank holds at least one: with fewer KV heads than
tp ranks they are replicated (Megatron-LM's GQA, vLLM's ``num_kv_heads // tp`` floored at 1).
"""

from __future__ import annotations

import numpy as np

from llmsim.engine.types import Model


def qk_dim(m: Model) -> int:
    """Width of one query (and key) head."""
    return m.head_dim + (m.mla.qk_rope_head_dim if m.mla else 0)


def v_dim(m: Model) -> int:
    """Width of one value head."""
    return m.mla.v_head_dim if m.mla else m.head_dim


def kv_heads_per_rank(m: Model, tp):
    """GQA/MQA key-value heads on one of ``tp`` ranks: kv_heads / tp, at least 1 (replicated)."""
    return np.maximum(m.kv_heads / tp, 1)


def kv_width_per_rank(m: Model, tp):
    """Elements of one token's K and V on one tensor-parallel rank, as attention reads them (and the
    context-parallel ring passes them): MLA up-projects a K and a V per query head, ``heads x (head_dim +
    v_head_dim) / tp``; GQA/MQA ``2 x kv_heads_per_rank x head_dim``."""
    if m.mla is not None:
        return m.heads * (m.head_dim + m.mla.v_head_dim) / tp
    return 2 * kv_heads_per_rank(m, tp) * m.head_dim
