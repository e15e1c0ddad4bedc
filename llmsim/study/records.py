"""One design point from the command line: flags -> scenario -> its mode's row (``study/modes``)."""

from __future__ import annotations

from pathlib import Path

from llmsim.spec.presets import PresetRegistry

DEFAULT_SCENARIO = Path(__file__).parent.parent / "scenarios" / "default.yaml"


def overrides_from_flags(flags: dict, sets: list[str]) -> list:
    """Typed overrides (``spec.load.Setting``) of the flags given, each labelled with its flag for errors,
    then the ``--set`` ones (YAML text). A flag's value reaches the spec as typed: text stays text (less
    surrounding blanks; ``full # x``, ``yes``, ``0x10`` are not YAML), an empty or ``null`` value is the
    field's default."""
    from llmsim.spec.flags import scenario_flags
    from llmsim.spec.load import Setting

    option = {f.name: f for f in scenario_flags()}
    out = [Setting(f"{option[k].option} {v}", option[k].path, _flag_value(v)) for k, v in flags.items()
           if v is not None]
    return out + list(sets)


def _flag_value(value):
    if not isinstance(value, str):
        return value
    text = value.strip()
    return None if text in ("", "null", "Null", "NULL", "~") else text


def load(path: str | Path | None, registry: PresetRegistry, overrides: list[str]):
    from llmsim.spec.convert import scenario_values
    from llmsim.spec.load import load_scenario

    spec = load_scenario(path, registry, overrides, default=DEFAULT_SCENARIO)
    return scenario_values(spec)


def record(sc) -> dict:
    """Inputs and every output column of one design point, flat, in the declared order (``llmsim.schema``):
    the row its mode (``study/modes``) makes of it."""
    from llmsim import schema
    from llmsim.study import modes

    return schema.order(modes.of(sc).point(sc))


def operator_rows(sc) -> list[dict]:
    """The per-operator table of ``llmsim estimate --ops``."""
    from llmsim.engine.op_table import operator_table
    from llmsim.study.modes.training import resolve_auto

    return operator_table(resolve_auto(sc))
