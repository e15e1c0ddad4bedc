"""The split checks of a sweep's group: every row's split inputs checked on arrays before any row is timed
(``engine.split.split_arrays``), a serving prompt's own length for cp, and the network's largest tier."""

from __future__ import annotations

import dataclasses

import numpy as np

from llmsim.engine.network.capacity import too_many_devices
from llmsim.engine.split import Split, split_arrays


def check_splits(sc, n: dict, varied: dict, explain: bool) -> tuple[Split, np.ndarray, np.ndarray]:
    """(split, mask of valid rows, first failing check's message per row: None throughout without
    ``explain``) of the split inputs ``n``; every check is on arrays, before any row is timed."""
    split, ok, why = split_arrays(sc, n, explain)
    reasons = np.full(len(ok), None, dtype=object)
    if explain:
        reasons[:] = [w[0] if w else None for w in why]
    cp_rows = n["cp"] > 1
    if sc.workload.mode != "training" and "input_len" in varied and cp_rows.any():
        # cp must divide each row's own prompt length: check those rows again with it
        for length in np.unique(varied["input_len"][cp_rows]):
            rows = cp_rows & (varied["input_len"] == length)
            w = dataclasses.replace(sc.workload, input_len=int(length))
            _, ok[rows], why = split_arrays(dataclasses.replace(sc, workload=w), {k: v[rows] for k, v in n.items()},
                                            explain)
            if explain:
                reasons[rows] = [x[0] if x else None for x in why]
    too_many = too_many_devices(sc.network.name, sc.network.tiers[-1].size, n["num_devices"])
    big = too_many != None
    if explain:
        reasons[big] = too_many[big]
    return split, ok & ~big, reasons
