"""Writers for records: rich table, CSV, JSON. Atomic file output."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llmsim import schema
from llmsim.atomic import atomic_file


def plain(value: Any) -> Any:
    """JSON/CSV-friendly scalar (numpy scalars -> Python, NaN -> None)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value) or type(value).__name__ == "NAType":
        return None  # NaN, pandas NA: an empty cell
    return value


def to_csv(records: list[dict], columns: list[str] | None = None) -> str:
    columns = columns or _columns(records)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: plain(rec.get(k)) for k in columns})
    return buf.getvalue()


def to_json(records: list[dict] | dict) -> str:
    if isinstance(records, dict):
        return json.dumps({k: plain(v) for k, v in records.items()}, indent=2) + "\n"
    return json.dumps([{k: plain(v) for k, v in r.items()} for r in records], indent=2) + "\n"


def _columns(records: Iterable[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for rec in records:
        for key in rec:
            seen.setdefault(key)
    return list(seen)


def fmt_number(value: Any) -> str:
    value = plain(value)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e6 or abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def print_table(records: list[dict], columns: list[str] | None = None, title: str | None = None,
                headers: dict[str, str] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    columns = columns or _columns(records)
    headers = headers or {}
    table = Table(title=title, header_style="bold")
    for i, col in enumerate(columns):
        numeric = any(isinstance(plain(r.get(col)), (int, float)) for r in records)
        table.add_column(headers.get(col, col), justify="right" if numeric and i else "left",
                         no_wrap=(i == 0), overflow="fold")
    for rec in records:
        table.add_row(*(fmt_number(rec.get(c)) for c in columns))
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def emit(records: list[dict], fmt: str, columns: list[str] | None = None, title: str | None = None,
         headers: dict[str, str] | None = None) -> None:
    """Print records to stdout in ``fmt`` (table | csv | json)."""
    if fmt == "csv":
        sys.stdout.write(to_csv(records, columns))
    elif fmt == "json":
        sys.stdout.write(to_json([{k: r.get(k) for k in (columns or r)} for r in records]))
    else:
        print_table(records, columns, title, headers)


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and rename: never a half-written file."""
    write_atomic_parts(path, [text])


# integer columns of sweep frames (llmsim.schema): shown as integers even where infeasible rows leave them empty
INT_COLUMNS = tuple(c.name for c in schema.COLUMNS if c.kind == "int")


def frame_records(frame, columns: list[str]) -> list[dict]:
    """Rows of a sweep frame (pandas, or polars as the sweep writer holds them) as plain dicts (tables, JSON)."""
    rows = frame.select(columns).iter_rows() if hasattr(frame, "iter_rows") else frame[columns].itertuples(
        index=False, name=None)
    return [{c: plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]


def write_parquet(path: str | Path, frame) -> None:
    """A sweep's rows (a polars frame, ``sweep_writer.collect``) as Parquet, written atomically."""
    with atomic_file(path) as tmp:
        frame.write_parquet(tmp)


def write_atomic_parts(path: str | Path, parts: Iterable[str]) -> None:
    """``write_atomic`` for text arriving in pieces."""
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.writelines(parts)
