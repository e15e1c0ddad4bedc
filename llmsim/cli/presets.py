"""`llmsim presets list|show`: the bundled and user presets, with their key figures and sources."""

from __future__ import annotations

from enum import Enum

import typer

from llmsim.cli.common import Format, registry

presets_app = typer.Typer(help="List and show bundled and user presets.", no_args_is_help=True)


class Kind(str, Enum):
    accelerators = "accelerators"
    models = "models"
    networks = "networks"


@presets_app.command("list")
def presets_list(
    ctx: typer.Context,
    kind: Kind | None = typer.Option(None, "--kind", help="Only this kind, with its key figures."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """List presets (name first), with key figures when --kind is given."""
    from llmsim.output.presets_table import COLUMNS, preset_rows
    from llmsim.output.writers import emit

    k = kind.value if kind else None
    rows = preset_rows(registry(ctx), k)
    emit(rows, fmt.value, COLUMNS[k], title=f"llmsim presets: {k or 'all'}")


@presets_app.command("show")
def presets_show(ctx: typer.Context, name: str = typer.Argument(..., help="Preset name.")) -> None:
    """Show one preset as resolved YAML (defaults filled in), with its sources."""
    import yaml

    reg = registry(ctx)
    kind, path = reg.find(name)
    spec = reg.get(kind, name)
    data = spec.model_dump(mode="json", exclude_none=True)
    typer.echo(f"# {kind[:-1]} preset '{name}' from {path}")
    if kind == "models":
        from llmsim.engine.params import param_counts
        from llmsim.spec.convert import model_values

        counts = param_counts(model_values(spec))
        typer.echo(f"# derived: {counts.total / 1e9:.2f}e9 parameters, {counts.active / 1e9:.2f}e9 active per token")
    typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120), nl=False)
