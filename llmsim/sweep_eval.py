"""Evaluating one chunk of a sweep (a worker's index range) as columns.

The points' axis values are decoded from their indices as arrays. Points are grouped by their
categorical values (every zip row and every axis that is not a split count: accelerator, network,
precision, recompute, ...); each group's scenario is validated once, and its training splits (device
count, tp, pp, dp, cp, ep, microbatch, virtual stages, global batch) go through the engine as numpy
columns (``estimate.training_record``, the function ``llmsim estimate`` uses for one point). Inference
groups are evaluated point by point.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from llmsim.engine.batch import factorize
from llmsim.engine.split import SPLIT_INPUTS, Split, inputs_of, split_arrays
from llmsim.expr import Expr
from llmsim.spec.errors import SpecError
from llmsim.spec.yamlio import Document

# dotted scenario path -> split input evaluated as a column
VECTOR_PATHS = {("system", "num_devices"): "num_devices", ("workload", "global_batch_size"): "global_batch_size",
                **{("parallel", k): k for k in ("tp", "pp", "dp", "cp", "ep", "microbatch_size", "virtual_stages")}}


def _counts(values) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)


_REGISTRIES: dict = {}  # per worker process: presets parsed once, not once per chunk


class _Context:
    """What every group of a chunk shares: the spec, the preset registry, compiled constraints."""

    def __init__(self, spec, preset_dirs):
        from llmsim.spec.presets import PresetRegistry

        if preset_dirs not in _REGISTRIES:
            _REGISTRIES[preset_dirs] = PresetRegistry(list(preset_dirs))
        self.spec, self.registry = spec, _REGISTRIES[preset_dirs]
        self.checks = [Expr(c) for c in spec.constraints]
        self.doc = Document(spec.base, spec.source)

    def scenario(self, overrides):
        from llmsim.spec.convert import scenario_values
        from llmsim.spec.load import apply_overrides, resolve_presets
        from llmsim.spec.scenario import ScenarioSpec
        from llmsim.spec.validation import validate

        data = copy.deepcopy(self.spec.base)
        apply_overrides(data, overrides, self.registry)
        resolve_presets(data, self.doc, self.registry)
        return scenario_values(validate(ScenarioSpec, data, self.doc))

    def constrain(self, cols: dict, reasons: np.ndarray) -> None:
        for c in self.checks:
            missing = [n for n in c.names if n not in cols]
            if missing:
                raise SpecError(f"constraint {c.text!r} names unknown column {missing[0]!r}",
                                file=self.spec.source, path="constraints")
            fail = ~c.mask(cols) & pd.isna(reasons)
            reasons[fail] = f"constraint {c.text}"


def evaluate_chunk(spec, preset_dirs: tuple[str, ...], start: int, stop: int) -> pd.DataFrame:
    """Rows of points ``start`` .. ``stop - 1``, in point order, with ``point`` and ``infeasible_reason``
    (infeasible rows only with ``keep: all``)."""
    ctx = _Context(spec, preset_dirs)
    idx = np.arange(start, stop, dtype=np.int64)
    rest, picks = idx, []
    for _, values in reversed(spec.axes):  # mixed radix, the last axis fastest (SweepSpec.point)
        rest, j = np.divmod(rest, len(values))
        picks.append(j)
    picks.reverse()
    vec = [k for k, (path, values) in enumerate(spec.axes) if path in VECTOR_PATHS and _counts(values)]
    cat = [k for k in range(len(spec.axes)) if k not in vec]
    code, first = factorize(rest, *(picks[k] for k in cat))
    order = np.argsort(code, kind="stable")
    bounds = np.cumsum(np.bincount(code, minlength=len(first)))
    frames = []
    for g, i0 in enumerate(first):
        rows = order[(bounds[g - 1] if g else 0):bounds[g]]
        fixed = [(spec.axes[k][0], spec.axes[k][1][picks[k][i0]]) for k in cat]
        if spec.zip_rows:
            fixed += list(zip(spec.zip_paths, spec.zip_rows[rest[i0]], strict=True))
        varied = {VECTOR_PATHS[spec.axes[k][0]]: np.asarray(spec.axes[k][1], dtype=np.int64)[picks[k][rows]]
                  for k in vec}
        frames.append(_group(ctx, idx[rows], fixed, varied, [spec.axes[k][0] for k in vec]))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out.sort_values("point", kind="stable", ignore_index=True) if len(out) else out


def _group(ctx: _Context, points, fixed, varied: dict, varied_paths) -> pd.DataFrame:
    """One group: fixed categorical overrides, split inputs varying as arrays."""
    try:
        sc = ctx.scenario(fixed + [(p, 1) for p in varied_paths])  # the varied counts checked below
    except SpecError as err:
        return _failed(ctx, points, fixed, varied, err.message)
    if sc.workload.mode != "training":
        return _pointwise(ctx, points, fixed, varied, varied_paths)
    base = inputs_of(sc)
    n = {k: varied.get(k, np.full(len(points), base[k]) if base[k] is not None else None) for k in SPLIT_INPUTS}
    n = {k: v for k, v in n.items() if v is not None}
    split, ok, why = split_arrays(sc, n)
    reasons = np.array([w[0] if w else None for w in why], dtype=object)
    largest = sc.network.tiers[-1].size
    big = n["num_devices"] > largest
    reasons[big] = [f"num_devices ({d}) exceeds the largest tier of network '{sc.network.name}' ({largest} "
                    "devices)" for d in n["num_devices"][big]]
    ok &= ~big
    from llmsim.estimate import training_inputs, training_record

    sub = Split(**{f: (np.asarray(getattr(split, f))[ok] if np.ndim(getattr(split, f)) else getattr(split, f))
                   for f in Split.__dataclass_fields__})
    cols = training_record(sc, sub, n["num_devices"][ok], n["global_batch_size"][ok])
    good = np.full(int(ok.sum()), None, dtype=object)
    good[~cols["fits_in_memory"]] = "does not fit in memory"
    ctx.constrain(cols, good)
    parts = [pd.DataFrame({"point": points[ok], **cols, "infeasible_reason": good})]
    if ctx.spec.keep == "all" and not ok.all():
        bad = {k: v[~ok] for k, v in n.items()}
        parts.append(pd.DataFrame({"point": points[~ok], **training_inputs(sc, bad),
                                   "infeasible_reason": reasons[~ok]}))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return out if ctx.spec.keep == "all" else out[out["infeasible_reason"].isna()]


def _failed(ctx, points, fixed, varied, message) -> pd.DataFrame:
    if ctx.spec.keep != "all":
        return pd.DataFrame()
    # the output column of a scenario path is its last key (parallel.tp -> tp, system.accelerator -> accelerator)
    cols = {p[-1]: [v] * len(points) for p, v in fixed}
    cols.update({p[-1]: varied[k] for p, k in VECTOR_PATHS.items() if k in varied})
    return pd.DataFrame({"point": points, **cols, "infeasible_reason": message})


def _pointwise(ctx, points, fixed, varied, varied_paths) -> pd.DataFrame:
    """Inference groups: one scenario per point through ``estimate.record``."""
    from llmsim.estimate import record

    rows = []
    for i, point in enumerate(points):
        overrides = fixed + [(p, int(varied[VECTOR_PATHS[p]][i])) for p in varied_paths]
        try:
            rec = record(ctx.scenario(overrides))
            reason = None if rec.get("fits_in_memory", True) else "does not fit in memory"
        except SpecError as err:
            rec, reason = {".".join(p): v for p, v in overrides}, err.message
        rows.append({"point": int(point), **rec, "infeasible_reason": reason})
    frame = pd.DataFrame(rows)
    reasons = frame["infeasible_reason"].to_numpy(dtype=object).copy()
    feasible = pd.isna(reasons)
    if feasible.any():
        sub = {c: frame[c].to_numpy()[feasible] for c in frame.columns}
        sub_reasons = reasons[feasible].copy()
        ctx.constrain(sub, sub_reasons)
        reasons[feasible] = sub_reasons
    frame["infeasible_reason"] = reasons
    return frame if ctx.spec.keep == "all" else frame[frame["infeasible_reason"].isna()]
