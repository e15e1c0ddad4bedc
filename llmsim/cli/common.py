"""Shared pieces of the command-line interface: output formats, the preset registry, common options."""

from __future__ import annotations

from enum import Enum

import typer


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def registry(ctx: typer.Context):
    from llmsim.spec.presets import PresetRegistry

    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "registry" not in obj:
        obj["registry"] = PresetRegistry(obj.get("preset_dirs", []))
        root.obj = obj
    return obj["registry"]


def preset_dirs(ctx: typer.Context) -> tuple[str, ...]:
    """The user preset folders given on the command line (workers rebuild their registry from them)."""
    obj = ctx.find_root().obj
    return tuple(obj.get("preset_dirs", []) if isinstance(obj, dict) else ())


def evaluate_point(fn, sc, scenario_file):
    """``fn(sc)``; a point the engine cannot evaluate (an impossible split) names the scenario file it came
    from (the bundled default when none was given)."""
    from llmsim.engine.errors import DesignError
    from llmsim.spec.errors import SpecError
    from llmsim.study.records import DEFAULT_SCENARIO

    try:
        return fn(sc)
    except DesignError as err:
        if err.file is not None:
            raise
        raise SpecError(err.message, file=str(scenario_file or DEFAULT_SCENARIO), path=err.path) from None


# options shared by estimate and search
SCENARIO = typer.Argument(None, help="Scenario YAML; default: llama3-70b on 64 h100-sxm.")
MODEL = typer.Option(None, "--model", help="Model preset name, or a local Hugging Face config.json.")
ACCELERATOR = typer.Option(None, "--accelerator", help="Accelerator preset name.")
DEVICES = typer.Option(None, "--devices", help="Number of accelerators.")
NETWORK = typer.Option(None, "--network", help="Network preset name.")
GLOBAL_BATCH = typer.Option(None, "--global-batch-size", help="Sequences per optimizer step.")
SEQ_LEN = typer.Option(None, "--seq-len", help="Tokens per sequence.")
PRECISION = typer.Option(None, "--precision", help="bf16, fp16, fp8 or fp4.")
SET = typer.Option([], "--set", metavar="PATH=VALUE", help="Override any field, e.g. --set parallel.virtual_stages=2.")
