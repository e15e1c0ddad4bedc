"""``auto`` training knobs (``parallel.microbatch_size``, ``parallel.virtual_stages``): the values each is
chosen from, every row of a group repeated once per combination of its own values (``expand``), and the
fastest that fits picked back per row (``pick``). ``study/evaluate.best_of_auto`` runs the repeats through
the sweep's own group evaluation; ``study.modes.training.resolve_auto`` is that search on one point."""

from __future__ import annotations

import itertools

import numpy as np

KNOBS = ("microbatch_size", "virtual_stages")  # in this order: microbatch outer, interleaving inner


def interleavings_of(pp: int, slots: int) -> list[int]:
    """Virtual stages a pipeline of ``pp`` stages over ``slots`` layer slots can run: 1, and every v > 1
    that splits each device's slots into v equal chunks (Megatron-LM: layers per virtual stage an integer)
    with no chunk left empty."""
    if pp <= 1:
        return [1]
    per_device = -(-slots // pp)
    return [1] + [v for v in range(2, per_device + 1) if per_device % v == 0 and pp * v <= slots]


def microbatch_sizes_of(local: int) -> list[int]:
    """Microbatch sizes a data-parallel rank's ``local`` sequences can run in: every divisor of it."""
    return [m for m in range(1, local + 1) if local % m == 0]


def _slots(sc) -> int:
    from llmsim.engine.split import extra_stages

    return sc.model.layers + extra_stages(sc)


def _local(gbs: int, dp: int) -> int:
    """A data-parallel rank's share of the global batch (1 where dp does not divide it: refused later)."""
    return gbs // dp if gbs % dp == 0 else 1


def interleavings(sc) -> list[int]:
    """``interleavings_of`` the scenario's pipeline (the embedding and loss counted when they take a slot)."""
    return interleavings_of(sc.parallel.pp, _slots(sc))


def microbatch_sizes(sc) -> list[int]:
    """Microbatch sizes a training step can run: every divisor of a data-parallel rank's share of the
    global batch (dp as given, or the devices over tp*pp*cp)."""
    p, w = sc.parallel, sc.workload
    dp = p.dp or max(sc.num_devices // max(p.tp * p.pp * p.cp, 1), 1)
    return microbatch_sizes_of(_local(w.global_batch_size, dp))


def auto_choices(sc) -> dict[str, list[int]]:
    """The values each ``auto`` knob of a training scenario is chosen from (empty when none is auto)."""
    p, out = sc.parallel, {}
    if p.microbatch_size == "auto":
        out["microbatch_size"] = microbatch_sizes(sc)
    if p.virtual_stages == "auto":
        out["virtual_stages"] = interleavings(sc)
    return out


def expand(sc, n: dict, knobs: tuple[str, ...]) -> tuple[dict, np.ndarray]:
    """(the split-input rows ``n`` each repeated once per combination of its own values of the ``auto``
    ``knobs``, the row each repeat comes from): a row's repeats are consecutive, in ``auto_choices``'
    order (microbatch outer, interleaving inner), so the first of equals is the smallest."""
    m = len(n["tp"])
    dp = n["dp"] if "dp" in n else np.maximum(n["num_devices"] // np.maximum(n["tp"] * n["pp"] * n["cp"], 1), 1)
    keys = np.column_stack([n["global_batch_size"], dp, n["pp"]]).astype(np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    slots, blocks = _slots(sc), []
    for gbs, d, pp in uniq.tolist():
        lists = [microbatch_sizes_of(_local(gbs, d)) if k == "microbatch_size" else interleavings_of(pp, slots)
                 for k in knobs]
        blocks.append(np.array(list(itertools.product(*lists)), dtype=np.int64).reshape(-1, len(knobs)))
    counts = np.array([len(b) for b in blocks])[inv.ravel()]
    owner = np.repeat(np.arange(m), counts)
    start = np.repeat(np.cumsum(counts) - counts, counts)
    within = np.arange(len(owner)) - start  # the repeat's place in its row's combinations
    table = np.concatenate(blocks)
    offsets = np.r_[0, np.cumsum([len(b) for b in blocks])[:-1]]
    values = table[offsets[inv.ravel()][owner] + within]
    out = {k: v[owner] for k, v in n.items()}
    for j, k in enumerate(knobs):
        out[k] = values[:, j]
    return out, owner


def pick(owner: np.ndarray, fits: np.ndarray, speed: np.ndarray, rows: int) -> np.ndarray:
    """For each of ``rows`` rows, the position in ``owner`` (the row of each timed repeat, in repeat
    order) of its fastest repeat that fits in memory, or its fastest where none fits (the first of
    equals); -1 for a row with no timed repeat."""
    fits = np.asarray(fits, dtype=bool)
    any_fit = np.zeros(rows, bool)
    np.logical_or.at(any_fit, owner, fits)
    speed = np.asarray(speed, dtype=float)
    key = np.where((fits | ~any_fit[owner]) & np.isfinite(speed), speed, -np.inf)
    order = np.lexsort((np.arange(len(owner)), -key, owner))
    first = order[np.r_[True, owner[order][1:] != owner[order][:-1]]] if len(order) else order
    out = np.full(rows, -1, np.int64)
    out[owner[first]] = first
    return out
