"""Sustained compute rates of a device: a large GEMM's fraction of peak (measured MAMF times
``KERNEL_EFFICIENCY``) and fused attention's (measured kernels, or from the GEMM rate), used by
``compute.op_time``."""

from __future__ import annotations

from llmsim.engine import calibration as cal
from llmsim.engine.types import Accelerator


def matmul_efficiency(acc: Accelerator, precision: str):
    """Sustained fraction of peak of a large GEMM in a step: the measured (MAMF) fraction times
    KERNEL_EFFICIENCY (DEFAULT_MATMUL_FRACTION where the preset has no measurement at that precision).
    Smaller shapes lose more to their tiles (engine/gemm_shape.py)."""
    peak = acc.peak(precision)
    measured = acc.measured_matmul_flops_per_s.get(precision)
    fraction = measured / peak if measured and peak else cal.DEFAULT_MATMUL_FRACTION
    return fraction * cal.KERNEL_EFFICIENCY


def attention_rates(acc: Accelerator, kernel: str = "auto") -> tuple[float, float] | None:
    """(forward, backward) FLOP/s the device's fused-attention ``kernel`` reaches on long sequences, as
    measured (preset ``measured_attention_tflops``); ``auto`` picks the fastest measured kernel for a
    training pass (forward + 2.5x backward work). None when the preset has no measurement."""
    rates = acc.attention_flops_per_s
    if not rates:
        return None
    if kernel == "auto":
        return min(rates.values(), key=lambda r: 1 / r[0] + cal.FLASH_BWD_FLOPS_RATIO / r[1])
    return rates[kernel]


def attention_flops_per_s(acc: Accelerator, seq, backward: bool, kernel: str):
    """FLOP/s of fused attention over sequences of ``seq`` tokens (forward or ``backward``)."""
    # Fused attention: the measured kernel throughput, or else the matmul efficiency times
    # ATTENTION_MATMUL_RATIO; times KERNEL_EFFICIENCY (clocks in a real step) and the short-sequence
    # roll-off seq / (seq + ATTENTION_HALF_SEQ) (FlashAttention-3 paper, arXiv 2407.08608, fig. 5-6).
    rates = attention_rates(acc, kernel)
    if rates is None:
        best = acc.peak("bf16") * matmul_efficiency(acc, "bf16") * cal.ATTENTION_MATMUL_RATIO
    else:
        best = rates[1 if backward else 0] * cal.KERNEL_EFFICIENCY
    return best * seq / (seq + cal.ATTENTION_HALF_SEQ)
