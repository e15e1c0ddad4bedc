"""Memory per device: weights, gradients, optimizer states (ZeRO), activations, runtime reserve.

Mixed-precision Adam as Megatron-LM runs it (docs/user-guide/features/dist_optimizer.md, bytes per
parameter): bf16 weights (2), fp32 main gradients (4) and fp32 master weights, momentum and variance
(12): 18 B, or 6 + 12/d with the distributed optimizer over d data-parallel ranks. With fp16 the
gradients stay 16-bit (2) and the optimizer keeps an fp32 copy of its shard's gradients (16): 20 B, or
4 + 16/d. (Rajbhandari et al. 2020, ZeRO, arXiv 1910.02054 sec. 3.1, count 16 B with 16-bit gradients.)
Scenarios may set bf16 gradients (parallel.grad_reduce_dtype) and NeMo/Apex optimizer state layouts
(parallel.optimizer_states: 10 B with 16-bit master remainders, 4 B with bf16 moments).
ZeRO stage 1 shards the optimizer bytes over data parallelism, stage 2 also the gradients, stage 3 also
the weights. Activations follow Korthikanti et al. 2022 (arXiv 2205.05198) sec. 4, generalised to
GQA/MLA, gated MLPs and FlashAttention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.heads import kv_heads_per_rank, qk_dim, v_dim
from llmsim.engine.types import PRECISION_BYTES, Model

WEIGHT_BYTES = 2.0
# Megatron-LM with --bf16 forces --accumulate-allreduce-grads-in-fp32 (megatron/training/arguments.py:
# "bfloat16 requires gradient accumulation and all-reduce to be done in fp32"), so the DDP grad buffer is
# fp32 (param_and_grad_buffer.py: grad_dtype = torch.float if grad_reduce_in_fp32); NeMo's bf16_mixed
# sets grad_reduce_in_fp32=True. With --fp16 the buffer keeps the parameter dtype.
MAIN_GRAD_BYTES = 4.0
FP16_GRAD_BYTES = 2.0
# scenario parallel.grad_reduce_dtype other than auto: the buffer's bytes, in memory and on the wire
# (NeMo optim.grad_sync_dtype: Apex DistributedFusedAdam allocates its grad buffer in grad_sync_dtype)
GRAD_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0}
# Adam's state per parameter (parallel.optimizer_states): fp32 master, momentum, variance (12); Apex
# DistributedFusedAdam store_param_remainders keeps an int16 remainder beside the bf16 weight instead of
# the fp32 master, plus fp32 m, v (10; NeMo's default for bf16 O2 with an fp32 optimizer,
# megatron_base_model.py); Apex with optim.dtype bf16 keeps bf16 m, v and no master (4)
OPTIMIZER_STATE_BYTES = {"fp32": 12.0, "fp32-remainders": 10.0, "bf16": 4.0}


def grad_bytes(precision: str = "bf16", grad_dtype: str = "auto") -> float:
    """Bytes per parameter of the gradient buffer gradients are accumulated and reduced in: fp32 main
    gradients for bf16 (and FP8/FP4 recipes, whose parameters are bf16), the parameter's fp16 under fp16;
    an explicit ``grad_dtype`` (fp32, bf16) overrides."""
    if grad_dtype != "auto":
        return GRAD_DTYPE_BYTES[grad_dtype]
    return FP16_GRAD_BYTES if precision == "fp16" else MAIN_GRAD_BYTES


def grad_reduce_bytes(precision: str, zero_stage: int, grad_dtype: str = "auto") -> float:
    """Bytes per parameter of the data-parallel gradient reduction. ZeRO 0-2 reduce Megatron's grad buffer
    as it is; ZeRO-3 is PyTorch FSDP, whose MixedPrecision reduce_dtype defaults to the 16-bit param_dtype
    (torch.distributed.fsdp docs; llm-foundry's benchmarks run mixed_precision PURE) and whose fp32
    sharded gradient then takes the cast result. An explicit ``grad_dtype`` is reduced as it is."""
    if grad_dtype != "auto":
        return GRAD_DTYPE_BYTES[grad_dtype]
    return WEIGHT_BYTES if zero_stage >= 3 else grad_bytes(precision)


def optimizer_bytes(g: float, optimizer_states: str = "fp32") -> float:
    """Optimizer bytes per parameter with ``g``-byte gradients. With fp32 master weights and 16-bit
    gradients the optimizer keeps an fp32 copy of its shard's gradients (Megatron-LM dist_optimizer.md:
    fp16 4 + 16/d; _copy_model_grads_to_main_grads); Apex's fused kernel reads 16-bit gradients as they are."""
    copy = optimizer_states == "fp32" and g < MAIN_GRAD_BYTES
    return OPTIMIZER_STATE_BYTES[optimizer_states] + (MAIN_GRAD_BYTES if copy else 0.0)


@dataclass(frozen=True)
class StateBytes:
    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def state_bytes(params, dp, zero_stage: int, weight_bytes: float = WEIGHT_BYTES, precision: str = "bf16",
                grad_dtype: str = "auto", optimizer_states: str = "fp32") -> StateBytes:
    """Weights, gradients and Adam states of ``params`` local parameters under ZeRO over ``dp`` ranks."""
    g = grad_bytes(precision, grad_dtype)
    opt = optimizer_bytes(g, optimizer_states)
    return StateBytes(
        weights=params * weight_bytes / (dp if zero_stage >= 3 else 1),
        gradients=params * g / (dp if zero_stage >= 2 else 1),
        optimizer=params * opt / (dp if zero_stage >= 1 else 1),
    )


def moe_row_factor(m: Model):
    """Expert rows a device holds per routed token (tokens * top_k): a token-dropping MoE pads every
    expert to its capacity, capacity_factor * tokens * top_k / experts (Fedus et al. 2022, Switch
    Transformer, arXiv 2101.03961, sec. 2.2; Megatron-Core moe_utils.get_capacity with
    --moe-pad-expert-input-to-capacity); a dropless one sizes them by the busiest expert's load."""
    cf = m.moe.capacity_factor if m.moe else None
    return cal.MOE_LOAD_IMBALANCE if cf is None else cf


def moe_dispatch_factor(m: Model):
    """All-to-all bytes per routed token (tokens * top_k * hidden): a token-dropping MoE dispatches
    capacity-shaped [experts, capacity, hidden] buffers, padding included (Lepikhin et al. 2020, GShard,
    arXiv 2006.16668, sec. 2.2 and algorithm 2); a dropless one sends the routed tokens alone."""
    cf = m.moe.capacity_factor if m.moe else None
    return 1.0 if cf is None else cf


def linear_input_bytes(precision: str) -> float:
    """Bytes per element of a saved GEMM input: 16-bit, or in FP8/FP4 training the quantised copy the GEMM
    read, which Transformer Engine's linear layers keep for the weight gradient instead of the 16-bit one
    (Megatron Core MoE report, arXiv 2603.07685 sec. 4.1.3: FP8 halves each linear-layer input kept, FP4
    quarters it)."""
    return PRECISION_BYTES[precision] if precision in ("fp8", "fp4") else 2.0


def recompute_modules(recompute: str) -> frozenset[str]:
    """The Megatron-Core modules (``--recompute-modules``) a ``recompute`` setting recomputes: ``selective``
    is core attention alone (Korthikanti et al. 2022 sec. 5, Megatron-Core's default module); ``none`` and
    ``full`` (every layer from its input) name none."""
    if recompute == "selective":
        return frozenset({"core_attn"})
    head, _, tail = recompute.partition(":")
    return frozenset(tail.split("+")) if head == "selective" and tail else frozenset()


def activation_bytes_per_layer(m: Model, b, s, tp, cp, sp: bool, recompute: str, flash: bool = True,
                               dropout: bool = False, moe_layer: bool = False, ep=1, precision: str = "bf16"):
    """Bytes one layer keeps for backward, per microbatch, per device (Korthikanti eq. 1-2 generalised).

    With MHA, a 4h GeLU MLP, dropout, no flash attention and tp = cp = 1 this is
    ``s*b*h*(34 + 5*a*s/h)``; selective recompute drops the ``5*a*s/h`` term; full keeps ``2*s*b*h``.
    Megatron-Core's fine-grained modules (``recompute_modules``) drop what they recompute: ``layernorm``
    the norms' outputs (the QKV and first-linear inputs), ``mla_up_proj`` MLA's Q, K and V (the up-projections'
    inputs, the latents, are kept instead), ``moe_act`` the experts' second-linear input, ``mlp`` a dense
    layer's MLP but its input (Megatron Core MoE report, arXiv 2603.07685 sec. 4.1.4, Table 4).
    In FP8/FP4 training the inputs kept only for an FP8 GEMM (the QKV and dense first-linear inputs, the
    tokens dispatched to the experts, the second linear's input) are the quantised copies
    (``linear_input_bytes``); the out-projection's input stays 16-bit (attention keeps its output for its
    own backward), and so do the router's input (a 16-bit GEMM) and a recompute checkpoint's inputs.
    """
    h, a, d = m.hidden, m.heads, m.head_dim
    q = linear_input_bytes(precision) / 2  # a GEMM-only input's bytes over 16-bit
    sbh = s * b * h / cp
    rep = tp if sp else 1  # tensors of width h are split by tp only with sequence parallelism
    if recompute == "full":
        return 2.0 * sbh / rep  # only the layer input is kept
    mods = recompute_modules(recompute)
    norm_out = 0.0 if "layernorm" in mods else 1.0  # a recomputed norm's output is not kept
    kv = kv_heads_per_rank(m, tp) * tp
    q_width = a * qk_dim(m)
    v_width = a * v_dim(m)
    k_width = q_width if m.mla else kv * d
    v_store = v_width if m.mla else kv * d
    tok = s * b / cp
    if m.mla is not None and "mla_up_proj" in mods:
        # the checkpoint's 16-bit inputs: the latents the up-projections read and the rope key, on every tp rank
        qkv = 2 * tok * (m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim)
    else:
        qkv = 2 * tok * (q_width + k_width + v_store) / tp
    attn = (2 * sbh / rep  # layer norm input
            + 2 * q * sbh / rep * norm_out  # QKV projection input
            + qkv  # Q, K, V for attention
            + 2 * tok * v_width / tp  # attention output = out-projection input
            + (sbh / rep if dropout else 0.0))  # attention-output dropout mask
    if not flash and "core_attn" not in mods:  # the s x s attention matrix (Korthikanti's 5as^2b)
        probs = a * s * s * b / cp / tp
        attn = attn + 2 * probs + ((probs + 2 * probs) if dropout else 0.0)
    if moe_layer and m.moe is not None:
        f, rows = m.moe.expert_ffn_hidden, tok * m.moe.top_k * moe_row_factor(m)
        fs = f * m.moe.shared_experts
    else:
        f, rows, fs = m.ffn_hidden, tok, 0
    up = 2 if m.gated else 1
    moe = moe_layer and m.moe is not None
    inner = 0.0 if not moe and "mlp" in mods else 1.0  # a recomputed dense MLP keeps its input alone
    routed_out = 0.0 if moe and "moe_act" in mods else 1.0  # the experts' activation output is recomputed
    # the norm's output: an FP8 GEMM's input in a dense MLP; the 16-bit router's input in an MoE layer, or
    # a recomputed MLP's 16-bit checkpoint input; freed with the norm recomputed (Megatron-Core discards it
    # after the MLP checkpoint read it)
    first = 1.0 if moe or not inner else q
    mlp = (2 * sbh / rep  # layer norm input
           + 2 * first * sbh / rep * norm_out  # first linear input
           + (2 * q * rows * h if moe else 0.0)  # tokens dispatched to experts
           + inner * 2 * (rows * f + tok * fs) * up / tp  # activation-function input
           + inner * 2 * q * (rows * f * routed_out + tok * fs) / tp  # second linear input
           + (sbh / rep if dropout else 0.0))
    return attn + mlp


def head_activation_bytes(m: Model, b, s, tp, cp):
    """The last stage's fp32 logits for the loss (Korthikanti sec. 4.3: 4*s*b*v/t)."""
    return 4.0 * s * b * m.vocab / tp / cp


def inflight_microbatches(pp, microbatches, virtual_stages, last: bool = False):
    """Microbatches whose activations a stage holds at peak under 1F1B, in units of its layers.

    First stage: min(p, m); interleaving adds (p - 1) / (p * v) (Narayanan et al. 2021 sec. 2.2.2).
    Last stage: 1 (it runs each backward right after its forward); interleaved, (v - 1) * p + 1 chunks
    of 1/v of its layers (Megatron-Core schedules.py: warm-up (p - rank - 1) * 2 + (v - 1) * p, plus one).
    """
    if last:
        v = np.asarray(virtual_stages)
        return np.minimum(np.where(v > 1, ((v - 1) * pp + 1) / v, 1.0), microbatches)
    base = np.minimum(pp, microbatches)
    return base * np.where(virtual_stages > 1, 1 + (pp - 1) / (pp * virtual_stages), 1.0)


def with_runtime_reserve(activations, states):
    return activations * cal.ACTIVATION_FRAGMENTATION + states + cal.RUNTIME_RESERVED_BYTES
