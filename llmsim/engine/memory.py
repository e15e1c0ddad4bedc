"""Memory per device: weights, gradients, optimizer states (ZeRO), activations, runtime reserve.

Mixed-precision Adam holds 16 bytes per parameter: 2 (16-bit weights) + 2 (16-bit gradients) + 12
(fp32 master weights, momentum, variance) -- Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) sec. 3.1.
ZeRO stage 1 shards the 12 optimizer bytes over data parallelism, stage 2 also the gradients, stage 3
also the weights. Activations follow Korthikanti et al. 2022 (arXiv 2205.05198) sec. 4, generalised to
GQA/MLA, gated MLPs and FlashAttention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.values import Model

WEIGHT_BYTES = 2.0
GRAD_BYTES = 2.0
OPTIMIZER_BYTES = 12.0


@dataclass(frozen=True)
class StateBytes:
    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def state_bytes(params, dp, zero_stage: int, weight_bytes: float = WEIGHT_BYTES) -> StateBytes:
    """Weights, gradients and Adam states of ``params`` local parameters under ZeRO over ``dp`` ranks."""
    return StateBytes(
        weights=params * weight_bytes / (dp if zero_stage >= 3 else 1),
        gradients=params * GRAD_BYTES / (dp if zero_stage >= 2 else 1),
        optimizer=params * OPTIMIZER_BYTES / (dp if zero_stage >= 1 else 1),
    )


def activation_bytes_per_layer(m: Model, b, s, tp, cp, sp: bool, recompute: str, flash: bool = True,
                               dropout: bool = False, moe_layer: bool = False, ep=1):
    """Bytes one layer keeps for backward, per microbatch, per device (Korthikanti eq. 1-2 generalised).

    With MHA, a 4h GeLU MLP, dropout, no flash attention and tp = cp = 1 this is
    ``s*b*h*(34 + 5*a*s/h)``; selective recompute drops the ``5*a*s/h`` term; full keeps ``2*s*b*h``.
    """
    h, a, d = m.hidden, m.heads, m.head_dim
    sbh = s * b * h / cp
    rep = tp if sp else 1  # tensors of width h are split by tp only with sequence parallelism
    if recompute == "full":
        return 2.0 * sbh / rep  # only the layer input is kept
    kv = np.maximum(m.kv_heads / tp, 1) * tp
    q_width = a * (d + (m.mla.qk_rope_head_dim if m.mla else 0))
    v_width = a * (m.mla.v_head_dim if m.mla else d)
    k_width = q_width if m.mla else kv * d
    v_store = v_width if m.mla else kv * d
    tok = s * b / cp
    attn = (2 * sbh / rep  # layer norm input
            + 2 * sbh / rep  # QKV projection input
            + 2 * tok * (q_width + k_width + v_store) / tp  # Q, K, V for attention
            + 2 * tok * v_width / tp  # attention output = out-projection input
            + (sbh / rep if dropout else 0.0))  # attention-output dropout mask
    if not flash and recompute == "none":  # the s x s attention matrix (Korthikanti's 5as^2b)
        probs = a * s * s * b / cp / tp
        attn = attn + 2 * probs + ((probs + 2 * probs) if dropout else 0.0)
    if moe_layer and m.moe is not None:
        f, rows = m.moe.expert_ffn_hidden, tok * m.moe.top_k * cal.MOE_LOAD_IMBALANCE
        fs = f * m.moe.shared_experts
    else:
        f, rows, fs = m.ffn_hidden, tok, 0
    up = 2 if m.gated else 1
    mlp = (2 * sbh / rep  # layer norm input
           + 2 * sbh / rep  # first linear input
           + (2 * rows * h if moe_layer and m.moe is not None else 0.0)  # tokens dispatched to experts
           + 2 * (rows * f + tok * fs) * up / tp  # activation-function input
           + 2 * (rows * f + tok * fs) / tp  # second linear input
           + (sbh / rep if dropout else 0.0))
    return attn + mlp


def head_activation_bytes(m: Model, b, s, tp, cp):
    """The last stage's fp32 logits for the loss (Korthikanti sec. 4.3: 4*s*b*v/t)."""
    return 4.0 * s * b * m.vocab / tp / cp


def inflight_microbatches(pp, microbatches, virtual_stages):
    """Microbatches whose activations the first stage holds at peak under 1F1B: min(p, m); interleaving
    adds (p - 1) / (p * v) of a stage's layers (Narayanan et al. 2021 sec. 2.2.2)."""
    base = np.minimum(pp, microbatches)
    return base * np.where(virtual_stages > 1, 1 + (pp - 1) / (pp * virtual_stages), 1.0)


def with_runtime_reserve(activations, states):
    return activations * cal.ACTIVATION_FRAGMENTATION + states + cal.RUNTIME_RESERVED_BYTES
