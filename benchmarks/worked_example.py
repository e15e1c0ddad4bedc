"""The numbers of docs/methodology.md section 10 (worked example: the default scenario), recomputed.

    python benchmarks/worked_example.py

`llmsim calibrate` refits the constants the worked example uses (KERNEL_EFFICIENCY, KERNEL_OVERHEAD_S);
after it, run this and copy the changed figures into section 10 (tests/test_validate_report.py checks the
headline ones against `llmsim estimate`).
"""

from __future__ import annotations

from llmsim.engine import calibration as cal
from llmsim.engine.compute import head_ops, op_time
from llmsim.engine.layer_times import _pass_time, layer_operators
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est


def main() -> None:
    sc = est.load(None, PresetRegistry(), [])
    acc, k = sc.accelerator, cal.KERNEL_EFFICIENCY
    print(f"KERNEL_EFFICIENCY {k}   KERNEL_OVERHEAD_S {cal.KERNEL_OVERHEAD_S * 1e6:.2f} us")
    print(f"GEMM rate        794.5/989.4 * k = {794.5 / 989.4 * k:.3f} of peak, then tile padding and the memory blend"
          f" (GEMM_FIXED_S {cal.GEMM_FIXED_S * 1e6:.1f} us per kernel)")
    print(f"attention        fwd {616 * k * 8192 / 8472:.1f} TF, bwd {561 * k * 8192 / 8472:.1f} TF")
    dense, _ = layer_operators(sc, 1, 8, 1, 1)
    for op in dense:
        f = op_time(op, acc, "bf16")
        b = op_time(op, acc, "bf16", backward=True) * op.bwd_ratio
        eta = f"  eta {op.flops / f / acc.peak('bf16'):.3f}" if op.kind == "gemm" else ""
        print(f"  {op.name:14s} fwd {f * 1e3:.3f} ms  bwd {b * 1e3:.3f} ms{eta}")
    fwd, bwd, attn, _ = _pass_time(dense, sc)
    print(f"t_f {fwd * 1e3:.3f} ms  t_b {bwd * 1e3:.3f} ms  t_attn {attn * 1e3:.3f} ms  per layer "
          f"{(fwd + bwd + attn) * 1e3:.3f} ms")
    head = head_ops(sc.model, 1, 8192, 8, 1, "bf16")
    hf, hb, _, _ = _pass_time(head, sc)
    logits = next(o for o in head if o.name == "logits")
    print(f"logits {op_time(logits, acc, 'bf16') * 1e3:.3f} ms  head fwd {hf * 1e3:.3f} ms  bwd {hb * 1e3:.3f} ms")
    compute_mb = 40 * (fwd + bwd + attn) + hf + hb
    rec = est.record(sc)
    m = rec["microbatches"]
    tp_mb, pp_mb = rec["tp_comm_time_s"] / m, rec["pp_comm_time_s"] / m
    per_mb = compute_mb + tp_mb + pp_mb
    print(f"compute_mb {compute_mb * 1e3:.2f} ms  tp {tp_mb * 1e3:.2f} ms  pp {pp_mb * 1e3:.2f} ms  per_mb "
          f"{per_mb * 1e3:.2f} ms  pipeline {m * per_mb:.3f} s")
    for key in ("step_time_s", "tokens_per_s", "tokens_per_s_per_device", "mfu", "compute_time_s",
                "tp_comm_time_s", "bubble_time_s", "optimizer_time_s", "memory_per_device_gb",
                "cost_per_million_tokens_usd", "energy_per_token_j"):
        print(f"{key:28s} {rec[key]}")


if __name__ == "__main__":
    main()
