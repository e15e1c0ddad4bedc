"""`llmsim sweep`: a sweep spec (``spec/sweep.py``) evaluated in chunks with joblib and ranked by Pareto
front. ``compare: COLUMN`` adds ``COLUMN_vs_previous`` and ``COLUMN_vs_first``, ratios in point order, and
``COLUMN_share``, each factor's share of the total log-ratio: a one-factor-at-a-time study prints each
factor, the cumulative product and how much of the whole each factor accounts for.
"""

from __future__ import annotations

from llmsim.spec.errors import SpecError
from llmsim.spec.sweep import SweepSpec
from llmsim.study.columns import axis_columns, axis_paths, record_names


def evaluate_range(spec: SweepSpec, preset_dirs: tuple[str, ...], start: int, stop: int, front_only: bool = False):
    """Rows (a DataFrame, in point order) of the points at positions ``start`` .. ``stop - 1`` of the
    group-major order: a worker's task (``tasks``, evaluate.py); ``range_rows`` as a pandas frame."""
    from llmsim.study import rowset

    return rowset.to_pandas(range_rows(spec, preset_dirs, start, stop, front_only))


def range_rows(spec: SweepSpec, preset_dirs: tuple[str, ...], start: int, stop: int, front_only: bool = False):
    """``evaluate_range``'s rows as columns (``rowset.Rows``). With ``front_only`` only the chunk's Pareto
    front is returned: a point on the sweep's front is on its chunk's front (and on its group's, where
    the groups are first cut down), so the reduction loses nothing and keeps the workers' results small."""
    from llmsim.study import rowset
    from llmsim.study.evaluate import chunk_rows

    rows = chunk_rows(spec, preset_dirs, start, stop, front=front_only)
    if front_only and spec.objectives and rowset.length(rows):
        rows = rowset.take(rows, on_front(rows, spec.objectives))
    return rows


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


CHUNK = 16384  # points per task: large enough that numpy amortises the per-group work
IN_PROCESS = 100_000  # smaller sweeps run in this process: starting workers costs more than it saves


def jobs_for(points: int, jobs: int) -> int:
    """Worker processes for a sweep of ``points``: ``jobs``, or 1 (this process) for a small sweep."""
    return jobs if points >= IN_PROCESS else 1


def tasks(spec: SweepSpec, chunk: int | None = None) -> list[tuple[int, int]]:
    """Workers' tasks: ranges of the group-major order holding whole groups of about ``chunk`` points."""
    from llmsim.study.evaluate import tasks as group_tasks

    return group_tasks(spec, chunk or CHUNK)


def run(spec: SweepSpec, preset_dirs: tuple[str, ...], jobs: int = 1, chunk: int = CHUNK, progress=None,
        front_only: bool = False):
    """All kept rows (a DataFrame in point order), task by task over ``jobs`` joblib workers (the
    active joblib backend; this process alone under ``IN_PROCESS`` points); each worker expands its own
    index range from the spec (``front_only``: and returns only its chunk's Pareto front)."""
    from joblib import Parallel, delayed

    from llmsim.study import rowset

    parts = tasks(spec, chunk)
    todo = (delayed(range_rows)(spec, preset_dirs, a, b, front_only) for a, b in parts)
    out = []
    for rows in Parallel(n_jobs=jobs_for(spec.size, jobs), return_as="generator")(todo):
        if rowset.length(rows):
            out.append(rows)
        if progress:
            progress(len(parts))
    return rowset.to_pandas(rowset.in_point_order(rowset.concat(out)))


def rank_order(values, feasible, maximize: list[bool]):
    """(ranks, order) of all rows: ``order`` puts the feasible rows by Pareto rank, then by the first
    objective (best first), then the infeasible rows in point order; ``ranks`` is an object array, None
    for infeasible rows."""
    import numpy as np

    from llmsim.study.pareto import order

    good = np.flatnonzero(feasible)
    ranks = np.full(len(feasible), None, dtype=object)
    r, idx = order(values[good], maximize)
    ranks[good] = r.tolist()
    return ranks, np.concatenate([good[idx], np.flatnonzero(~feasible)])


def _numeric(rows, col: str):
    import pandas as pd

    return pd.to_numeric(rows[col], errors="coerce").to_numpy(float)


def expected_columns(spec: SweepSpec) -> list[str]:
    """The columns a sweep's rows have, known before any point is evaluated: the record's of each workload
    mode the sweep runs, the grid keys without a record column, the compare columns, pareto_rank and
    infeasible_reason."""
    names = record_names(spec)
    names += list(axis_columns(axis_paths(spec), names))
    names += compare_columns(spec.compare) if spec.compare else []
    return names + (["pareto_rank"] if spec.objectives else []) + ["infeasible_reason"]


def check_columns(spec: SweepSpec) -> None:
    """Objectives and the compare column name output columns: checked before the sweep runs."""
    names = expected_columns(spec)
    check_objectives(names, spec.objectives, spec.source)
    if spec.compare and spec.compare not in names:
        raise SpecError(f"compare column {spec.compare!r} is not an output column; e.g. "
                        f"{', '.join(names[1:9])}, ...", file=spec.source, path="compare")


def check_objectives(columns: list[str], objectives, source: str = "") -> None:
    for col, _ in objectives:
        if col not in columns:
            raise SpecError(f"objective column {col!r} is not an output column; e.g. "
                            f"{', '.join(columns[1:9])}, ...", file=source, path="objectives")


def rank(rows, objectives: tuple[tuple[str, bool], ...]):
    """Rows with ``pareto_rank`` (feasible rows only; infeasible last), best first."""
    if not objectives or not len(rows):
        return rows
    feasible, vals = _objective_values(rows, objectives)
    ranks, idx = rank_order(vals, feasible, [m for _, m in objectives])
    return rows.iloc[idx].assign(pareto_rank=ranks[idx]).reset_index(drop=True)


def _objective_values(rows, objectives):
    """(feasible mask, rows x objectives values) of rows (a frame, or ``rowset.Rows``)."""
    import numpy as np

    from llmsim.study import rowset

    if isinstance(rows, dict):
        n = rowset.length(rows)
        reason = rows.get("infeasible_reason")
        feasible = rowset.missing(reason) if reason is not None else np.ones(n, bool)
        check_objectives(list(rows), objectives)
        return feasible, np.column_stack([rowset.numeric(rows, c) for c, _ in objectives])
    feasible = rows["infeasible_reason"].isna().to_numpy() if "infeasible_reason" in rows else np.ones(len(rows), bool)
    check_objectives(list(rows.columns), objectives)
    return feasible, np.column_stack([_numeric(rows, c) for c, _ in objectives])


def on_front(rows, objectives: tuple[tuple[str, bool], ...]):
    """Boolean mask of the feasible rows on the Pareto front (``rank``'s rank 0), without reordering the
    rows: only the front's few rows are then taken from the frame."""
    import numpy as np

    from llmsim.study.pareto import pareto_rank

    feasible, vals = _objective_values(rows, objectives)
    good = np.flatnonzero(feasible)
    mask = np.zeros(len(feasible), dtype=bool)
    mask[good] = pareto_rank(vals[good], [m for _, m in objectives]) == 0
    return mask


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
