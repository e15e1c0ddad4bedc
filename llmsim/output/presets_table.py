"""Rows describing presets for ``llmsim presets list``."""

from __future__ import annotations

from llmsim.spec.convert import model_values
from llmsim.spec.hardware import AcceleratorSpec, NetworkSpec
from llmsim.spec.model import ModelSpec
from llmsim.spec.presets import KINDS, PresetRegistry

COLUMNS = {
    None: ["name", "kind", "description"],
    "accelerators": ["name", "description", "bf16_tflops", "fp8_tflops", "fp4_tflops", "hbm_gb",
                     "hbm_tb_per_s", "scaleup_gb_per_s_per_dir", "scaleout_gb_per_s_per_dir", "tdp_w"],
    "models": ["name", "description", "params_b", "active_params_b", "layers", "hidden", "heads",
               "kv_heads", "experts", "top_k"],
    "networks": ["name", "description", "tiers", "max_devices"],
}


def _accelerator_row(a: AcceleratorSpec) -> dict:
    return {"bf16_tflops": a.peak_tflops.bf16, "fp8_tflops": a.peak_tflops.fp8,
            "fp4_tflops": a.peak_tflops.fp4, "hbm_gb": a.hbm_capacity_gb,
            "hbm_tb_per_s": a.hbm_bandwidth_tb_per_s, "scaleup_gb_per_s_per_dir": a.scaleup_bw_gb_per_s_per_dir,
            "scaleout_gb_per_s_per_dir": a.scaleout_bw_gb_per_s_per_dir, "tdp_w": a.tdp_w}


def _model_row(m: ModelSpec) -> dict:
    from llmsim.engine.params import param_counts

    counts = param_counts(model_values(m))
    return {"params_b": round(counts.total / 1e9, 2), "active_params_b": round(counts.active / 1e9, 2),
            "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads or m.heads,
            "experts": m.moe.experts if m.moe else None, "top_k": m.moe.top_k if m.moe else None}


def _network_row(n: NetworkSpec) -> dict:
    tiers = " > ".join(f"{t.name}:{t.size} {t.topology} {t.bw_gb_per_s_per_dir:g} GB/s" for t in n.tiers)
    return {"tiers": tiers, "max_devices": n.tiers[-1].size}


ROW = {"accelerators": _accelerator_row, "models": _model_row, "networks": _network_row}


def preset_rows(registry: PresetRegistry, kind: str | None) -> list[dict]:
    rows = []
    for k in ([kind] if kind else list(KINDS)):
        for name in registry.names(k):
            spec = registry.get(k, name)
            row = {"name": name, "kind": k, "description": spec.description}
            if kind:
                row.update(ROW[k](spec))
            rows.append(row)
    return rows
