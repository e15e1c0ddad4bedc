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


def evaluate_point(fn, sc, scenario_file, overrides=()):
    """``fn(sc)``; a point the engine cannot evaluate (an impossible split) names the flag or override that
    set the key at fault, or else the scenario file it came from (the bundled default when none was given)."""
    from llmsim.engine.errors import DesignError
    from llmsim.spec.errors import SpecError
    from llmsim.spec.load import blame_override
    from llmsim.study.records import DEFAULT_SCENARIO

    try:
        return fn(sc)
    except DesignError as err:
        if err.file is not None:
            raise
        raise blame_override(SpecError(err.message, file=str(scenario_file or DEFAULT_SCENARIO), path=err.path),
                             list(overrides), str(scenario_file or DEFAULT_SCENARIO)) from None


def workers(jobs: int, command: str, remote: bool = False) -> int:
    """The worker processes of ``--jobs``: N >= 1 or -1 (all cores); local workers at most this machine's
    cores (said once on stderr), a Dask cluster's as asked (it runs as many as it has)."""
    import sys

    from llmsim.spec.errors import SpecError

    if jobs == 0 or jobs < -1:
        raise SpecError(f"--jobs {jobs}: allowed: a number of worker processes, 1 or more, or -1 for all cores")
    if remote or jobs == -1:
        return jobs
    from joblib import cpu_count

    cores = cpu_count()
    if jobs > cores:
        sys.stderr.write(f"llmsim {command}: --jobs {jobs} capped at {cores}, the cores of this machine\n")
        return cores
    return jobs


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
