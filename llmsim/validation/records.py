"""The published measured runs of the calibration set and what converting any of them needs.

``llmsim/data/published_runs.yaml`` is a verbatim copy of the project's reference data; ``training.py``
and ``inference.py`` convert each usable record into a scenario at run time (no hand-copied numbers).
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

DATA = Path(__file__).parent.parent / "data" / "published_runs.yaml"
# batch-1 decode latencies collected for issue 20, in the same record schema (category inference_decode_latency)
DECODE_DATA = Path(__file__).parent.parent / "data" / "decode_latency_runs.yaml"
# settings the records omit, each cited to the recipe the run was launched with (not calibration)
RECIPES = Path(__file__).parent.parent / "data" / "recipe_settings.yaml"
SERVING_DATA = Path(__file__).parent.parent / "data" / "serving_runs.yaml"

# record accelerator name -> (accelerator preset, network preset): training records name the exact SKU,
# serving benchmarks the product
HARDWARE = {"A100-SXM4-80GB": ("a100-sxm-80gb", "dgx-a100"), "A100-SXM4-40GB": ("a100-sxm-40gb", "dgx-a100"),
            "H100-SXM5-80GB": ("h100-sxm", "dgx-h100"), "H200-SXM-141GB": ("h200-sxm", "dgx-h200"),
            "H100": ("h100-sxm", "dgx-h100"), "H200": ("h200-sxm", "dgx-h200"), "B200": ("b200", "dgx-b200"),
            "GB200": ("gb200", "gb200-nvl72"), "MI300X": ("mi300x", "mi300x-8"), "MI325X": ("mi325x", "mi325x-8"),
            "MI355X": ("mi355x", "mi355x-8"),
            "H100 (SXM, 96GB HBM2e, 500W power limit; Grand Teton)": ("h100-sxm-96gb", "grand-teton-h100"),
            "TPU v6e (Trillium)": ("tpu-v6e", "tpu-v6e-256"), "TPU v5p": ("tpu-v5p", "tpu-v5p-pod")}
# systems larger than the network preset's last tier: several slices over the data-centre network
MULTI_SLICE = {("tpu-v6e-256", 512): "tpu-v6e-2x256-dcn"}

# record id prefix -> source: one publication or benchmark table, the unit of leave-one-source-out
SOURCES = {"megatron": "Megatron-LM 2021", "korthikanti": "Korthikanti 2022", "mcore": "Megatron-Core r0.8",
           "nemo2407": "NeMo 24.07", "mpt": "llm-foundry", "torchtitan": "TorchTitan", "tpurecipes": "tpu-recipes",
           "trtllm_perfov": "TensorRT-LLM overview", "trtllm_v09": "TensorRT-LLM v0.9", "mlperf": "MLPerf v4.1",
           "gptfast": "gpt-fast", "lmdeploy": "LMDeploy", "rocmblog": "AMD ROCm blog", "nim": "NVIDIA NIM",
           "sglang": "SGLang torchao blog", "nvblog": "NVIDIA TensorRT-LLM blog"}


def source_of(rec: dict) -> str:
    """The publication or benchmark table a record comes from (``SOURCES``)."""
    rid = rec["id"]
    return next((name for prefix, name in SOURCES.items() if rid.startswith(prefix)), rid.split("_")[0])


class Skip(Exception):
    """A record llmsim cannot model; the message is the reason."""


def load_records(paths: tuple[Path, ...] = (DATA, DECODE_DATA, SERVING_DATA)) -> list[dict]:
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            out += yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when present
    return out


@functools.lru_cache(maxsize=4)
def recipe_settings(path: Path = RECIPES) -> dict[str, dict[str, dict]]:
    """Record id -> scenario section -> key -> setting value (the file cites a source for each)."""
    with open(path, encoding="utf-8") as fh:
        entries = yaml.safe_load(fh)
    return {e["id"]: {sec: {k: v["value"] for k, v in keys.items()} for sec, keys in e.items() if sec != "id"}
            for e in entries}


def apply_recipe(scenario: dict, rec_id: str, notes: list[str]) -> dict:
    """The scenario with the settings recipe_settings.yaml cites for this record laid over it (noted)."""
    for section, keys in recipe_settings().get(rec_id, {}).items():
        scenario[section].update(keys)
        notes.extend(f"recipe: {k} {v}" for k, v in keys.items())
    return scenario


def system_of(rec: dict) -> tuple[str, str]:
    """(accelerator preset, network preset) of the hardware a record ran on."""
    name = rec["hardware"]["accelerator"]
    if name not in HARDWARE:
        raise Skip(f"no preset for accelerator {name}")
    acc, net = HARDWARE[name]
    return acc, MULTI_SLICE.get((net, rec["hardware"].get("count")), net)


def scenario_of(data: dict, registry):
    """Frozen scenario values of a converted record (presets resolved, schema checked)."""
    from llmsim.spec.convert import scenario_values
    from llmsim.spec.load import resolve_presets
    from llmsim.spec.scenario import ScenarioSpec
    from llmsim.spec.yamlio import Document

    resolve_presets(data, Document(data, "published_runs.yaml"), registry)
    return scenario_values(ScenarioSpec.model_validate(data))
