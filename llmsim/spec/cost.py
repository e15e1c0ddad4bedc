"""`llmsim cost`: an accelerator preset + technology presets -> the silicon cost model (engine/cost/silicon.py)."""

from __future__ import annotations

from functools import cache

from llmsim.engine.cost.silicon import YIELD_MODELS, Die, Package, device_cost
from llmsim.spec.errors import SpecError
from llmsim.spec.hardware import AcceleratorSpec
from llmsim.spec.presets import bundled_dir
from llmsim.spec.yamlio import load_yaml

PART_COLUMNS = ["logic_raw_usd", "logic_yield_loss_usd", "hbm_usd", "interposer_usd", "assembly_loss_usd",
                "test_assembly_usd", "kgd_test_usd", "nre_usd"]


@cache
def technology(kind: str) -> dict:
    """A technology table (logic, memory, packaging) from the bundled presets."""
    path = bundled_dir() / "technology" / f"{kind}.yaml"
    return load_yaml(path).data


def logic_node(name: str, where: str) -> tuple[str, dict]:
    """The logic node a process name (``n5``, ``TSMC 4N``, ...) denotes."""
    nodes = technology("logic")
    spelled = lambda text: "".join(str(text).split()).lower()  # "7 nm", "7nm" and "7NM" name one node
    key = spelled(name)
    for node, row in nodes.items():
        if key == node or key in (spelled(a) for a in row.get("aliases", [])):
            return node, row
    raise SpecError(f"{where}: unknown process node {name!r}; known: {', '.join(nodes)} (or their aliases)")


def _dies(a: AcceleratorSpec) -> list[Die]:
    if a.chiplets:
        out = []
        for i, c in enumerate(a.chiplets):
            _, row = logic_node(c.node, f"accelerator {a.name}: chiplets[{i}].node")
            out.append(Die(c.name, c.area_mm2, c.count, row["wafer_usd"], row["defect_density_per_cm2"],
                           c.stacked, row.get("design_nre_usd")))
        return out
    if not a.die_area_mm2 or not a.process_node:
        raise SpecError(f"accelerator {a.name}: the cost model needs die_area_mm2 and process_node (or chiplets)")
    n = a.num_dies or 1
    _, row = logic_node(a.process_node, f"accelerator {a.name}: process_node")
    return [Die("logic", a.die_area_mm2 / n, n, row["wafer_usd"], row["defect_density_per_cm2"],
                design_nre_usd=row.get("design_nre_usd"))]


def accelerator_cost(a: AcceleratorSpec, model: str = "negative-binomial", volume: float | None = None) -> dict:
    """Cost breakdown of one accelerator preset (USD); ``volume``: units over which NRE is shared."""
    if model not in YIELD_MODELS:
        raise SpecError(f"--yield-model: unknown {model!r}; allowed: {', '.join(YIELD_MODELS)}")
    dies = _dies(a)
    if volume:
        known = [n for n, r in technology("logic").items() if "design_nre_usd" in r]
        for d in dies:
            if d.design_nre_usd is None:
                raise SpecError(f"--volume: the {d.name} die of {a.name} is on a node without a design cost "
                                f"(presets/technology/logic.yaml design_nre_usd); nodes with one: {', '.join(known)}")
    stacks = a.hbm_stacks or 0
    mem = technology("memory")
    # the memory table's own spelling of the generation ("HBM3E" and "HBM3e" are one part)
    gen = next((k for k in mem if str(k).lower() == str(a.hbm_generation).lower()), a.hbm_generation)
    board = str(gen).upper().startswith("GDDR")  # graphics DRAM: chips on the board, priced, not packaged
    if (stacks or board) and gen not in mem:
        raise SpecError(f"accelerator {a.name}: hbm_generation {gen!r} has no cost entry; known: {', '.join(mem)}")
    hbm = mem[gen] if stacks or board else {"usd_per_gb": 0.0, "footprint_mm2": 0.0}
    kind = a.package or ("cowos-s" if stacks else "organic")
    pkg = Package(**technology("packaging")[kind])
    try:
        out = device_cost(dies, stacks, hbm["footprint_mm2"], a.hbm_capacity_gb if stacks or board else 0.0,
                          hbm["usd_per_gb"], pkg, model, a.hbm_sites, volume)
    except (ZeroDivisionError, OverflowError):  # a package so large that not one in 1e308 is good
        raise SpecError(f"accelerator '{a.name}': its dies and package are too large to make (yield 0)") from None
    return {"accelerator": a.name, "package": kind, "yield_model": model, "volume": volume, **out}
