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
SET = typer.Option([], "--set", metavar="PATH=VALUE", help="Override any field, e.g. --set parallel.virtual_stages=2.")


def with_flags(cmd, names: tuple[str, ...] | None = None):
    """``cmd``, whose parameter ``flags`` takes the scenario flags given (a dict), as a typer command with
    one option per scenario flag (``spec/flags.py``: all, or those ``names``) in place of ``flags``."""
    import inspect

    from llmsim.spec.flags import scenario_flags

    chosen = [f for f in scenario_flags() if names is None or f.name in names]
    options = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=f.kind | None,
                                 default=typer.Option(None, f.option, help=f.help, metavar=f.metavar))
               for f in chosen]
    own = list(inspect.signature(cmd, eval_str=True).parameters.values())
    at = [p.name for p in own].index("flags")
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in (*own[:at], *options, *own[at + 1:])]
    flag_names = [f.name for f in chosen]

    def command(**kwargs):
        return cmd(**{k: v for k, v in kwargs.items() if k not in flag_names},
                   flags={k: kwargs[k] for k in flag_names})

    command.__name__, command.__doc__ = cmd.__name__, cmd.__doc__
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command
