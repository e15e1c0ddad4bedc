"""Per-operator roofline table (``llmsim estimate --ops``): why a phase is slow.

For each operator of one layer (training: one microbatch, forward + backward; inference: the prefill
of the batch and one decode step at the mean of the contexts TPOT samples) its FLOPs, HBM bytes, arithmetic intensity
against the device's ridge point (peak FLOP/s / HBM bandwidth; Williams et al. 2009, roofline), which
roof bounds it, and its share of the phase's time; the layer's collectives appear as ``network`` rows.
The operators are the ones the step models time (``layer_times.layer_operators``, ``inference.phase_ops``),
each at ``compute.kernel_time``.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine.compute import ACT_BYTES, Op, bound, kernel_time
from llmsim.engine.errors import DesignError
from llmsim.engine.network.topology import group_path, strides
from llmsim.engine.split import resolve_split
from llmsim.engine.types import Scenario


def _row(phase: str, op: Op, sc: Scenario, backward: bool) -> dict:
    acc, prec, kern = sc.accelerator, sc.workload.precision, sc.parallel.attention_kernel
    t = kernel_time(op, acc, prec, kern, inference=not backward)
    flops, nbytes = op.flops, op.bytes
    if backward:
        t += kernel_time(op, acc, prec, kern, backward=True)
        flops, nbytes = flops * (1 + op.bwd_ratio), nbytes * (1 + op.bwd_ratio)
    return {"phase": phase, "op": op.name, "flops": float(flops), "bytes": float(nbytes),
            "intensity_flop_per_byte": float(flops / nbytes) if nbytes else float("inf"),
            "ridge_flop_per_byte": acc.peak(prec) / acc.hbm_bw_bytes_per_s,
            "bound": bound(op, acc, prec), "time_s": float(t)}


def _network_row(phase: str, name: str, nbytes: float, t: float) -> dict:
    return {"phase": phase, "op": name, "flops": 0.0, "bytes": nbytes, "intensity_flop_per_byte": 0.0,
            "ridge_flop_per_byte": None, "bound": "network", "time_s": t}


def _with_shares(rows: list[dict]) -> list[dict]:
    for phase in dict.fromkeys(r["phase"] for r in rows):
        total = sum(r["time_s"] for r in rows if r["phase"] == phase)
        for r in rows:
            if r["phase"] == phase:
                r["time_share"] = r["time_s"] / total if total else 0.0
    return rows


def _tp_rows(sc: Scenario, sp, phase: str, tokens: float, count: int) -> list[dict]:
    p = sc.parallel
    if p.tp <= 1:
        return []
    from llmsim.engine.inference import tp_all_reduce

    nbytes = tokens * sc.model.hidden * ACT_BYTES
    stride = strides(p.order, sp.degrees)["tp"]
    t = float(tp_all_reduce(sc, np.array([p.tp]), np.array([stride]), np.array([nbytes]))[0][0])
    return [_network_row(phase, f"tp_all_reduce x{count}", nbytes * count, t * count)]


def operator_table(sc: Scenario) -> list[dict]:
    """Rows of the per-operator table for the scenario's mode (the MoE layer for MoE models)."""
    m, p, w = sc.model, sc.parallel, sc.workload
    if w.mode == "serving":  # a serving step mixes prompt chunks and decode tokens: no one table yet
        raise DesignError("the per-operator view (estimate --ops, plot roofline) covers training and a static "
                          "batch; for serving, look at one with --mode inference --batch-size N",
                          path="workload.mode")
    moe = m.moe is not None
    sp = resolve_split(sc)
    if w.mode == "inference":
        from llmsim.engine.inference import decode_contexts, phase_ops, resolve_batch

        b = resolve_batch(sc, sp)
        rows = [_row("prefill", op, sc, False) for op in phase_ops(sc, sp, b, w.input_len)[moe]]
        rows += _tp_rows(sc, sp, "prefill", b * w.input_len, 2)
        ctx = float(np.mean(decode_contexts(w.input_len, w.output_len)))
        rows += [_row("decode step", op, sc, False) for op in phase_ops(sc, sp, b, 1, ctx)[moe]]
        rows += _tp_rows(sc, sp, "decode step", b, 2)
        return _with_shares(rows)
    from llmsim.engine.layer_times import layer_operators

    seqpar = p.sequence_parallel and p.tp > 1
    ops = layer_operators(sc, sp.microbatch_size, sp.tp, sp.cp, sp.ep, sp.expert_tp)[moe]
    rows = [_row("layer fwd+bwd", op, sc, True) for op in ops]
    if p.tp > 1:  # exposed TP communication of the layer, as the training model overlaps it
        from llmsim.engine.tensor_parallel import layer_tp_comm

        nbytes = sp.microbatch_size * w.seq_len / p.cp * m.hidden * ACT_BYTES
        path = group_path(sc.network, p.order, sp.degrees, "tp")
        tpc = layer_tp_comm(ops, nbytes, p.tp, seqpar, path, sc.accelerator, w.precision, p.tp_comm_overlap)
        rows.append(_network_row("layer fwd+bwd", "tp_comm (exposed)", 4 * nbytes, tpc.forward_s + tpc.backward_s))
    return _with_shares(rows)

