"""Validated specs -> plain frozen SI values for the engine."""

from __future__ import annotations

from llmsim.engine.settings import ServingSettings, WorkloadSettings
from llmsim.engine.types import (
    MLA,
    Accelerator,
    AttentionWindow,
    CostRates,
    Disaggregation,
    Model,
    MoE,
    Network,
    Parallel,
    Reliability,
    Scenario,
    Serving,
    Speculative,
    Tier,
    Workload,
)
from llmsim.spec.declared import declared_kwargs, declared_values
from llmsim.spec.errors import SpecError
from llmsim.spec.hardware import PRECISIONS, AcceleratorSpec, NetworkSpec, PrecisionTflops
from llmsim.spec.model import ModelSpec
from llmsim.spec.scenario import ScenarioSpec

GB = 1e9
TB = 1e12
TFLOPS = 1e12
MB = 1e6
US = 1e-6


def _flops(tflops: PrecisionTflops | None) -> dict[str, float]:
    if tflops is None:
        return {}
    return {p: getattr(tflops, p) * TFLOPS for p in PRECISIONS if getattr(tflops, p) is not None}


def model_values(m: ModelSpec) -> Model:
    return Model(
        name=m.name, layers=m.layers, hidden=m.hidden, ffn_hidden=m.ffn_hidden, heads=m.heads,
        kv_heads=m.kv_heads or m.heads, head_dim=m.head_dim or m.hidden // m.heads, vocab=m.vocab,
        activation=m.activation, tied_embeddings=m.tied_embeddings, bias=m.bias, dropout=m.dropout,
        moe=None if m.moe is None else MoE(**m.moe.model_dump()),
        mla=None if m.mla is None else MLA(**m.mla.model_dump()),
        attention_window=None if m.attention_window is None else AttentionWindow(
            kind=m.attention_window.kind, tokens=m.attention_window.tokens,
            layers=m.attention_window.layers or m.layers),
    )


def accelerator_values(a: AcceleratorSpec) -> Accelerator:
    return Accelerator(
        name=a.name, peak_flops_per_s=_flops(a.peak_tflops),
        measured_matmul_flops_per_s=_flops(a.measured_matmul_tflops),
        attention_flops_per_s={k: (r.fwd * TFLOPS, r.bwd * TFLOPS)
                               for k, r in (a.measured_attention_tflops or {}).items()},
        hbm_bytes=a.hbm_capacity_gb * GB, hbm_bw_bytes_per_s=a.hbm_bandwidth_tb_per_s * TB,
        sram_bytes=(a.sram_mb or 0.0) * MB, scaleup_bw_bytes_per_s=a.scaleup_bw_gb_per_s_per_dir * GB,
        scaleout_bw_bytes_per_s=a.scaleout_bw_gb_per_s_per_dir * GB, tdp_w=a.tdp_w,
        die_area_mm2=a.die_area_mm2, num_dies=a.num_dies, hbm_stacks=a.hbm_stacks,
        list_price_usd=a.list_price_usd, cloud_usd_per_hour=a.cloud_usd_per_hour,
        device_cost_usd=_manufacturing_cost(a), sm80_matmul_fraction=a.sm80_matmul_fraction,
    )


def _manufacturing_cost(a: AcceleratorSpec) -> float | None:
    from llmsim.spec.cost import accelerator_cost

    try:
        return float(accelerator_cost(a)["device_cost_usd"])
    except SpecError:  # no die area / node / HBM cost entry: cost columns fall back to the list price
        return None


def network_values(n: NetworkSpec) -> Network:
    return Network(name=n.name, tiers=tuple(
        Tier(name=t.name, size=t.size, topology=t.topology, bw_bytes_per_s=t.bw_gb_per_s_per_dir * GB,
             latency_s=t.latency_us * US, oversubscription=t.oversubscription,
             ll_latency_s=None if t.ll_latency_us is None else t.ll_latency_us * US,
             in_network_reduction=t.in_network_reduction, dims=tuple(t.dims or ()), radix=t.radix,
             levels=t.levels, rail_optimized=t.rail_optimized, group_size=t.group_size,
             global_bw_bytes_per_s=(t.global_bw_gb_per_s_per_dir or 0.0) * GB)
        for t in n.tiers))


def _lengths(w) -> dict:
    """The workload's mean lengths (ints when they are whole, as fixed lengths are) and their spread."""
    m = w.length_moments()
    for key in ("input_len", "output_len"):
        m[key] = int(m[key]) if float(m[key]).is_integer() else m[key]
    if w.input_len is None and w.requests is None:
        m["input_len"] = None
    if w.output_len is None and w.requests is None:
        m["output_len"] = None
    return m


def _draft_precision(p) -> dict:
    """A draft model's precision by component, as the engine's Speculative takes it."""
    return {"draft_precision": p.activations, "draft_weight_precision": p.weights, "draft_expert_precision": p.experts}


def _serving(s, acc) -> Serving:
    from llmsim.spec.engines import scheduler_defaults

    d = s.disaggregation
    pools = None if d is None else Disaggregation(
        prefill_tp=d.prefill.tp, prefill_pp=d.prefill.pp, decode_tp=d.decode.tp, decode_pp=d.decode.pp,
        prefill_ep=d.prefill.ep, decode_ep=d.decode.ep, prefill_attention_dp=d.prefill.attention_dp,
        decode_attention_dp=d.decode.attention_dp,
        prefill_devices=None if d.prefill_devices == "auto" else d.prefill_devices,
        kv_transfer_layerwise=d.kv_transfer == "layerwise")
    sp = s.speculative
    spec = None if sp is None else Speculative(
        acceptance_rate=sp.acceptance_rate, draft_tokens=sp.draft_tokens, draft_layers=sp.draft_layers,
        draft_model=None if sp.draft_model is None else model_values(sp.draft_model),
        **({} if sp.draft_model is None else _draft_precision(sp.draft_precision_spec())))
    filled = scheduler_defaults(s.engine, acc.name, acc.hbm_bytes)
    given = declared_kwargs(ServingSettings, s)
    return Serving(**{k: (filled[k] if v is None and k in filled else v) for k, v in given.items()},
                   disaggregation=pools, speculative=spec)


def scenario_values(s: ScenarioSpec) -> Scenario:
    p, w = s.parallel, s.workload
    acc = accelerator_values(s.system.accelerator)
    prec = s.precision()
    return Scenario(
        model=model_values(s.model), accelerator=acc,
        num_devices=s.system.num_devices, network=network_values(s.system.network),
        parallel=declared_values(Parallel, p),
        workload=Workload(**declared_kwargs(WorkloadSettings, w), precision=prec.activations, **_lengths(w),
                          weight_precision=prec.weights, expert_precision=prec.experts,
                          kv_cache_precision=prec.kv_cache),
        cost=declared_values(CostRates, s.cost), reliability=declared_values(Reliability, s.reliability),
        serving=_serving(s.serving, acc),
        names={"model": s.model.name, "accelerator": s.system.accelerator.name,
               "network": s.system.network.name},
    )
