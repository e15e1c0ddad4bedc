"""`llmsim settings`: every declared scenario setting (llmsim/engine/settings.py) with its type, default,
help and source, as a table, CSV, JSON or docs/settings.md."""

from __future__ import annotations

import sys
from enum import Enum

import typer


class SettingsFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


def settings_cmd(
    fmt: SettingsFormat = typer.Option(SettingsFormat.table, "--format",
                                       help="table, csv, json, or markdown (docs/settings.md)."),
) -> None:
    """Every declared scenario setting: type and bounds, default, meaning and the source of the default."""
    from llmsim.output.writers import emit
    from llmsim.spec.declared import declared_sections, markdown, settings_rows

    if fmt is SettingsFormat.markdown:
        sys.stdout.write(markdown())
        return
    rows = [r for key, section in declared_sections() for r in settings_rows(section, key)]
    if fmt is not SettingsFormat.table:
        emit(rows, fmt.value, ["setting", "type", "default", "help", "source"])
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="llmsim scenario settings", title_justify="left", header_style="bold")
    table.add_column("setting", max_width=26, overflow="fold")
    table.add_column("default", max_width=14, overflow="fold")
    table.add_column("meaning (type)", ratio=1, min_width=24)
    for r in rows:
        table.add_row(r["setting"], r["default"], f"{r['help']} [dim]({r['type']})[/dim]")
    Console().print(table)
