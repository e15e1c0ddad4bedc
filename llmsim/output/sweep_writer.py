"""A ranked sweep (``study.stream.Plan``) written out in bounded memory: worker processes render groups of
part files (Arrow IPC, ``study/partfile.py``) as lines (CSV by polars' writer, or one JSON object per
line) in output order; the main process interleaves the groups' lines by output position, a block at a
time (``text``), or gathers the rows for Parquet (``collect``, written by polars).
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from llmsim.output.writers import INT_COLUMNS, frame_records
from llmsim.study import partfile
from llmsim.study.stream import Plan

BLOCK_LINES = 16384  # lines per block handed to the writer


def ordered(items, columns: list[str]) -> pl.DataFrame:
    """The rows of one group, in output order, with exactly ``columns``."""
    frames = [partfile.read(path)[rows].with_columns(*_extra(extra), pl.Series("_position", pos))
              for path, rows, pos, extra in items]
    frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    return tidy(frame.sort("_position", maintain_order=True), columns)


def _extra(extra: dict) -> list[pl.Series]:
    """The ranking's columns of a part's rows (pareto_rank: None where infeasible; NaN: missing)."""
    return [pl.Series(name, values.tolist()) if values.dtype == object
            else pl.Series(name, values, nan_to_null=values.dtype.kind == "f") for name, values in extra.items()]


def tidy(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """``frame`` with exactly ``columns`` (missing ones empty), the schema's integer columns as integers
    where every value is one (a request mix's mean length may be fractional: kept)."""
    cast = []
    for name in INT_COLUMNS:
        if name in frame.columns and frame.schema[name].is_float():
            col = frame[name].drop_nulls()
            if (col % 1 == 0).all():
                cast.append(pl.col(name).cast(pl.Int64))
    if cast:
        frame = frame.with_columns(cast)
    return frame.select([pl.col(c) if c in frame.columns else pl.lit(None).alias(c) for c in columns])


def collect(p: Plan) -> pl.DataFrame:
    """Every kept row in output order, in memory (Parquet output)."""
    groups = [p.items(g) for g in range(len(p.groups))]
    frames = [ordered(items, p.columns) for items in groups]
    if not frames:
        return pl.DataFrame(schema={c: pl.Null for c in p.columns})
    pos = np.concatenate([np.sort(np.concatenate([it[2] for it in items])) for items in groups])
    return pl.concat(frames, how="diagonal_relaxed")[np.argsort(pos)]


IN_MEMORY_CELLS = 1 << 25  # a CSV of at most this many cells (rows x columns; ~270 MB as numbers) is written in one pass


def write_csv(p: Plan, path) -> bool:
    """The CSV of a sweep whose kept rows fit in memory (``IN_MEMORY_CELLS``), atomically at ``path``, in
    one pass: every part's kept rows joined, put in output order by one gather and written by polars'
    writer (not rendered group by group into files and merged line by line). The bytes are ``text``'s;
    False (nothing written) where they might not be: parts whose columns differ in name or in type other
    than all-missing (``text`` joins each group on its own), or a column of whole numbers in one render group
    and fractions in another (``tidy`` writes each group's integers its own way)."""
    from llmsim.atomic import atomic_file

    if not p.columns or not p.rows or p.rows * len(p.columns) > IN_MEMORY_CELLS:
        return False
    frames, groups = [], []
    for g in range(len(p.groups)):
        for path_, rows, pos, extra in p.items(g):
            part = partfile.read(path_)
            part = part if len(rows) == part.height else part[rows]
            frames.append(part.with_columns(*_extra(extra), pl.Series("_position", pos)))
            groups.append(g)
    types = {}  # a column all missing in a part has no type there (Null): it takes the others'
    for f in frames:
        for name, dtype in f.schema.items():
            if dtype != pl.Null and types.setdefault(name, dtype) != dtype:
                return False
    if not frames or any(f.columns != frames[0].columns for f in frames[1:]):
        return False
    frames = [f.with_columns([pl.col(c).cast(types[c]) for c, t in f.schema.items() if t == pl.Null and c in types])
              for f in frames]
    floats = [c for c in INT_COLUMNS if c in types and types[c].is_float()]
    for c in floats:  # whole in some render groups and not in others: text would spell them two ways
        whole = {}
        for g, f in zip(groups, frames, strict=True):
            col = f[c].drop_nulls()
            whole[g] = whole.get(g, True) and bool((col % 1 == 0).all())
        if len(set(whole.values())) > 1:
            return False
    frame = pl.concat(frames, how="vertical", rechunk=False)
    order = np.argsort(frame["_position"].to_numpy(), kind="stable")
    frame = tidy(frame, p.columns)  # integers decided over every row, as each render group decided them
    with atomic_file(path) as tmp, open(tmp, "wb") as fh:
        fh.write(_header(p.columns).encode("utf-8"))
        for at in range(0, len(order), BLOCK_ROWS):  # in output order a block at a time: no sorted copy
            try:
                frame[order[at:at + BLOCK_ROWS]].write_csv(fh, include_header=False, line_terminator="\n")
            except OSError as err:  # polars' carries its message alone: give it as the reason (full disk)
                raise (err if err.errno else OSError(errno.EIO, str(err))) from None
    return True


BLOCK_ROWS = 1 << 16  # rows gathered and written at once by write_csv


def _header(columns: list[str]) -> str:
    return pd.DataFrame(columns=columns).to_csv(index=False, lineterminator="\n")


def lines(frame: pl.DataFrame, fmt: str) -> str:
    """One line per row, no header: CSV (polars' writer), or one JSON object per line (values as
    ``llmsim estimate``'s)."""
    if fmt == "csv":
        return frame.write_csv(include_header=False, line_terminator="\n")
    return "".join(json.dumps(r) + "\n" for r in frame_records(frame, frame.columns))


def _render(items, columns: list[str], fmt: str, path: str) -> str:
    Path(path).write_text(lines(ordered(items, columns), fmt), encoding="utf-8")
    return path


def _merge(paths: list[str], source: np.ndarray) -> Iterator[list[str]]:
    """Lines of the rendered groups interleaved by output position, in blocks."""
    if not len(source):  # no row survived (all infeasible, or --top/--pareto-only left none)
        return
    files = [open(p, encoding="utf-8", newline="") for p in paths]  # noqa: SIM115 - closed below
    try:
        for at in range(0, len(source), BLOCK_LINES):  # runs of one group, a block of positions at a time
            src = source[at:at + BLOCK_LINES]
            cuts = np.flatnonzero(np.diff(src)) + 1
            starts, ends = np.r_[0, cuts], np.r_[cuts, len(src)]
            block: list[str] = []
            for g, a, b in zip(src[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
                if b - a == 1:
                    block.append(files[g].readline())
                else:
                    block.extend(itertools.islice(files[g], b - a))
            yield block
    finally:
        for fh in files:
            fh.close()


def text(p: Plan, fmt: str, part_dir: str, jobs: int = 1, progress=None) -> Iterator[str]:
    """The output (``csv`` with its header, ``jsonl``: a JSON object a line, or a ``json`` array) in pieces:
    groups rendered by ``jobs`` processes into files under ``part_dir``, then merged here."""
    from joblib import Parallel, delayed

    line_fmt = "csv" if fmt == "csv" else "json"
    paths = [os.path.join(part_dir, f"run-{g:05d}.{line_fmt}") for g in range(len(p.groups))]
    tasks = (delayed(_render)(p.items(g), p.columns, line_fmt, path) for g, path in enumerate(paths))
    for _ in Parallel(n_jobs=jobs if len(p.groups) > 1 else 1, return_as="generator")(tasks):
        if progress:
            progress()
    if fmt in ("csv", "jsonl"):
        if p.columns and fmt == "csv":
            yield _header(p.columns)
        for block in _merge(paths, p.source):
            yield "".join(block)
        return
    yield "["
    sep = "\n"
    for block in _merge(paths, p.source):
        yield sep + ",\n".join(line.rstrip("\n") for line in block)
        sep = ",\n"
    yield "\n]\n"
