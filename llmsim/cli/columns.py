"""`llmsim columns`: the output contract (llmsim/schema.py) as a table, CSV, JSON or docs/columns.md."""

from __future__ import annotations

import sys
from enum import Enum

import typer

from llmsim import schema


class Mode(str, Enum):
    training = "training"
    inference = "inference"
    serving = "serving"


class ColumnsFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    markdown = "markdown"


def columns_cmd(
    mode: Mode | None = typer.Option(None, "--mode", help="Only the columns of this workload mode."),
    fmt: ColumnsFormat = typer.Option(ColumnsFormat.table, "--format",
                                      help="table, csv, json, or markdown (docs/columns.md)."),
) -> None:
    """Every output column: its unit, the modes that write it, whether larger is better, and its meaning."""
    from llmsim.output.writers import emit

    if fmt is ColumnsFormat.markdown:
        if mode is not None:
            raise typer.BadParameter("--format markdown writes every column; leave out --mode", param_hint="--mode")
        sys.stdout.write(schema.markdown())
        return
    rows = schema.rows(mode.value if mode else None)
    if fmt is not ColumnsFormat.table:
        emit(rows, fmt.value, list(schema.FIELDS))
        return
    _print_table(rows, mode)


def _print_table(rows: list[dict], mode: Mode | None) -> None:
    """Name, unit, direction and meaning (with the modes and the condition where they narrow it), readable
    in an 80-column terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"llmsim output columns{f' ({mode.value})' if mode else ''}", title_justify="left",
                  header_style="bold")
    table.add_column("column", max_width=26, overflow="fold")
    table.add_column("unit", max_width=10)
    table.add_column("better", no_wrap=True)
    table.add_column("meaning", ratio=1, min_width=24)
    for r in rows:
        notes = [] if mode or r["modes"] == " ".join(schema.MODES) else [r["modes"]]
        notes += [] if r["when"] == "always" else [r["when"]]
        meaning = r["meaning"] + (f" [dim]({'; '.join(notes)})[/dim]" if notes else "")
        table.add_row(r["name"], r["unit"] or "-", r["better"], meaning)
    Console().print(table)
