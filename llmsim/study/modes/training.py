"""Training as one mode: a step of the split's pipeline (engine/training.py), its input and cost columns,
``auto`` microbatch and interleaving resolved by a search over their values, and what ``llmsim search``
ranks by and tries."""

from __future__ import annotations

import numpy as np

from llmsim.study import auto
from llmsim.study.auto import KNOBS, auto_choices
from llmsim.study.group_splits import check_splits
from llmsim.study.modes.common import constant_column, cost_columns, system_inputs

MICROBATCHES = (1, 2, 4)
RECOMPUTE = ("none", "selective", "full")
ZERO = (0, 1, 2, 3)
VIRTUAL_STAGES = (1, 2, 4, 8)  # virtual_stages: auto in a searched scenario
SHOWN = ["tp", "pp", "dp", "ep", "cp", "microbatch_size", "recompute", "zero_stage", "step_time_s", "tokens_per_s",
         "mfu", "memory_per_device_gb", "cost_per_million_tokens_usd"]


class Training:
    name = "training"

    def point(self, sc) -> dict:
        """The row of one design point (``auto`` knobs resolved first)."""
        from llmsim.engine.columns import first_row
        from llmsim.engine.split import resolve_split

        sc = resolve_auto(sc)
        sp = resolve_split(sc)
        return first_row(training_record(sc, sp.as_column(), np.array([sc.num_devices]),
                                         np.array([sc.workload.global_batch_size])))

    def group(self, sc, n: dict, varied: dict, split, ok, reasons, keep_all: bool):
        """(engine on the valid splits, input columns of the refused ones, ok, reasons) of a sweep's group;
        splits whose states alone exceed the memory are refused untimed unless every row is kept."""
        if not keep_all:
            ok &= ~surely_too_big(sc, split, ok)  # dropped untimed: their rows would be dropped anyway
        engine = lambda sub: training_record(sc, sub, n["num_devices"][ok], n["global_batch_size"][ok])
        return engine, lambda bad: training_inputs(sc, {k: v[bad] for k, v in n.items()}), ok, reasons

    def default_objective(self, sc) -> tuple[str, bool]:
        return "tokens_per_s", True

    def shown(self, sc) -> list[str]:
        return SHOWN

    def search_constraints(self, sc, data: dict) -> tuple[str, ...]:
        """Constraints (sweep expressions over a row's columns) on the splits a search tries: none."""
        return ()

    def search_axes(self, sc, data: dict, tps, pps, eps, cps) -> tuple:
        """tp, pp, ep, cp, microbatch, recompute (a scenario's own fine-grained modules join the three
        modes), ZeRO, and the interleaving when the scenario says auto."""
        recomputes = RECOMPUTE + ((sc.parallel.recompute,) if sc.parallel.recompute not in RECOMPUTE else ())
        axes = ((("parallel", "tp"), tps), (("parallel", "pp"), pps), (("parallel", "ep"), eps),
                (("parallel", "cp"), cps), (("parallel", "microbatch_size"), MICROBATCHES),
                (("parallel", "recompute"), recomputes), (("parallel", "zero_stage"), ZERO))
        if data["parallel"].get("virtual_stages") == "auto":  # searched like the other degrees
            axes += ((("parallel", "virtual_stages"), VIRTUAL_STAGES),)
        return axes


def resolve_auto(sc):
    """The scenario with ``microbatch_size: auto`` and ``virtual_stages: auto`` replaced by what they pick
    (unchanged otherwise): a one-point search through the sweep's own group evaluation
    (``best_of_auto``): the fastest combination that fits in memory (the fastest of all when
    none fits)."""
    import dataclasses

    from llmsim.engine.errors import DesignError
    from llmsim.engine.split import inputs_of, split_arrays

    choices = auto_choices(sc)
    if not choices:
        return sc
    ones = dataclasses.replace(sc, parallel=dataclasses.replace(sc.parallel, **{k: 1 for k in choices}))
    if sc.workload.mode != "training":  # neither matters outside training
        return ones
    n = {k: np.array([v]) for k, v in inputs_of(ones).items() if v is not None}
    ok, _, split, engine, _ = best_of_auto(sc, n, {}, tuple(k for k in KNOBS if k in choices), True)
    if not ok[0]:  # no combination is a valid split: the first's reason (microbatch 1, no interleaving)
        _, _, why = split_arrays(ones, n)
        message, path = why[0]
        raise DesignError(message, path=path)
    best = engine(split)
    return dataclasses.replace(sc, parallel=dataclasses.replace(sc.parallel, **{
        k: int(best[k][0]) for k in choices}))


def best_of_auto(sc, n: dict, varied: dict, knobs: tuple[str, ...], explain: bool, constrain=None):
    """(ok, reasons, split, engine, inputs) of the rows ``n`` as ``_group`` evaluates them, each with its
    ``auto`` ``knobs`` at the fastest of its own values that fits in memory and meets a sweep's constraints
    (``constrain(columns, reasons)`` marks the repeats that fail them; the fastest of all where none does):
    every row repeated once per combination (``auto.expand``), the repeats checked and timed as one group,
    the best kept (``auto.pick``). ``engine`` returns the kept repeats' columns; a row without a valid
    repeat gets the reason of its first."""
    nx, owner = auto.expand(sc, n, knobs)
    vx = {k: v[owner] for k, v in varied.items()}
    split, ok, reasons = check_splits(sc, nx, vx, explain)
    engine, inputs, ok, reasons = Training().group(sc, nx, vx, split, ok, reasons, explain)
    rows, timed = len(n["tp"]), np.flatnonzero(ok)
    cols = engine(split.take(timed)) if len(timed) else {}
    allowed = np.asarray(cols["fits_in_memory"], dtype=bool) if len(timed) else np.zeros(0, bool)
    if constrain is not None and len(timed):
        why = np.full(len(timed), None, dtype=object)
        constrain(cols, why)
        allowed = allowed & np.array([w is None for w in why], dtype=bool)
    chosen = (auto.pick(owner[timed], allowed, cols["tokens_per_s"], rows) if len(timed)
              else np.full(rows, -1))
    good = chosen >= 0
    first = np.searchsorted(owner, np.arange(rows))  # each row's first repeat
    kept = chosen[good]

    def best(_split) -> dict:
        return {k: (np.asarray(v)[kept] if np.ndim(v) else v) for k, v in cols.items()}

    def refused(bad) -> dict:
        mask = np.zeros(len(owner), bool)
        mask[first[bad]] = True
        return inputs(mask)

    return good, reasons[first], split.take(np.where(good, timed[np.maximum(chosen, 0)] if len(timed) else first,
                                                       first)), best, refused


def training_inputs(sc, n: dict) -> dict:
    """The input columns of training rows whose split inputs are the arrays ``n`` (split.SPLIT_INPUTS;
    dp may be missing: derived)."""
    p, w = sc.parallel, sc.workload
    const = constant_column(len(n["tp"]))
    return {**system_inputs(sc, n, const), "microbatch_size": n["microbatch_size"], "virtual_stages": n["virtual_stages"],
            "sequence_parallel": const(p.sequence_parallel), "recompute": const(p.recompute),
            "zero_stage": const(p.zero_stage), "mode": const(w.mode), "precision": const(w.precision_label),
            "seq_len": const(w.seq_len), "global_batch_size": n["global_batch_size"]}


def training_record(sc, split, num_devices, global_batch_size) -> dict:
    """Input, engine and cost columns (arrays) of the feasible training splits ``split`` of ``sc``."""
    from llmsim.engine.training import training_columns

    inputs = {"num_devices": num_devices, "tp": split.tp, "pp": split.pp, "dp": split.dp, "cp": split.cp,
              "ep": split.ep, "microbatch_size": split.microbatch_size, "virtual_stages": split.virtual_stages,
              "global_batch_size": global_batch_size}
    cols = training_inputs(sc, inputs)
    cols.update(training_columns(sc, split, num_devices, global_batch_size))
    cols.update(cost_columns(sc, cols["tokens_per_s"], num_devices))
    # the same hours buy only the goodput: work redone after failures and checkpoint pauses
    cols["cost_per_million_goodput_tokens_usd"] = (cols["cost_per_million_tokens_usd"]
                                                   / np.where(cols["goodput_fraction"] > 0, cols["goodput_fraction"], np.nan))
    return cols


def surely_too_big(sc, split, ok: np.ndarray) -> np.ndarray:
    """Valid training splits whose states alone, by ``training.memory_floor_bytes``, exceed the
    accelerator's memory: they cannot fit, whatever their timing."""
    from llmsim.engine.columns import factorize
    from llmsim.engine.training import memory_floor_bytes

    rows = np.flatnonzero(ok)
    out = np.zeros(len(ok), bool)
    if len(rows):  # once per distinct split: microbatch and batch do not change the states
        sub = split.take(rows)
        code, first = factorize(sub.tp, sub.pp, sub.dp, sub.cp, sub.ep, sub.layers_per_stage, sub.expert_tp)
        out[rows] = (memory_floor_bytes(sc, sub.take(first)) > sc.accelerator.hbm_bytes)[code]
    return out
