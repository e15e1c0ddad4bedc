"""Glue between the CLI and the engine for one design point: flags -> scenario -> record."""

from __future__ import annotations

from pathlib import Path

from llmsim.spec.presets import PresetRegistry

DEFAULT_SCENARIO = Path(__file__).parent / "scenarios" / "default.yaml"

# CLI flag -> dotted path in the scenario
FLAG_PATHS = {
    "model": "model", "accelerator": "system.accelerator", "devices": "system.num_devices",
    "network": "system.network", "tp": "parallel.tp", "pp": "parallel.pp", "dp": "parallel.dp",
    "cp": "parallel.cp", "ep": "parallel.ep", "microbatch_size": "parallel.microbatch_size",
    "global_batch_size": "workload.global_batch_size", "seq_len": "workload.seq_len",
    "recompute": "parallel.recompute", "zero_stage": "parallel.zero_stage",
    "precision": "workload.precision", "mode": "workload.mode", "batch_size": "workload.batch_size",
    "input_len": "workload.input_len", "output_len": "workload.output_len",
    "kv_precision": "workload.kv_precision",
}

def overrides_from_flags(flags: dict, sets: list[str]) -> list[str]:
    out = [f"{FLAG_PATHS[k]}={v}" for k, v in flags.items() if v is not None]
    return out + list(sets)


def load(path: str | Path | None, registry: PresetRegistry, overrides: list[str]):
    from llmsim.spec.convert import scenario_values
    from llmsim.spec.load import load_scenario

    spec = load_scenario(path, registry, overrides, default=DEFAULT_SCENARIO)
    return scenario_values(spec)


def record(sc) -> dict:
    """Inputs and every output column of one design point, flat."""
    p, w = sc.parallel, sc.workload
    rec = {"model": sc.names["model"], "accelerator": sc.names["accelerator"], "network": sc.names["network"],
           "num_devices": sc.num_devices, "tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep}
    if w.mode == "inference":
        from llmsim.engine.inference import estimate_inference

        rec.update({"mode": w.mode, "precision": w.precision, "kv_precision": w.kv_precision or w.precision,
                    "input_len": w.input_len, "output_len": w.output_len})
        rec.update(estimate_inference(sc))
        rec.update(_cost_columns(sc, rec["throughput_tokens_per_s"]))
        return rec
    from llmsim.engine.training import estimate_training

    rec.update({"microbatch_size": p.microbatch_size, "virtual_stages": p.virtual_stages,
                "sequence_parallel": p.sequence_parallel, "recompute": p.recompute, "zero_stage": p.zero_stage,
                "mode": w.mode, "precision": w.precision, "seq_len": w.seq_len,
                "global_batch_size": w.global_batch_size})
    rec.update(estimate_training(sc))
    rec.update(_cost_columns(sc, rec["tokens_per_s"]))
    return rec


def _cost_columns(sc, tokens_per_s: float) -> dict:
    """Device manufacturing cost and the system's capex, power, $/hour and $ per million tokens."""
    from llmsim.engine.system_cost import system_cost

    acc = sc.accelerator
    price = acc.list_price_usd if acc.list_price_usd is not None else acc.device_cost_usd
    out = {"device_cost_usd": acc.device_cost_usd}
    out.update(system_cost(sc.num_devices, price if price is not None else float("nan"),
                           acc.tdp_w if acc.tdp_w is not None else float("nan"), sc.network, sc.cost,
                           tokens_per_s))
    return out


def operator_rows(sc) -> list[dict]:
    """The per-operator table of ``llmsim estimate --ops``."""
    from llmsim.engine.op_table import operator_table

    return operator_table(sc)
