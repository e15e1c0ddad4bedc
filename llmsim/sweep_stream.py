"""`llmsim sweep` output in bounded memory: rows go to part files, only the ranking keys stay in memory.

1. ``evaluate``: each worker evaluates its chunk (``sweep.evaluate_range``), pickles the rows to a part
   file and returns a ``Part``: the points, feasibility, objective and compare values, column names.
2. ``plan``: the main process ranks and compares on those summaries alone (8 bytes per point per
   objective, plus the point and its part) and gives each kept row its output position.
3. ``text``: workers render groups of parts as lines (CSV, or one JSON object per line) in output
   order; the main process interleaves the groups' lines by position, a block at a time.
The main process never holds every row; each worker holds one chunk or one group of parts.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from llmsim import sweep as sw

MAX_RUNS = 256  # at most this many rendered files are merged at once (open file handles)
BLOCK_LINES = 16384  # lines per block handed to the writer


@dataclass(frozen=True)
class Part:
    """One evaluated chunk: its rows on disk, the keys the main process ranks by in memory."""

    path: str
    points: np.ndarray
    feasible: np.ndarray
    objectives: np.ndarray  # rows x objectives; NaN where a value is missing or not a number
    compare: np.ndarray | None
    columns: tuple[str, ...]


def _keys(frame: pd.DataFrame, spec, path: str) -> Part:
    n = len(frame)

    def num(col):
        return pd.to_numeric(frame[col], errors="coerce").to_numpy(float) if col in frame else np.full(n, np.nan)

    feasible = frame["infeasible_reason"].isna().to_numpy() if "infeasible_reason" in frame else np.ones(n, bool)
    obj = np.column_stack([num(c) for c, _ in spec.objectives]) if spec.objectives else np.empty((n, 0))
    return Part(path, frame["point"].to_numpy(np.int64), feasible, obj,
                num(spec.compare) if spec.compare else None, tuple(frame.columns))


def save(frame: pd.DataFrame, spec, part_dir: str, start: int) -> Part | None:
    """Pickle a chunk's rows into ``part_dir``; None for a chunk without rows."""
    if not len(frame):
        return None
    path = os.path.join(part_dir, f"part-{start:013d}.pkl")
    frame.to_pickle(path)
    return _keys(frame, spec, path)


def evaluate_part(spec, preset_dirs, start: int, stop: int, front_only: bool, part_dir: str | None):
    """A worker's task: the chunk's ``Part`` (``part_dir`` given: a disk the main process shares) or its
    rows (a remote worker; the main process saves them)."""
    frame = sw.evaluate_range(spec, preset_dirs, start, stop, front_only)
    return frame if part_dir is None else save(frame, spec, part_dir, start)


def evaluate(spec, preset_dirs, part_dir: str, jobs: int = 1, front_only: bool = False, progress=None,
             remote: bool = False) -> list[Part]:
    """Every chunk through the active joblib backend, in point order; ``remote``: the workers do not
    share this machine's disk (Dask), so they return rows and this process writes the parts."""
    from joblib import Parallel, delayed

    spans = sw.chunks(spec.size, sw.CHUNK)
    tasks = (delayed(evaluate_part)(spec, preset_dirs, a, b, front_only, None if remote else part_dir)
             for a, b in spans)
    parts = []
    for (a, _), out in zip(spans, Parallel(n_jobs=jobs, return_as="generator")(tasks), strict=True):
        part = save(out, spec, part_dir, a) if remote else out
        if part is not None:
            parts.append(part)
        if progress:
            progress()
    return parts


@dataclass(frozen=True)
class Plan:
    """Where every kept row goes: ``groups[g]`` lists (part file, rows, output positions, extra
    columns) for the parts rendered together; ``source[p]`` is the group of output position ``p``."""

    columns: list[str]
    groups: list[list[tuple[str, np.ndarray, np.ndarray, dict]]]
    source: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.source)


def plan(spec, parts: list[Part], pareto_only: bool = False, top: int | None = None) -> Plan:
    """Rank (``sweep.rank``'s order) and compare (``sweep.compare``) on the parts' keys alone."""
    names = list(dict.fromkeys(c for p in parts for c in p.columns))
    sizes = np.array([len(p.points) for p in parts], dtype=np.int64)
    part_of = np.repeat(np.arange(len(parts)), sizes)
    row_of = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    feasible = np.concatenate([p.feasible for p in parts]) if parts else np.ones(0, bool)
    extra = {}
    if spec.compare and parts:
        if spec.compare not in names:
            raise sw.SpecError(f"compare column {spec.compare!r} is not an output column", file=spec.source,
                               path="compare")
        value = np.concatenate([p.compare for p in parts])
        extra = dict(zip(sw.compare_columns(spec.compare), sw.ratios(value, feasible), strict=True))
        names += list(extra)
    order = np.arange(len(feasible))
    if spec.objectives and parts:
        sw.check_objectives(names, spec.objectives, spec.source)
        values = np.concatenate([p.objectives for p in parts])
        ranks, order = sw.rank_order(values, feasible, [m for _, m in spec.objectives])
        extra["pareto_rank"] = ranks
        names.append("pareto_rank")
        if pareto_only:
            order = order[ranks[order] == 0]
    order = order[:top] if top else order
    per_group = max(1, math.ceil(len(parts) / MAX_RUNS))
    by_part = np.argsort(part_of[order], kind="stable")  # output positions, part by part, in order
    bounds = np.searchsorted(part_of[order][by_part], np.arange(len(parts) + 1))
    groups: list[list] = [[] for _ in range(math.ceil(len(parts) / per_group))]
    for i, part in enumerate(parts):
        pos = by_part[bounds[i]:bounds[i + 1]]
        if len(pos):
            rows = order[pos]
            groups[i // per_group].append((part.path, row_of[rows], pos, {k: v[rows] for k, v in extra.items()}))
    kept = np.cumsum([bool(g) for g in groups]) - 1  # group index among the groups that have rows
    source = kept[part_of[order] // per_group] if len(order) else np.zeros(0, np.int64)
    return Plan([c for c in sw.columns(names) if c != "point"], [g for g in groups if g], source)


def ordered(items, columns: list[str]) -> pd.DataFrame:
    """The rows of one group, in output order, with exactly ``columns``."""
    from llmsim.report import tidy

    frames = [pd.read_pickle(path).iloc[rows].assign(**extra, _position=pos) for path, rows, pos, extra in items]
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return tidy(frame.sort_values("_position", kind="stable"), columns)


def collect(p: Plan) -> pd.DataFrame:
    """Every kept row in output order, in memory (Parquet output)."""
    frames = [ordered(items, p.columns) for items in p.groups]
    if not frames:
        return pd.DataFrame(columns=p.columns)
    pos = np.concatenate([np.sort(np.concatenate([it[2] for it in items])) for items in p.groups])
    return pd.concat(frames, ignore_index=True).iloc[np.argsort(pos)].reset_index(drop=True)


def lines(frame: pd.DataFrame, fmt: str) -> str:
    """One line per row, no header: CSV, or one JSON object per line (values as ``llmsim estimate``'s)."""
    text = [c for c in frame if frame[c].dtype.kind not in "biufcmM"]  # strings: one row, one line
    frame = frame.assign(**{c: frame[c].replace(r"[\r\n]+", " ", regex=True) for c in text})
    if fmt == "csv":
        return frame.to_csv(index=False, header=False, lineterminator="\n")
    from llmsim.report import frame_records

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
        cuts = np.flatnonzero(np.diff(source)) + 1
        starts, ends = np.r_[0, cuts], np.r_[cuts, len(source)]
        block: list[str] = []
        for g, a, b in zip(source[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
            if b - a == 1:
                block.append(files[g].readline())
            else:
                block.extend(itertools.islice(files[g], b - a))
            if len(block) >= BLOCK_LINES:
                yield block
                block = []
        if block:
            yield block
    finally:
        for fh in files:
            fh.close()


def text(p: Plan, fmt: str, part_dir: str, jobs: int = 1, progress=None) -> Iterator[str]:
    """The output (``csv`` with its header, or a ``json`` array) in pieces: groups rendered by ``jobs``
    processes into files under ``part_dir``, then merged here."""
    from joblib import Parallel, delayed

    paths = [os.path.join(part_dir, f"run-{g:05d}.{fmt}") for g in range(len(p.groups))]
    tasks = (delayed(_render)(items, p.columns, fmt, path) for items, path in zip(p.groups, paths, strict=True))
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
