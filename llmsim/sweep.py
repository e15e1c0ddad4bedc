"""`llmsim sweep`: a YAML grid of scenarios, evaluated in chunks with joblib, ranked by Pareto front.

Spec (DESIGN.md): ``base`` (a scenario mapping, or the path of a scenario file), ``grid`` (dotted path ->
list, range ``{from, to, mul}`` / ``{from, to, step}``, or ``auto`` for a parallel degree), ``zip``
(dotted path -> lists of equal length, varied together), ``constraints`` (expressions over output
columns), ``objectives`` (``- maximize: col`` / ``- minimize: col``), ``keep: feasible | all``,
``compare: COLUMN`` (adds ``COLUMN_vs_previous`` and ``COLUMN_vs_first``, ratios in point order, and
``COLUMN_share``, each factor's share of the total log-ratio: a one-factor-at-a-time study prints each
factor, the cumulative product and how much of the whole each factor accounts for).
Point i of the sweep is decoded from its index (mixed radix over the axes), so each worker expands its
own index range from the spec: no rows are pickled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsim.expr import Expr
from llmsim.spec.errors import SpecError
from llmsim.spec.yamlio import Document, load_yaml

PARALLEL_DEGREES = {"parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.ep"}
SPEC_KEYS = {"base", "grid", "zip", "constraints", "objectives", "keep", "compare"}


@dataclass(frozen=True)
class SweepSpec:
    source: str
    base: dict
    axes: tuple[tuple[tuple[str, ...], tuple], ...]  # cartesian axes: (dotted path, values)
    zip_paths: tuple[tuple[str, ...], ...]
    zip_rows: tuple[tuple, ...]
    constraints: tuple[str, ...]
    objectives: tuple[tuple[str, bool], ...]  # (column, maximize)
    keep: str = "feasible"
    compare: str | None = None

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.axes) * max(len(self.zip_rows), 1)

    def point(self, i: int) -> list[tuple[tuple[str, ...], Any]]:
        """The overrides of point ``i`` (the last axis varies fastest, zip rows slowest)."""
        out = []
        for path, values in reversed(self.axes):
            i, j = divmod(i, len(values))
            out.append((path, values[j]))
        if self.zip_rows:
            out += list(zip(self.zip_paths, self.zip_rows[i], strict=True))
        return out[::-1]


def _err(doc: Document, loc: tuple, msg: str) -> SpecError:
    return SpecError(msg, file=doc.source, line=doc.line_of(loc), path=".".join(map(str, loc)) or None)


def _values(doc: Document, loc: tuple, raw, max_devices: int) -> tuple:
    path = loc[-1]
    if raw == "auto":
        if path not in PARALLEL_DEGREES:
            raise _err(doc, loc, f"auto is only allowed for {', '.join(sorted(PARALLEL_DEGREES))}")
        return tuple(d for d in range(1, max_devices + 1) if max_devices % d == 0)
    if isinstance(raw, dict):
        keys = set(raw)
        if keys not in ({"from", "to", "mul"}, {"from", "to", "step"}):
            raise _err(doc, loc, "a range is {from, to, mul} or {from, to, step}")
        lo, hi = raw["from"], raw["to"]
        if "mul" in raw:
            if not (isinstance(raw["mul"], (int, float)) and raw["mul"] > 1 and lo > 0):
                raise _err(doc, loc, "mul must be > 1 and from > 0")
            out, v = [], lo
            while v <= hi * (1 + 1e-12):
                out.append(v)
                v = v * raw["mul"]
            return tuple(out)
        if not (isinstance(raw["step"], (int, float)) and raw["step"] > 0):
            raise _err(doc, loc, "step must be > 0")
        n = math.floor((hi - lo) / raw["step"] + 1e-9) + 1
        return tuple(lo + k * raw["step"] for k in range(max(n, 0)))
    if isinstance(raw, list) and raw:
        return tuple(raw)
    raise _err(doc, loc, "expected a non-empty list, a range {from, to, mul|step}, or auto")


def load_sweep(path: str | Path) -> SweepSpec:
    doc = load_yaml(path)
    d = doc.data
    if not isinstance(d, dict):
        raise _err(doc, (), f"a sweep spec is a mapping with keys {', '.join(sorted(SPEC_KEYS))}")
    unknown = set(d) - SPEC_KEYS
    if unknown:
        key = min(unknown)
        raise _err(doc, (key,), f"unknown key {key!r}; allowed: {', '.join(sorted(SPEC_KEYS))}")
    base = d.get("base")
    if isinstance(base, str):
        base_path = (Path(path).parent / base) if not Path(base).is_absolute() else Path(base)
        base = load_yaml(base_path).data
    if not isinstance(base, dict):
        raise _err(doc, ("base",), "base must be a scenario mapping or the path of a scenario file")
    grid = d.get("grid") or {}
    if not isinstance(grid, dict):
        raise _err(doc, ("grid",), "grid maps dotted paths to lists of values")
    devices = [base.get("system", {}).get("num_devices", 1)]
    devices += list(_values(doc, ("grid", "system.num_devices"), grid["system.num_devices"], 1)
                    if "system.num_devices" in grid else [])
    max_dev = max(int(x) for x in devices if isinstance(x, (int, float)))
    axes = tuple((tuple(k.split(".")), _values(doc, ("grid", k), v, max_dev)) for k, v in grid.items())
    zp = d.get("zip") or {}
    if not isinstance(zp, dict) or any(not isinstance(v, list) for v in zp.values()):
        raise _err(doc, ("zip",), "zip maps dotted paths to lists of equal length")
    lengths = {len(v) for v in zp.values()}
    if len(lengths) > 1:
        raise _err(doc, ("zip",), f"zip lists must have equal lengths, got {sorted(lengths)}")
    zip_rows = tuple(zip(*zp.values(), strict=True)) if zp else ()
    constraints = d.get("constraints") or []
    for i, c in enumerate(constraints):
        try:
            Expr(str(c))
        except ValueError as err:
            raise _err(doc, ("constraints", i), str(err)) from None
    objectives = []
    for i, o in enumerate(d.get("objectives") or []):
        if not (isinstance(o, dict) and len(o) == 1 and next(iter(o)) in ("maximize", "minimize")):
            raise _err(doc, ("objectives", i), "each objective is {maximize: COLUMN} or {minimize: COLUMN}")
        (sense, col), = o.items()
        objectives.append((str(col), sense == "maximize"))
    if len(objectives) > 4:
        raise _err(doc, ("objectives",), "1 to 4 objectives")
    keep = d.get("keep", "feasible")
    if keep not in ("feasible", "all"):
        raise _err(doc, ("keep",), f"keep must be feasible or all, got {keep!r}")
    compare = d.get("compare")
    if compare is not None and not isinstance(compare, str):
        raise _err(doc, ("compare",), "compare names one output column, e.g. compare: tokens_per_s")
    return SweepSpec(doc.source, base, axes, tuple(tuple(k.split(".")) for k in zp), zip_rows,
                     tuple(str(c) for c in constraints), tuple(objectives), keep, compare)


def evaluate_range(spec: SweepSpec, preset_dirs: tuple[str, ...], start: int, stop: int, front_only: bool = False):
    """Rows (a DataFrame) of points ``start`` .. ``stop - 1``: a worker's chunk (sweep_eval.py). With
    ``front_only`` only the chunk's Pareto front is returned: a point on the sweep's front is on its
    chunk's front, so the reduction loses nothing and keeps the workers' results small."""
    from llmsim.sweep_eval import evaluate_chunk

    rows = evaluate_chunk(spec, preset_dirs, start, stop)
    if front_only and spec.objectives and len(rows):
        ranked = rank(rows, spec.objectives)
        rows = ranked[ranked["pareto_rank"] == 0].drop(columns="pareto_rank")
        rows = rows.sort_values("point", ignore_index=True)
    return rows


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


CHUNK = 8192  # points per task: large enough that numpy amortises the per-group work


def run(spec: SweepSpec, preset_dirs: tuple[str, ...], jobs: int = 1, chunk: int = CHUNK, progress=None,
        front_only: bool = False):
    """All kept rows (a DataFrame in point order), chunk by chunk over ``jobs`` joblib workers (the
    active joblib backend); each worker expands its own index range from the spec (``front_only``:
    and returns only its chunk's Pareto front)."""
    import pandas as pd
    from joblib import Parallel, delayed

    parts = chunks(spec.size, chunk)
    tasks = (delayed(evaluate_range)(spec, preset_dirs, a, b, front_only) for a, b in parts)
    out = []
    for frame in Parallel(n_jobs=jobs, return_as="generator")(tasks):
        if len(frame):
            out.append(frame)
        if progress:
            progress(len(parts))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def rank_order(values, feasible, maximize: list[bool]):
    """(ranks, order) of all rows: ``order`` puts the feasible rows by Pareto rank, then by the first
    objective (best first), then the infeasible rows in point order; ``ranks`` is an object array, None
    for infeasible rows."""
    import numpy as np

    from llmsim.pareto import order

    good = np.flatnonzero(feasible)
    ranks = np.full(len(feasible), None, dtype=object)
    r, idx = order(values[good], maximize)
    ranks[good] = r.tolist()
    return ranks, np.concatenate([good[idx], np.flatnonzero(~feasible)])


def _numeric(rows, col: str):
    import pandas as pd

    return pd.to_numeric(rows[col], errors="coerce").to_numpy(float)


def check_objectives(columns: list[str], objectives, source: str = "") -> None:
    for col, _ in objectives:
        if col not in columns:
            raise SpecError(f"objective column {col!r} is not an output column; e.g. "
                            f"{', '.join(columns[1:9])}, ...", file=source, path="objectives")


def rank(rows, objectives: tuple[tuple[str, bool], ...]):
    """Rows with ``pareto_rank`` (feasible rows only; infeasible last), best first."""
    import numpy as np

    if not objectives or not len(rows):
        return rows
    feasible = rows["infeasible_reason"].isna().to_numpy() if "infeasible_reason" in rows else np.ones(len(rows), bool)
    check_objectives(list(rows.columns), objectives)
    vals = np.column_stack([_numeric(rows, c) for c, _ in objectives])
    ranks, idx = rank_order(vals, feasible, [m for _, m in objectives])
    return rows.iloc[idx].assign(pareto_rank=ranks[idx]).reset_index(drop=True)


def ratios(value, ok):
    """(vs_previous, vs_first, share): each feasible value over the previous and the first feasible one
    (values in point order; NaN where not ``ok`` and, for vs_first, at the first feasible value itself),
    and each factor's share of the whole: log(vs_previous) / log(last vs_first), so the shares sum to 1
    (a factor multiplies, so its share of a product is its share of the log)."""
    import numpy as np
    import pandas as pd

    value = pd.Series(np.where(ok, value, np.nan))
    first = np.flatnonzero(ok)
    ref = value.iloc[first[0]] if len(first) else np.nan
    vs_first = (value / ref).to_numpy(copy=True)
    if len(first):
        vs_first[first[0]] = np.nan
    vs_previous = (value / value.ffill().shift()).to_numpy()
    total = vs_first[first[-1]] if len(first) > 1 else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.log(vs_previous) / np.log(total) if total > 0 and total != 1 else np.full(len(value), np.nan)
    return vs_previous, vs_first, share


def compare_columns(col: str) -> list[str]:
    return [f"{col}_vs_previous", f"{col}_vs_first", f"{col}_share"]


def compare(rows, col: str | None, source: str = ""):
    """``col_vs_previous``, ``col_vs_first`` and ``col_share``: each row's ``col`` over the previous and
    the first feasible row's, in point order (rows come from ``run`` in point order), and the factor's
    share of the total (``ratios``)."""
    import numpy as np

    if not col or not len(rows):
        return rows
    if col not in rows:
        raise SpecError(f"compare column {col!r} is not an output column", file=source, path="compare")
    ok = rows["infeasible_reason"].isna().to_numpy() if "infeasible_reason" in rows else np.ones(len(rows), bool)
    return rows.assign(**dict(zip(compare_columns(col), ratios(_numeric(rows, col), ok), strict=True)))


def columns(rows) -> list[str]:
    """Output columns: the record's, then pareto_rank and infeasible_reason (``rows``: a frame or names)."""
    seen = list(getattr(rows, "columns", rows))
    tail = [c for c in ("pareto_rank", "infeasible_reason") if c in seen]
    return [c for c in seen if c not in tail and c != "point"] + tail
