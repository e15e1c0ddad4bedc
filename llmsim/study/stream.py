"""`llmsim sweep` output in bounded memory: rows go to part files, only the ranking keys stay in memory.

1. ``evaluate``: each worker evaluates its chunk (``sweep.evaluate_range``), writes the rows to a part
   file (Arrow IPC, ``partfile.py``) and returns a ``Part``: the points, feasibility, objective and compare values, column names.
2. ``gather`` and ``plan``: the main process ranks and compares on those keys alone (9 bytes a row plus 8
   per objective) and gives each kept row its output position (4 bytes a row, 2 for its group).
3. ``output/sweep_writer.py`` renders the plan: workers render groups of parts as lines in output
   order; the main process interleaves the groups' lines by position, a block at a time.
The main process never holds every row; each worker holds one chunk or one group of parts.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import numpy as np

from llmsim.spec.errors import SpecError
from llmsim.study import partfile, rowset
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


def _keys(rows: rowset.Rows, spec, path: str) -> Part:
    n = rowset.length(rows)
    reason = rows.get("infeasible_reason")
    feasible = rowset.missing(reason) if reason is not None else np.ones(n, bool)
    obj = (np.column_stack([rowset.numeric(rows, c) for c, _ in spec.objectives]) if spec.objectives
           else np.empty((n, 0)))
    return Part(path, np.asarray(rows["point"], dtype=np.int64), feasible, obj,
                rowset.numeric(rows, spec.compare) if spec.compare else None, tuple(rows))


def save(rows: rowset.Rows, spec, part_dir: str, start: int) -> Part | None:
    """Write a chunk's rows into ``part_dir`` (Arrow IPC, ``partfile.py``); None for a chunk without rows."""
    if not rowset.length(rows):
        return None
    path = os.path.join(part_dir, f"part-{start:013d}.arrow")
    partfile.write(rows, path)
    return _keys(rows, spec, path)


def evaluate_part(spec, preset_dirs, start: int, stop: int, front_only: bool, part_dir: str | None):
    """A worker's task: the chunk's ``Part`` (``part_dir`` given: a disk the main process shares) or its
    rows (a remote worker; the main process saves them)."""
    rows = sw.range_rows(spec, preset_dirs, start, stop, front_only)
    return rows if part_dir is None else save(rows, spec, part_dir, start)


def evaluate(spec, preset_dirs, part_dir: str, jobs: int = 1, front_only: bool = False, progress=None,
             remote: bool = False) -> Keys:
    """Every chunk, in task order: in this process and ``jobs - 1`` worker processes beside it (``_local``),
    or through the active joblib backend when ``remote`` (Dask: the workers do not share this machine's
    disk, so they return rows and this process writes the parts)."""
    spans = sw.tasks(spec)
    # a front's few rows come back to this process and go to one part file (not one file per chunk)
    held = remote or (front_only and bool(spec.objectives))
    run = _remote if remote else _local
    parts, fronts = [], []
    for (a, _), out in zip(spans, run(spans, jobs, spec, preset_dirs, front_only, None if held else part_dir),
                           strict=True):
        if front_only and spec.objectives:
            fronts.append(out)
            if len(fronts) > 64:  # the union of fronts, cut to its own front now and then: bounded memory
                fronts = [_front(fronts, spec)]
        else:
            part = save(out, spec, part_dir, a) if remote else out
            if part is not None:
                parts.append(part)
        if progress:
            progress()
    if fronts:
        part = save(_front(fronts, spec), spec, part_dir, 0)
        parts += [part] if part is not None else []
    return gather(parts)


def _remote(spans, jobs, spec, preset_dirs, front_only, part_dir):
    """The tasks' results in order, through the active joblib backend (Dask), one task at a time: remote
    workers return their rows, which this process holds until saved."""
    from joblib import Parallel, delayed

    return Parallel(n_jobs=jobs, return_as="generator", batch_size=1)(
        delayed(evaluate_part)(spec, preset_dirs, a, b, front_only, part_dir) for a, b in spans)


WINDOW = 2  # tasks queued per worker process: one running, one ready


def _local(spans, jobs, spec, preset_dirs, front_only, part_dir):
    """The tasks' results in order, evaluated by this process and ``jobs - 1`` worker processes (loky's
    reusable executor): the workers take tasks from the front, this process from the back, so each runs
    consecutive tasks (the same groups: presets, splits and collectives cached once) and this process,
    which has imported and warmed everything already, works instead of waiting (one worker fewer to start,
    import and warm than ``jobs`` workers)."""
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, wait

    from joblib import effective_n_jobs

    n = min(effective_n_jobs(jobs), len(spans)) - 1  # no more workers than tasks beside this process
    todo, done, at = deque(range(len(spans))), {}, 0
    if n < 1:
        for a, b in spans:
            yield evaluate_part(spec, preset_dirs, a, b, front_only, part_dir)
        return
    from joblib.externals.loky import get_reusable_executor

    # one thread each for the numeric libraries of a worker, as joblib's workers get (no oversubscription)
    pool = get_reusable_executor(max_workers=n, env={k: "1" for k in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS")})
    running: dict = {}
    try:
        while todo or running:
            while todo and len(running) < WINDOW * n:
                i = todo.popleft()
                running[pool.submit(evaluate_part, spec, preset_dirs, *spans[i], front_only, part_dir)] = i
            if todo:
                i = todo.pop()
                done[i] = evaluate_part(spec, preset_dirs, *spans[i], front_only, part_dir)
            else:
                wait(running, return_when=FIRST_COMPLETED)
            for future in [f for f in running if f.done()]:
                done[running.pop(future)] = future.result()
            while at in done:  # in order, as soon as the next one is there
                yield done.pop(at)
                at += 1
    except BaseException:
        for future in running:
            future.cancel()
        pool.shutdown(wait=True, kill_workers=True)  # no worker left writing into a removed directory
        raise
    # joblib (the text writer's workers) cannot take over an executor it did not make: this one goes
    pool.shutdown(wait=True)


def _front(fronts: list, spec) -> rowset.Rows:
    """The chunks' fronts as one set of rows (point order), cut to their own front."""
    rows = rowset.in_point_order(rowset.concat(fronts))
    return rowset.take(rows, sw.on_front(rows, spec.objectives)) if rowset.length(rows) else rows


@dataclass(frozen=True)
class Keys:
    """Every chunk's ranking keys, concatenated in part order: row ``r`` of part ``i`` is key
    ``offsets[i] + r`` (the main process holds these alone: 9 bytes a row, plus 8 per objective)."""

    paths: tuple[str, ...]
    offsets: np.ndarray
    points: np.ndarray
    feasible: np.ndarray
    objectives: np.ndarray
    compare: np.ndarray | None
    columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.paths)


def gather(parts: list[Part]) -> Keys:
    """The parts' keys as one ``Keys``; each field is concatenated and then let go of in ``parts`` (the
    list is emptied as it goes: the keys are never held twice)."""
    sizes = [len(p.points) for p in parts]
    columns = tuple(dict.fromkeys(c for p in parts for c in p.columns))
    paths = tuple(p.path for p in parts)
    fields = {}
    for name in ("points", "feasible", "objectives", "compare"):
        pieces = [getattr(p, name) for p in parts]
        fields[name] = np.concatenate(pieces) if pieces and pieces[0] is not None else None
        del pieces
        for i, p in enumerate(parts):
            parts[i] = dataclasses.replace(p, **{name: None})
    if fields["points"] is None:
        fields.update(points=np.zeros(0, np.int64), feasible=np.ones(0, bool), objectives=np.empty((0, 0)))
    return Keys(paths, np.r_[0, np.cumsum(sizes, dtype=np.int64)], columns=columns, **fields)


@dataclass(frozen=True)
class Plan:
    """Where every kept row goes: ``position[k]`` is the output position of key ``k`` (-1: not written),
    ``extra`` the columns the ranking adds (per key); ``groups[g]`` the parts rendered together and
    ``source[p]`` the group of output position ``p``."""

    columns: list[str]
    paths: tuple[str, ...]
    offsets: np.ndarray
    position: np.ndarray
    extra: dict
    groups: list[range]
    source: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.source)

    def items(self, g: int) -> list[tuple[str, np.ndarray, np.ndarray, dict]]:
        """(part file, rows, their output positions, their extra columns) of each part of group ``g``."""
        out = []
        for i in self.groups[g]:
            a = int(self.offsets[i])
            pos = self.position[a:int(self.offsets[i + 1])]
            rows = np.flatnonzero(pos >= 0)
            if len(rows):
                out.append((self.paths[i], rows, pos[rows], {k: _cells(k, v[a + rows]) for k, v in self.extra.items()}))
        return out


def _cells(name: str, values: np.ndarray) -> np.ndarray:
    """A column of ``extra`` as written: pareto_rank is None for an infeasible row (-1 here)."""
    if name != "pareto_rank":
        return values
    out = values.astype(object)
    out[values < 0] = None
    return out


def _ranked(keys: Keys, maximize: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(Pareto rank of each key, -1 where infeasible; the keys in ``sweep.rank``'s order): feasible keys
    by rank, then the first objective, then point; then the infeasible ones in point order."""
    from llmsim.study.pareto import pareto_rank

    good = None if keys.feasible.all() else np.flatnonzero(keys.feasible)
    values = keys.objectives if good is None else keys.objectives[good]
    points = keys.points if good is None else keys.points[good]
    r = pareto_rank(values, maximize)
    first = values[:, 0]
    key = np.where(np.isfinite(first), -first if maximize[0] else first, np.inf)
    del values
    order = np.lexsort((points, key, r))
    del key, points
    ranks = np.full(len(keys.points), -1, np.int32)
    if good is None:
        ranks[:] = r
        return ranks, order
    ranks[good] = r
    bad = np.flatnonzero(~keys.feasible)
    return ranks, np.concatenate([good[order], bad[np.argsort(keys.points[bad], kind="stable")]])


def plan(spec, keys: Keys, pareto_only: bool = False, top: int | None = None) -> Plan:
    """Rank (``sweep.rank``'s order) and compare (``sweep.compare``) on the keys alone."""
    if not len(keys):  # no row at all: the columns the rows would have had (a CSV still gets its header)
        return Plan([c for c in sw.columns(sw.expected_columns(spec)) if c != "point"], (), np.zeros(1, np.int64),
                    np.zeros(0, np.int32), {}, [], np.zeros(0, np.int16))
    names = list(keys.columns)
    n = len(keys.points)
    extra = {}
    if spec.compare:
        if spec.compare not in names:
            raise SpecError(f"compare column {spec.compare!r} is not an output column", file=spec.source,
                            path="compare")
        by_point = np.argsort(keys.points, kind="stable")
        for name, col in zip(sw.compare_columns(spec.compare),
                             sw.ratios(keys.compare[by_point], keys.feasible[by_point]), strict=True):
            extra[name] = np.empty(n)
            extra[name][by_point] = col
        names += list(extra)
    if spec.objectives:
        sw.check_objectives(names, spec.objectives, spec.source)
        extra["pareto_rank"], order = _ranked(keys, [m for _, m in spec.objectives])
        names.append("pareto_rank")
        if pareto_only:
            order = order[extra["pareto_rank"][order] == 0]
    else:
        order = np.argsort(keys.points, kind="stable")
    order = order[:top] if top else order
    position = np.full(n, -1, np.int32 if n < 2**31 else np.int64)
    position[order] = np.arange(len(order), dtype=position.dtype)
    per_group = max(1, math.ceil(len(keys) / MAX_RUNS))
    part_group = np.arange(len(keys)) // per_group
    used = np.zeros(part_group[-1] + 1, bool)
    source = np.empty(len(order), np.int16 if len(used) < 2**15 else np.int32)
    for a in range(0, len(order), BLOCK):  # a block at a time: no per-row int64 temporaries
        source[a:a + BLOCK] = part_group[np.searchsorted(keys.offsets, order[a:a + BLOCK], side="right") - 1]
        used[np.unique(source[a:a + BLOCK])] = True
    kept = np.cumsum(used) - 1  # group index among the groups that have rows
    for a in range(0, len(order), BLOCK):
        source[a:a + BLOCK] = kept[source[a:a + BLOCK]]
    groups = [range(g * per_group, min((g + 1) * per_group, len(keys))) for g in np.flatnonzero(used).tolist()]
    return Plan([c for c in sw.columns(names) if c != "point"], keys.paths, keys.offsets, position, extra, groups,
                source)


BLOCK = 1 << 20  # output positions handled at once
