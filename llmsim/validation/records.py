"""The published measured runs of the calibration set and what converting any of them needs.

``llmsim/data/published_runs.yaml`` is a verbatim copy of the project's reference data; ``training.py``
and ``inference.py`` convert each usable record into a scenario at run time (no hand-copied numbers).
"""

from __future__ import annotations

from pathlib import Path

import yaml

DATA = Path(__file__).parent.parent / "data" / "published_runs.yaml"
# settings the records omit, each cited to the recipe the run was launched with (not calibration)
RECIPES = Path(__file__).parent.parent / "data" / "recipe_settings.yaml"

# record accelerator name -> (accelerator preset, network preset): training records name the exact SKU,
# serving benchmarks the product
HARDWARE = {"A100-SXM4-80GB": ("a100-sxm-80gb", "dgx-a100"), "A100-SXM4-40GB": ("a100-sxm-40gb", "dgx-a100"),
            "H100-SXM5-80GB": ("h100-sxm", "dgx-h100"), "H200-SXM-141GB": ("h200-sxm", "dgx-h200"),
            "H100": ("h100-sxm", "dgx-h100"), "H200": ("h200-sxm", "dgx-h200"), "B200": ("b200", "dgx-b200"),
            "GB200": ("gb200", "gb200-nvl72")}


class Skip(Exception):
    """A record llmsim cannot model; the message is the reason."""


def load_records(path: Path = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def recipe_settings(path: Path = RECIPES) -> dict[str, dict[str, dict]]:
    """Record id -> scenario section -> key -> setting value (the file cites a source for each)."""
    with open(path, encoding="utf-8") as fh:
        entries = yaml.safe_load(fh)
    return {e["id"]: {sec: {k: v["value"] for k, v in keys.items()} for sec, keys in e.items() if sec != "id"}
            for e in entries}


def system_of(rec: dict) -> tuple[str, str]:
    """(accelerator preset, network preset) of the hardware a record ran on."""
    name = rec["hardware"]["accelerator"]
    if name not in HARDWARE:
        raise Skip(f"no preset for accelerator {name}")
    return HARDWARE[name]


def scenario_of(data: dict, registry):
    """Frozen scenario values of a converted record (presets resolved, schema checked)."""
    from llmsim.spec.convert import scenario_values
    from llmsim.spec.load import resolve_presets
    from llmsim.spec.scenario import ScenarioSpec
    from llmsim.spec.yamlio import Document

    resolve_presets(data, Document(data, "published_runs.yaml"), registry)
    return scenario_values(ScenarioSpec.model_validate(data))
