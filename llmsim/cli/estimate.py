"""`llmsim check` and `llmsim estimate`: one design point, resolved and printed (table, JSON or CSV)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from llmsim.cli.common import SCENARIO, SET, Format, evaluate_point, registry, with_flags


def check(
    ctx: typer.Context,
    scenario: Path = typer.Argument(..., help="Scenario YAML file."),
    set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE",
                                   help="Override a field, e.g. --set parallel.tp=4 (repeatable)."),
) -> None:
    """Validate a scenario file and print it resolved (presets expanded, defaults filled in)."""
    import yaml

    from llmsim.spec.load import load_scenario

    spec = load_scenario(scenario, registry(ctx), set_)
    data = spec.model_dump(mode="json", exclude_none=True)
    typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120), nl=False)


def _estimate(
    ctx: typer.Context,
    scenario: Path | None = SCENARIO,
    flags: dict | None = None,
    ops: bool = typer.Option(False, "--ops", help="Per-operator table: FLOPs, bytes, intensity, bound, time."),
    set_: list[str] = SET,
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv (header + one row) or json."),
) -> None:
    """Estimate one design point: training step time, MFU, memory; or inference TTFT, TPOT, KV cache."""
    from llmsim.output.writers import emit
    from llmsim.study import records as est

    overrides = est.overrides_from_flags(flags, set_)
    sc = est.load(scenario, registry(ctx), overrides)
    rec = evaluate_point(est.operator_rows if ops else est.record, sc, scenario, overrides)
    if sc.workload.mode == "training" and not ops:
        which = "the fastest that fits" if rec["fits_in_memory"] else "none fits: the fastest"
        from llmsim.study.auto import auto_choices

        for knob, choices in auto_choices(sc).items():
            sys.stderr.write(f"llmsim estimate: {knob} auto -> {rec[knob]} ({which} of "
                             f"{', '.join(map(str, choices))})\n")
    if ops:
        from llmsim.output.tables import print_operators

        print_operators(rec) if fmt is Format.table else emit(rec, fmt.value)
    elif fmt is Format.table:
        from llmsim.output.tables import print_estimate

        print_estimate(rec)
    elif fmt is Format.json:
        from llmsim.output.writers import to_json

        sys.stdout.write(to_json(rec))
    else:
        emit([rec], "csv")


# one option per scenario flag (spec/flags.py: the declared settings' and the presets')
estimate = with_flags(_estimate)
