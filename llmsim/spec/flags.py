"""The scenario flags of ``llmsim estimate`` (and of the commands that borrow them: search, plot roofline
and breakdown): each declared setting with a ``flag`` (engine/settings.py), and the few scenario keys a
flag sets that are not declared there (presets, and keys that take a mapping or a distribution). The
typer options, their ``--help`` and the path each flag sets are all built from this table. Light: the
CLI imports it at start-up (no pydantic)."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass

from llmsim.engine.settings import Parallel, WorkloadSettings


@dataclass(frozen=True)
class Flag:
    """One command-line flag: its parameter ``name``, ``option`` (``--tp``), the scenario ``path`` it
    sets, the ``kind`` typer parses it as (int, float or text: pydantic checks the rest), its help."""

    name: str
    option: str
    path: tuple[str, ...]
    kind: type
    help: str
    metavar: str | None = None


# scenario keys set by a flag and not declared in engine/settings.py: presets (spec/presets.py) and the
# workload keys that take a mapping or a distribution (spec/scenario.py WorkloadSpec)
PRESETS = (
    Flag("model", "--model", ("model",), str, "Model preset name, or a local Hugging Face config.json."),
    Flag("accelerator", "--accelerator", ("system", "accelerator"), str, "Accelerator preset name."),
    Flag("devices", "--devices", ("system", "num_devices"), int, "Number of accelerators."),
    Flag("network", "--network", ("system", "network"), str, "Network preset name."),
)
WORKLOAD = (
    Flag("precision", "--precision", ("workload", "precision"), str,
         "bf16, fp16, fp8 or fp4, or native (the model's published precision); by component with "
         "--set workload.precision.experts=..."),
    Flag("input_len", "--input-len", ("workload", "input_len"), int,
         "Inference and serving: prompt tokens per sequence."),
    Flag("output_len", "--output-len", ("workload", "output_len"), int,
         "Inference and serving: generated tokens per sequence."),
)
DECLARED = (("parallel", Parallel), ("workload", WorkloadSettings))  # sections whose settings carry flags


def scenario_flags() -> tuple[Flag, ...]:
    """Every scenario flag, in ``--help`` order: presets, the declared settings' flags, then the workload's
    mapping-valued keys."""
    declared = []
    for key, section in DECLARED:
        hints = typing.get_type_hints(section, include_extras=True)
        for f in dataclasses.fields(section):
            option = f.metadata.get("flag")
            if option:
                kind = _kind(hints[f.name])
                metavar = None if kind is not str or _choices(hints[f.name]) is None else _choices(hints[f.name])
                declared.append(Flag(option.removeprefix("--").replace("-", "_"), option, (key, f.name), kind,
                                     _sentence(f.metadata["help"]), metavar))
    return (*PRESETS, *declared, *WORKLOAD)


def flag_paths() -> dict[str, tuple[str, ...]]:
    """Flag parameter name -> the scenario path it sets."""
    return {f.name: f.path for f in scenario_flags()}


def _leaves(hint) -> list:
    """The plain types and literal values a (possibly annotated, optional) hint allows."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _leaves(args[0])
    if origin in (typing.Union, types.UnionType):
        return [x for a in args if a is not type(None) for x in _leaves(a)]
    if origin is typing.Literal:
        return list(args)
    return [hint]


def _kind(hint) -> type:
    """int or float when every value the hint allows is one, else text (``N|auto`` parsed by the schema)."""
    leaves = _leaves(hint)
    for kind in (int, float):
        if all(x is kind for x in leaves):
            return kind
    return str


def _choices(hint) -> str | None:
    """A metavar for a flag mixing a number with words (``N|auto``), or listing words."""
    leaves = _leaves(hint)
    words = [x for x in leaves if isinstance(x, str)]
    numbers = ["N" for x in leaves if x is int][:1]
    return "|".join(numbers + words) if words else None


def _sentence(text: str) -> str:
    """Declared help as a flag's help, with a full stop (not capitalised: it may open with a value)."""
    return text + "."
