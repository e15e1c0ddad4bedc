"""Derived accelerators: a preset moved to another logic node, memory generation and link generation.

``accelerator: {base: a100-sxm-80gb, node: n3, memory: HBM3e, stacks: 8, scaleup: nvlink5}`` keeps the
base's architecture and die area and scales it by documented rules (presets/technology/):
  transistors  x density ratio of the nodes (product densities, logic.yaml) x die-area ratio;
  clock        x min(speed gain, power headroom): at the base clock the chip draws density x energy-per-op
               of the base's power; the clock then rises by the foundry's iso-power speed gain, or falls,
               until the power budget (the base TDP, or ``tdp_w``) is met (dynamic power ~ clock at fixed
               voltage, Horowitz ISSCC 2014);
  peak FLOP/s  x transistors x clock (every precision; measured matmul and attention rates alike);
  HBM          stacks x per-stack bandwidth x the base's fraction of its own stacks' rated bandwidth;
               capacity stacks x per-stack capacity;
  links        the named generation's per-direction bandwidth;
  price        the base's list price x (derived / base manufacturing cost): the vendor's margin kept.
"""

from __future__ import annotations

import math

from llmsim.spec.base import PosFloat, PosInt
from llmsim.spec.errors import SpecError

KEYS = {"base", "name", "node", "memory", "stacks", "gb_per_stack", "scaleup", "scaleout", "tdp_w",
        "die_area_mm2", "num_dies"}
NUMBERS = {"stacks": PosInt, "gb_per_stack": PosFloat, "tdp_w": PosFloat, "die_area_mm2": PosFloat,
           "num_dies": PosInt}  # the numeric keys and what each allows


def _check_numbers(spec: dict, where: str) -> None:
    from pydantic import TypeAdapter, ValidationError

    for key, kind in NUMBERS.items():
        if key in spec:
            try:
                TypeAdapter(kind).validate_python(spec[key])
            except ValidationError as err:
                first = err.errors(include_url=False)[0]
                raise SpecError(f"{where}.{key}: {first['msg'].removeprefix('Input ')} (got {spec[key]!r:.40})") from None


def _node_chain(logic: dict, node: str) -> list[str]:
    chain = [node]
    while logic[chain[-1]].get("previous"):
        chain.append(logic[chain[-1]]["previous"])
    return chain


def node_ratios(logic: dict, base: str, new: str) -> tuple[float, float, float]:
    """(density, speed, energy per op) of node ``new`` relative to ``base``."""
    for n in (base, new):
        if "density_mtr_per_mm2" not in logic[n]:
            raise SpecError(f"node {n} has no scaling data in presets/technology/logic.yaml; "
                            f"nodes with it: {', '.join(k for k, v in logic.items() if 'density_mtr_per_mm2' in v)}")

    def cumulative(node: str) -> tuple[float, float]:  # speed and energy relative to the oldest node
        chain = _node_chain(logic, node)
        speed = math.prod(logic[n].get("speed_vs_prev", 1.0) for n in chain)
        energy = math.prod(logic[n].get("energy_vs_prev", 1.0) for n in chain)
        return speed, energy

    (s0, e0), (s1, e1) = cumulative(base), cumulative(new)
    return logic[new]["density_mtr_per_mm2"] / logic[base]["density_mtr_per_mm2"], s1 / s0, e1 / e0


def compute_scale(density: float, speed: float, energy: float, power_ratio: float = 1.0) -> float:
    """Peak FLOP/s of the derived chip over the base's: transistors x clock at the power budget."""
    clock = min(speed, power_ratio / (density * energy))
    return density * clock


def derive_accelerator(spec: dict, registry, where: str) -> dict:
    """An AcceleratorSpec mapping for a ``{base: ..., ...}`` accelerator entry."""
    from llmsim.spec.cost import accelerator_cost, logic_node, technology

    unknown = set(spec) - KEYS
    if unknown:
        raise SpecError(f"{where}: unknown key {min(map(str, unknown))!r}; allowed: {', '.join(sorted(KEYS))}")
    _check_numbers(spec, where)
    base = registry.get("accelerators", str(spec["base"]))
    if base.chiplets:
        raise SpecError(f"{where}: deriving from a chiplet preset ({base.name}) is not supported yet")
    out = base.model_dump(exclude_none=True)
    logic = technology("logic")
    base_node, _ = logic_node(base.process_node or "", f"{where}.base process_node")
    new_node, _ = logic_node(str(spec.get("node", base_node)), f"{where}.node")
    density, speed, energy = node_ratios(logic, base_node, new_node)
    area = float(spec.get("die_area_mm2", base.die_area_mm2 or 1.0))
    tdp = float(spec.get("tdp_w", base.tdp_w or 0)) or None
    power_ratio = tdp / base.tdp_w if tdp and base.tdp_w else 1.0
    # more silicon area is more transistors, as a denser node is
    k = compute_scale(density * area / (base.die_area_mm2 or area), speed, energy, power_ratio)
    for field in ("peak_tflops", "measured_matmul_tflops"):
        if field in out:
            out[field] = {p: v * k for p, v in out[field].items()}
    if "measured_attention_tflops" in out:
        out["measured_attention_tflops"] = {n: {d: v * k for d, v in r.items()}
                                            for n, r in out["measured_attention_tflops"].items()}
    mem = technology("memory")
    gen = str(spec.get("memory", base.hbm_generation))
    if gen not in mem or base.hbm_generation not in mem:
        raise SpecError(f"{where}.memory: unknown HBM generation {gen!r}; known: {', '.join(mem)}")
    stacks = int(spec.get("stacks", base.hbm_stacks or 1))
    rated = (base.hbm_stacks or 1) * mem[base.hbm_generation]["bw_gb_per_s"] / 1e3
    out.update(hbm_generation=gen, hbm_stacks=stacks,
               hbm_bandwidth_tb_per_s=stacks * mem[gen]["bw_gb_per_s"] / 1e3 * base.hbm_bandwidth_tb_per_s / rated,
               hbm_capacity_gb=stacks * float(spec.get("gb_per_stack", mem[gen]["gb"])),
               process_node=new_node, tdp_w=tdp or out.get("tdp_w"), die_area_mm2=area,
               num_dies=int(spec.get("num_dies", base.num_dies or 1)))
    links = technology("links")
    for key, field in (("scaleup", "scaleup_bw_gb_per_s_per_dir"), ("scaleout", "scaleout_bw_gb_per_s_per_dir")):
        if key in spec:
            row = links.get(str(spec[key]), {})
            if f"{key}_gb_per_s" not in row:
                allowed = [n for n, r in links.items() if f"{key}_gb_per_s" in r]
                raise SpecError(f"{where}.{key}: unknown link {spec[key]!r}; allowed: {', '.join(allowed)}")
            out[field] = row[f"{key}_gb_per_s"]
    parts = [f"{new_node}", f"{gen}x{stacks}", *(str(spec[x]) for x in ("scaleup", "scaleout") if x in spec),
             *([f"{tdp:g}W"] if "tdp_w" in spec else [])]
    out["name"] = str(spec.get("name") or f"{base.name}[{','.join(parts)}]")
    out["description"] = f"derived from {base.name}: {', '.join(f'{x}={spec[x]}' for x in sorted(spec))}"
    out.pop("list_price_usd", None)
    from pydantic import ValidationError

    from llmsim.spec.hardware import AcceleratorSpec

    try:
        derived = AcceleratorSpec.model_validate(out)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        raise SpecError(f"{where}: the derived accelerator is invalid: {'.'.join(map(str, first['loc']))}: "
                        f"{first['msg']}") from None
    if base.list_price_usd:
        ratio = accelerator_cost(derived)["device_cost_usd"] / accelerator_cost(base)["device_cost_usd"]
        derived = derived.model_copy(update={"list_price_usd": base.list_price_usd * ratio})
    return derived.model_dump(exclude_none=True)
