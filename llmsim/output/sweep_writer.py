"""A ranked sweep (``study.stream.Plan``) written out in bounded memory: worker processes render groups of
part files as lines (CSV, or one JSON object per line) in output order; the main process interleaves the
groups' lines by output position, a block at a time (``text``), or gathers the rows for Parquet
(``collect``).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from llmsim.output import csvtext
from llmsim.output.writers import frame_records, tidy
from llmsim.study.stream import Plan

BLOCK_LINES = 16384  # lines per block handed to the writer


def ordered(items, columns: list[str]) -> pd.DataFrame:
    """The rows of one group, in output order, with exactly ``columns``."""
    frames = [pd.read_pickle(path).iloc[rows].assign(**extra, _position=pos) for path, rows, pos, extra in items]
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return tidy(frame.sort_values("_position", kind="stable"), columns)


def collect(p: Plan) -> pd.DataFrame:
    """Every kept row in output order, in memory (Parquet output)."""
    groups = [p.items(g) for g in range(len(p.groups))]
    frames = [ordered(items, p.columns) for items in groups]
    if not frames:
        return pd.DataFrame(columns=p.columns)
    pos = np.concatenate([np.sort(np.concatenate([it[2] for it in items])) for items in groups])
    return pd.concat(frames, ignore_index=True).iloc[np.argsort(pos)].reset_index(drop=True)


def lines(frame: pd.DataFrame, fmt: str) -> str:
    """One line per row, no header: CSV, or one JSON object per line (values as ``llmsim estimate``'s)."""
    fast = csvtext.lines(frame) if fmt == "csv" else None  # the same bytes, distinct values formatted once
    if fast is not None:
        return fast
    text = [c for c in frame if frame[c].dtype.kind not in "biufcmM"]  # strings: one row, one line
    frame = frame.assign(**{c: frame[c].replace(r"[\r\n]+", " ", regex=True) for c in text})
    if fmt == "csv":
        return frame.to_csv(index=False, header=False, lineterminator="\n")
    return "".join(json.dumps(r) + "\n" for r in frame_records(frame, list(frame.columns)))


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
    """The output (``csv`` with its header, or a ``json`` array) in pieces: groups rendered by ``jobs``
    processes into files under ``part_dir``, then merged here."""
    from joblib import Parallel, delayed

    paths = [os.path.join(part_dir, f"run-{g:05d}.{fmt}") for g in range(len(p.groups))]
    tasks = (delayed(_render)(p.items(g), p.columns, fmt, path) for g, path in enumerate(paths))
    for _ in Parallel(n_jobs=jobs if len(p.groups) > 1 else 1, return_as="generator")(tasks):
        if progress:
            progress()
    if fmt == "csv":
        if p.columns:
            yield pd.DataFrame(columns=p.columns).to_csv(index=False, lineterminator="\n")
        for block in _merge(paths, p.source):
            yield "".join(block)
        return
    yield "["
    sep = "\n"
    for block in _merge(paths, p.source):
        yield sep + ",\n".join(line.rstrip("\n") for line in block)
        sep = ",\n"
    yield "\n]\n"
