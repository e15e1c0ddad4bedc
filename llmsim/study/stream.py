"""`llmsim sweep` output in bounded memory: rows go to part files, only the ranking keys stay in memory.

1. ``evaluate``: each worker evaluates its chunk (``sweep.evaluate_range``), pickles the rows to a part
   file and returns a ``Part``: the points, feasibility, objective and compare values, column names.
2. ``plan``: the main process ranks and compares on those summaries alone (8 bytes per point per
   objective, plus the point and its part) and gives each kept row its output position.
3. ``output/sweep_writer.py`` renders the plan: workers render groups of parts as lines in output
   order; the main process interleaves the groups' lines by position, a block at a time.
The main process never holds every row; each worker holds one chunk or one group of parts.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from llmsim.spec.errors import SpecError
from llmsim.study import sweep as sw

MAX_RUNS = 256  # at most this many rendered files are merged at once (open file handles)


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

    spans = sw.tasks(spec)
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
    if not parts:  # no row at all: the columns the rows would have had (a CSV still gets its header)
        return Plan([c for c in sw.columns(sw.expected_columns(spec)) if c != "point"], [], np.zeros(0, np.int64))
    names = list(dict.fromkeys(c for p in parts for c in p.columns))
    sizes = np.array([len(p.points) for p in parts], dtype=np.int64)
    # every row's part and row in it, in point order (a task holds whole groups, not a range of points)
    by_point = np.argsort(np.concatenate([p.points for p in parts]), kind="stable") if parts else np.zeros(0, int)
    part_of = np.repeat(np.arange(len(parts)), sizes)[by_point]
    row_of = (np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes))[by_point]
    feasible = np.concatenate([p.feasible for p in parts])[by_point] if parts else np.ones(0, bool)
    extra = {}
    if spec.compare and parts:
        if spec.compare not in names:
            raise SpecError(f"compare column {spec.compare!r} is not an output column", file=spec.source,
                               path="compare")
        value = np.concatenate([p.compare for p in parts])[by_point]
        extra = dict(zip(sw.compare_columns(spec.compare), sw.ratios(value, feasible), strict=True))
        names += list(extra)
    order = np.arange(len(feasible))
    if spec.objectives and parts:
        sw.check_objectives(names, spec.objectives, spec.source)
        values = np.concatenate([p.objectives for p in parts])[by_point]
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
