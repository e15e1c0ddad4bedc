"""Pareto ranking (non-dominated sorting) of design points over 1-4 objectives, via moocore."""

from __future__ import annotations

import numpy as np


def _rows(values) -> np.ndarray:
    """``values`` as rows x objectives (a vector is one objective; zero rows allowed)."""
    values = np.asarray(values, dtype=float)
    return values[:, None] if values.ndim == 1 else values


def pareto_rank(values: np.ndarray, maximize: list[bool]) -> np.ndarray:
    """Front index of each row (0 = non-dominated); ``values`` is rows x objectives. NaN rows rank last."""
    import moocore

    values = _rows(values)
    ranks = np.full(len(values), len(values), dtype=np.int64 if len(values) >= 2**31 else np.int32)
    ok = np.all(np.isfinite(values), axis=1)
    some = values if ok.all() else values[ok]  # no copy of a sweep's keys when every value is a number
    if ok.any() and values.shape[1] == 1:  # one objective: fronts are the distinct values in order
        v = some[:, 0] * (-1 if maximize[0] else 1)
        ranks[ok] = np.unique(v, return_inverse=True)[1].ravel()
    elif ok.any():
        ranks[ok] = moocore.pareto_rank(some, maximise=list(maximize))
    return ranks


def order(values: np.ndarray, maximize: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(ranks, row order): by Pareto rank, then by the first objective (best first)."""
    ranks = pareto_rank(values, maximize)
    first = _rows(values)[:, 0]
    key = np.where(np.isfinite(first), -first if maximize[0] else first, np.inf)
    return ranks, np.lexsort((key, ranks))
