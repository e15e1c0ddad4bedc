"""Evaluating one chunk of a sweep (a worker's index range) as columns.

The points' axis values are decoded from their indices as arrays. Points are grouped by their
categorical values (every zip row and every axis that is not a count: accelerator, network,
precision, recompute, ...); each group's scenario is validated once, and its splits (device count, tp,
pp, dp, cp, ep, microbatch, virtual stages, global batch; inference: batch size, input and output
length) go through the engine as numpy columns (``estimate.training_record`` / ``inference_record``,
the functions ``llmsim estimate`` uses for one point).
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pandas as pd

from llmsim.engine.columns import factorize
from llmsim.engine.split import SPLIT_INPUTS, Split, inputs_of
from llmsim.spec.errors import SpecError
from llmsim.spec.expr import Expr
from llmsim.spec.yamlio import Document
from llmsim.study import auto, modes, rowset
from llmsim.study.columns import axis_column, axis_columns, axis_paths, cell, record_names
from llmsim.study.group_splits import check_splits
from llmsim.study.modes.training import best_of_auto

# dotted scenario path -> split input evaluated as a column
VECTOR_PATHS = {("system", "num_devices"): "num_devices", ("workload", "global_batch_size"): "global_batch_size",
                **{("parallel", k): k for k in ("tp", "pp", "dp", "cp", "ep", "microbatch_size", "virtual_stages")},
                **{("workload", k): k for k in ("batch_size", "input_len", "output_len", "concurrency")}}  # inference, serving


def _counts(values) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)


_REGISTRIES: dict = {}  # per worker process: presets parsed once, not once per chunk


class _Context:
    """What every group of a chunk shares: the spec, the preset registry, compiled constraints."""

    def __init__(self, spec, preset_dirs, front: bool = False):
        from llmsim.spec.presets import PresetRegistry

        if preset_dirs not in _REGISTRIES:
            _REGISTRIES[preset_dirs] = PresetRegistry(list(preset_dirs))
        self.spec, self.registry = spec, _REGISTRIES[preset_dirs]
        self.front = front and bool(spec.objectives) and spec.keep != "all"
        self.checks = [Expr(c) for c in spec.constraints]
        self.doc = Document(spec.base, spec.source)
        self.axis_columns = axis_columns(axis_paths(spec), record_names(spec))

    def scenario(self, overrides):
        from llmsim.spec.convert import scenario_values
        from llmsim.spec.load import apply_overrides, resolve_presets
        from llmsim.spec.scenario import ScenarioSpec
        from llmsim.spec.validation import validate

        data = copy.deepcopy(self.spec.base)
        apply_overrides(data, copy.deepcopy(overrides), self.registry)  # the spec's grid values stay as written
        resolve_presets(data, self.doc, self.registry)
        return scenario_values(validate(ScenarioSpec, data, self.doc))

    def constrain(self, cols: dict, reasons: np.ndarray) -> None:
        for c in self.checks:
            missing = [n for n in c.names if n not in cols]
            if missing:
                raise SpecError(f"constraint {c.text!r} names unknown column {missing[0]!r}",
                                file=self.spec.source, path="constraints")
            try:
                fail = ~c.mask(cols) & pd.isna(reasons)
            except ValueError as err:
                raise SpecError(f"constraint {err}", file=self.spec.source, path="constraints") from None
            reasons[fail] = f"constraint {c.text}"


_AXES: dict[int, tuple] = {}  # id(spec) -> (spec, its axes): checked once per spec, not once per chunk


def _axes(spec) -> tuple[list[int], list[int]]:
    """(axes evaluated as columns inside a group, axes that split groups), by axis number."""
    hit = _AXES.get(id(spec))
    if hit is None or hit[0] is not spec:  # the spec is kept, so its id is not reused while cached
        vec = [k for k, (path, values) in enumerate(spec.axes) if path in VECTOR_PATHS and _counts(values)]
        hit = (spec, (vec, [k for k in range(len(spec.axes)) if k not in vec]))
        if len(_AXES) >= 8:
            _AXES.clear()
        _AXES[id(spec)] = hit
    return hit[1]


def tasks(spec, chunk: int) -> list[tuple[int, int]]:
    """The workers' tasks, ranges of positions in the group-major order (``point_indices``): whole groups
    (points that share their categorical values), ``chunk // G`` of them a task for groups of G points,
    or a group of more than ``chunk`` points cut into near-equal pieces; each group's fixed costs (its
    scenario, its distinct collectives, its frame) are paid once or a few times, not once per chunk."""
    g = math.prod(len(spec.axes[k][1]) for k in _axes(spec)[0])
    if g <= chunk:
        step = g * (chunk // g)
        return [(a, min(a + step, spec.size)) for a in range(0, spec.size, step)]
    cuts = [g * i // -(-g // chunk) for i in range(-(-g // chunk) + 1)]
    return [(a + x, a + y) for a in range(0, spec.size, g) for x, y in itertools.pairwise(cuts)]


def point_indices(spec, start: int, stop: int) -> np.ndarray:
    """Points at positions ``start`` .. ``stop - 1`` of the group-major order: the zip row and the
    categorical axes vary slowest, the axes evaluated as columns fastest (each keeping its order)."""
    vec, cat = _axes(spec)
    sizes = [len(values) for _, values in spec.axes]
    weight = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]  # place values in point order
    rest = np.arange(start, stop, dtype=np.int64)
    point = np.zeros(len(rest), dtype=np.int64)
    for k in reversed(cat + vec):
        rest, j = np.divmod(rest, sizes[k])
        point += j * weight[k]
    return point + rest * math.prod(sizes)


def evaluate_chunk(spec, preset_dirs: tuple[str, ...], start: int, stop: int) -> pd.DataFrame:
    """Rows of the points at positions ``start`` .. ``stop - 1`` of the group-major order
    (``point_indices``), in point order, with ``point`` and ``infeasible_reason`` (infeasible rows only
    with ``keep: all``): ``chunk_rows`` as a pandas frame."""
    return rowset.to_pandas(chunk_rows(spec, preset_dirs, start, stop))


def chunk_rows(spec, preset_dirs: tuple[str, ...], start: int, stop: int, front: bool = False) -> rowset.Rows:
    """``evaluate_chunk``'s rows as columns (``rowset``); ``front``: only each group's Pareto front by the
    spec's objectives (a superset of the chunk's front, which holds the sweep's)."""
    ctx = _Context(spec, preset_dirs, front)
    idx = point_indices(spec, start, stop)
    rest, picks = idx, []
    for _, values in reversed(spec.axes):  # mixed radix, the last axis fastest (SweepSpec.point)
        rest, j = np.divmod(rest, len(values))
        picks.append(j)
    picks.reverse()
    vec, cat = _axes(spec)
    code, first = factorize(rest, *(picks[k] for k in cat))
    order = np.argsort(code, kind="stable")
    bounds = np.cumsum(np.bincount(code, minlength=len(first)))
    parts = []
    for g, i0 in enumerate(first):
        rows = order[(bounds[g - 1] if g else 0):bounds[g]]
        fixed = [(spec.axes[k][0], spec.axes[k][1][picks[k][i0]]) for k in cat]
        if spec.zip_rows:
            fixed += list(zip(spec.zip_paths, spec.zip_rows[rest[i0]], strict=True))
        varied = {VECTOR_PATHS[spec.axes[k][0]]: np.asarray(spec.axes[k][1], dtype=np.int64)[picks[k][rows]]
                  for k in vec}
        parts += [_with_axes(p, fixed, ctx.axis_columns)
                  for p in _group(ctx, idx[rows], fixed, varied, [spec.axes[k][0] for k in vec])]
    return rowset.in_point_order(rowset.concat(parts))


def _with_axes(rows: rowset.Rows, fixed, columns: dict[str, tuple]) -> rowset.Rows:
    """The group's rows with its values of the grid keys that have no record column (``columns``)."""
    n = rowset.length(rows)
    if n:
        values = dict(fixed)
        for name, path in columns.items():
            if path in values:
                rows[name] = rowset.broadcast(cell(values[path]), n)
    return rows


def _group(ctx: _Context, points, fixed, varied: dict, varied_paths) -> list[rowset.Rows]:
    """One group: fixed categorical overrides, split inputs (and inference batch and lengths) varying as
    arrays."""
    try:
        # the varied counts are checked below; their placeholder is the smallest value each allows
        # (a serving output needs two tokens: one from prefill, one decoded)
        sc = ctx.scenario(fixed + [(p, 2 if p == ("workload", "output_len") else 1) for p in varied_paths])
    except SpecError as err:
        # the scenario key goes into the reason too: "required key is missing" alone names nothing
        return _failed(ctx, points, fixed, varied, f"{err.path}: {err.message}" if err.path else err.message)
    # training knobs left auto: each point takes the fastest of its own values that fits (modes/training.best_of_auto)
    knobs = tuple(k for k in auto.KNOBS if sc.workload.mode == "training" and getattr(sc.parallel, k) == "auto"
                  and k not in varied)
    base = {k: 1 if k in knobs else v for k, v in inputs_of(sc).items()}
    n = {k: varied.get(k, np.full(len(points), base[k]) if base[k] is not None else None) for k in SPLIT_INPUTS}
    n = {k: v for k, v in n.items() if v is not None}
    keep_all = ctx.spec.keep == "all"
    if knobs:
        ok, reasons, split, engine, inputs = best_of_auto(sc, n, varied, knobs, keep_all,
                                                          ctx.constrain if ctx.checks else None)
        return _rows(ctx, points, ok, reasons, split, engine, inputs)
    split, ok, reasons = check_splits(sc, n, varied, keep_all)
    engine, inputs, ok, reasons = modes.of(sc).group(sc, n, varied, split, ok, reasons, keep_all)
    return _rows(ctx, points, ok, reasons, split, engine, inputs)


def _rows(ctx: _Context, points, ok, reasons, split: Split, engine, inputs) -> list[rowset.Rows]:
    """The group's rows: ``engine(valid splits)`` -> columns of the valid rows (reasons: does not fit,
    constraints), with ``keep: all`` also the invalid rows' ``inputs(mask)`` and reasons; with
    ``ctx.front`` only the group's Pareto front (a point on the sweep's front is on its group's)."""
    parts = []
    if ok.any():
        cols = engine(split.take(ok))
        # an engine may give a row its own reason (disaggregated pools it cannot form)
        good = np.asarray(cols.pop("infeasible_reason", np.full(int(ok.sum()), None)), dtype=object)
        good[~np.asarray(cols["fits_in_memory"], dtype=bool) & pd.isna(good)] = "does not fit in memory"
        if pd.isna(good).any():  # rows the engine could not form carry only their inputs
            ctx.constrain(cols, good)
        pts = points[ok]
        if ctx.spec.keep != "all":  # drop the rows that failed before building the frame, column by column
            kept = np.flatnonzero(pd.isna(good))
            if len(kept) and ctx.front:
                kept = kept[_front(cols, kept, ctx.spec.objectives, ctx.axis_columns)]
            if len(kept) < len(good):
                cols = {k: (v[kept] if np.ndim(v) else v) for k, v in cols.items()}
                pts, good = pts[kept], good[kept]
        parts.append(rowset.of({"point": pts, **cols, "infeasible_reason": good}, len(pts)))
    if ctx.spec.keep == "all" and not ok.all():
        parts.append(rowset.of({"point": points[~ok], **inputs(~ok), "infeasible_reason": reasons[~ok]},
                               int((~ok).sum())))
    return parts


def _front(cols: dict, rows: np.ndarray, objectives, constant) -> np.ndarray:
    """Mask over ``rows`` (positions in ``cols``) of the rows on their Pareto front by the objectives the
    engine's columns hold. An objective that is a grid key's column (``constant``: one value in a group)
    ranks no row of the group above another; any other objective outside the engine's columns (``point``)
    may: then no row is cut here (the chunk's front is taken later, on every column)."""
    from llmsim.study.pareto import pareto_rank

    if any(c not in cols and c not in constant for c, _ in objectives):
        return np.ones(len(rows), bool)
    held = [(c, m) for c, m in objectives if c in cols]
    if not held:
        return np.ones(len(rows), bool)
    n = len(cols["fits_in_memory"]) if np.ndim(cols["fits_in_memory"]) else 1
    values = np.column_stack([rowset.numeric(rowset.of({c: cols[c]}, n), c)[rows] for c, _ in held])
    return pareto_rank(values, [m for _, m in held]) == 0


def _failed(ctx, points, fixed, varied, message) -> list[rowset.Rows]:
    if ctx.spec.keep != "all":
        return []
    # the output column of a scenario path (axis_column: parallel.tp -> tp, system.accelerator -> accelerator)
    cols = {axis_column(p): [cell(v)] * len(points) for p, v in fixed}
    cols.update({p[-1]: varied[k] for p, k in VECTOR_PATHS.items() if k in varied})
    return [rowset.of({"point": points, **cols, "infeasible_reason": message}, len(points))]
