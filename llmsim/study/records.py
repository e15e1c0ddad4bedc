"""Glue between the CLI and the engine for one design point: flags -> scenario -> record."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from llmsim.spec.presets import PresetRegistry
from llmsim.study.auto import auto_choices, interleavings, microbatch_sizes  # noqa: F401

DEFAULT_SCENARIO = Path(__file__).parent.parent / "scenarios" / "default.yaml"

# CLI flag -> dotted path in the scenario
FLAG_PATHS = {
    "model": "model", "accelerator": "system.accelerator", "devices": "system.num_devices",
    "network": "system.network", "tp": "parallel.tp", "pp": "parallel.pp", "dp": "parallel.dp",
    "cp": "parallel.cp", "ep": "parallel.ep", "microbatch_size": "parallel.microbatch_size",
    "global_batch_size": "workload.global_batch_size", "seq_len": "workload.seq_len",
    "recompute": "parallel.recompute", "zero_stage": "parallel.zero_stage",
    "precision": "workload.precision", "mode": "workload.mode", "batch_size": "workload.batch_size",
    "input_len": "workload.input_len", "output_len": "workload.output_len",
    "kv_precision": "workload.kv_precision", "concurrency": "workload.concurrency",
    "request_rate": "workload.request_rate_per_s",
}

def overrides_from_flags(flags: dict, sets: list[str]) -> list:
    """Overrides (``spec.load.Override``) of the flags given, each labelled with its flag for errors, then
    the ``--set`` ones."""
    out = [(f"--{k.replace('_', '-')} {v}", f"{FLAG_PATHS[k]}={_flag_text(v)}") for k, v in flags.items()
           if v is not None]
    return out + list(sets)


def _flag_text(value) -> str:
    """A flag's value as the YAML an override holds: text that YAML would read as something else than
    itself (``full # x`` -> ``full``, ``{a: 1}``, ``yes`` -> true, ``0x10`` -> 16) is quoted, so the spec
    sees what the user typed (less surrounding blanks); plain numbers, ``auto`` and an empty or ``null``
    value (the field's default) pass as they are."""
    import json
    import re

    import yaml

    if not isinstance(value, str):
        return str(value)
    text = value.strip()
    try:
        read = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - any text YAML cannot read (bad dates, tags, deep nesting) is text
        return json.dumps(text)
    plain_number = type(read) in (int, float) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text)
    return text if read is None or plain_number or read == text else json.dumps(text)


def load(path: str | Path | None, registry: PresetRegistry, overrides: list[str]):
    from llmsim.spec.convert import scenario_values
    from llmsim.spec.load import load_scenario

    spec = load_scenario(path, registry, overrides, default=DEFAULT_SCENARIO)
    return scenario_values(spec)


def record(sc) -> dict:
    """Inputs and every output column of one design point, flat, in the declared order (``llmsim.schema``)."""
    from llmsim import schema

    return schema.order(_record(sc))


def _record(sc) -> dict:
    from llmsim.engine.columns import first_row

    w = sc.workload
    if w.mode == "serving":
        from llmsim.engine.split import resolve_split

        if sc.serving.disaggregation is not None:
            return with_slo_cost(_disaggregated_record(sc))
        sp = resolve_split(sc).as_column()
        if w.request_rate_per_s is not None:
            return with_slo_cost(_open_loop_record(sc, sp))
        cols = serving_record(sc, sp, np.array([sc.num_devices]), np.array([w.concurrency]),
                              np.array([w.input_len]), np.array([w.output_len]))
        row = first_row(cols)
        if sc.serving.has_slo:
            from llmsim.engine.serving import slo_capacity

            row.update(slo_capacity(sc, sp, w.input_len, w.output_len, sc.num_devices))
        return with_slo_cost(row)
    if w.mode == "inference":
        from llmsim.engine.inference import inference_point

        sp, batch, isl, osl = inference_point(sc)
        cols = inference_record(sc, sp, np.array([sc.num_devices]), batch, isl, osl)
        return first_row(cols)
    from llmsim.engine.split import resolve_split

    sc = resolve_auto(sc)
    sp = resolve_split(sc)
    cols = training_record(sc, sp.as_column(), np.array([sc.num_devices]), np.array([w.global_batch_size]))
    return first_row(cols)


def _open_loop_record(sc, sp) -> dict:
    """One serving point at a Poisson request rate (engine.serving.open_loop), with its input and cost
    columns."""
    from llmsim.engine.columns import first_row
    from llmsim.engine.serving import open_loop

    w = sc.workload
    out = open_loop(sc, sp, w.request_rate_per_s, w.input_len, w.output_len, sc.num_devices)
    inputs = first_row(serving_inputs(sc, _split_inputs(sp, np.array([sc.num_devices])), np.array([w.input_len]),
                                      np.array([w.output_len]), np.array([out["concurrency"]])))
    row = {**inputs, "request_rate_per_s": w.request_rate_per_s, **out}
    row.update(_cost_columns(sc, float(out["throughput_tokens_per_s"])))
    return row


def _disaggregated_record(sc) -> dict:
    """One serving point of separate prefill and decode pools (engine.disaggregation), with its input and
    cost columns; with an SLO, the SLO goodput of the scenario's own split co-located on the same devices
    beside it (``colocated_slo_throughput_tokens_per_s_per_device``)."""
    import dataclasses

    from llmsim.engine.columns import first_row
    from llmsim.engine.disaggregation import disaggregated_point
    from llmsim.engine.split import resolve_split

    w = sc.workload
    out = disaggregated_point(sc)
    d = sc.serving.disaggregation
    split = {"num_devices": np.array([sc.num_devices]), "tp": np.array([d.decode_tp]), "pp": np.array([d.decode_pp]),
             "dp": np.array([out["decode_replicas"]]), "cp": np.array([1]), "ep": np.array([1])}
    row = {**first_row(serving_inputs(sc, split, np.array([w.input_len]), np.array([w.output_len]),
                                      np.array([out["concurrency"]]))), **out}
    row.update(_cost_columns(sc, float(out["throughput_tokens_per_s"])))
    if "slo_throughput_tokens_per_s_per_device" in out:
        colocated = dataclasses.replace(sc, serving=dataclasses.replace(sc.serving, disaggregation=None))
        sp = resolve_split(colocated).as_column()
        if w.request_rate_per_s is not None:
            from llmsim.engine.serving import open_loop

            slo = open_loop(colocated, sp, w.request_rate_per_s, w.input_len, w.output_len, sc.num_devices)
        else:
            from llmsim.engine.serving import slo_capacity

            slo = slo_capacity(colocated, sp, w.input_len, w.output_len, sc.num_devices)
        row["colocated_slo_throughput_tokens_per_s_per_device"] = slo["slo_throughput_tokens_per_s_per_device"]
    return row


def resolve_auto(sc):
    """The scenario with ``microbatch_size: auto`` and ``virtual_stages: auto`` replaced by what they pick
    (unchanged otherwise): every combination evaluated as one column, the fastest that fits in memory kept
    (the fastest of all when none fits)."""
    import dataclasses

    choices = auto_choices(sc)
    if not choices:
        return sc
    if sc.workload.mode != "training":  # neither matters outside training
        return dataclasses.replace(sc, parallel=dataclasses.replace(sc.parallel, **{k: 1 for k in choices}))
    best = _fastest_auto(sc, choices)
    return dataclasses.replace(sc, parallel=dataclasses.replace(sc.parallel, **{
        k: int(best[k][0]) for k in choices}))


def _fastest_auto(sc, choices: dict[str, list[int]]) -> dict:
    import dataclasses
    import itertools

    from llmsim.engine.errors import DesignError
    from llmsim.engine.split import inputs_of, split_arrays

    combos = np.array(list(itertools.product(*choices.values())))
    a = {k: np.full(len(combos), v) for k, v in inputs_of(dataclasses.replace(
        sc, parallel=dataclasses.replace(sc.parallel, **{k: 1 for k in choices}))).items() if v is not None}
    for j, k in enumerate(choices):
        a[k] = combos[:, j]
    split, ok, reasons = split_arrays(sc, a)
    if not ok.any():
        message, path = next(r for r in reasons if r is not None)
        raise DesignError(message, path=path)
    keep = np.flatnonzero(ok)
    sub = type(split)(**{f: np.asarray(getattr(split, f))[keep] for f in split.__dataclass_fields__})
    cols = training_record(sc, sub, a["num_devices"][keep], a["global_batch_size"][keep])
    fits = np.asarray(cols["fits_in_memory"], dtype=bool)
    score = np.where(fits | ~fits.any(), np.asarray(cols["tokens_per_s"], dtype=float), -np.inf)
    best = int(np.argmax(score))
    return {k: np.asarray(v)[best:best + 1] for k, v in cols.items()}


def _const(rows: int):
    """A column of ``rows`` copies of one input value: text as a one-category categorical (no string per
    row to allocate, check, pickle and format), numbers and flags as numpy arrays, None as objects."""

    def column(v):
        if isinstance(v, str) and rows > 1:  # one point (estimate) stays off pandas: its import is 0.4 s
            import pandas as pd

            return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), dtype=_category(v), validate=False)
        return np.full(rows, v, dtype=object if v is None else None)
    return column


@functools.lru_cache(maxsize=256)
def _category(value: str):
    """The one-category dtype of a text input column (built once: a sweep asks for it per group)."""
    import pandas as pd

    return pd.CategoricalDtype([value])


def _system_inputs(sc, n: dict, const) -> dict:
    """Model, hardware and split input columns shared by training and inference rows."""
    return {"model": const(sc.names["model"]), "accelerator": const(sc.names["accelerator"]),
            "network": const(sc.names["network"]), "num_devices": n["num_devices"], "tp": n["tp"],
            "pp": n["pp"], "dp": n["dp"] if n.get("dp") is not None else const(None), "cp": n["cp"], "ep": n["ep"]}


def inference_inputs(sc, n: dict, input_len, output_len, batch_size) -> dict:
    """The input columns of inference rows whose split inputs are the arrays ``n`` (split.SPLIT_INPUTS;
    dp may be missing: derived) serving ``batch_size`` (ints, or ``max``) x (``input_len`` +
    ``output_len``) tokens."""
    w = sc.workload
    const = _const(len(n["tp"]))
    return {**_system_inputs(sc, n, const), "mode": const(w.mode), "precision": const(w.precision), "kv_precision": const(w.kv_precision or w.precision),
            "input_len": input_len, "output_len": output_len, "batch_size": batch_size}


def _split_inputs(split, num_devices) -> dict:
    """The split's input columns of a record."""
    return {"num_devices": num_devices, "tp": split.tp, "pp": split.pp, "dp": split.dp, "cp": split.cp,
            "ep": split.ep}


def inference_record(sc, split, num_devices, batch, input_len, output_len) -> dict:
    """Input, engine and cost columns (arrays) of the valid inference splits ``split`` of ``sc``
    (``batch``: resolved, at least 1)."""
    from llmsim.engine.inference import inference_columns

    cols = inference_inputs(sc, _split_inputs(split, num_devices), input_len, output_len, batch)
    cols.update(inference_columns(sc, split, batch, input_len, output_len, num_devices))
    cols.update(_cost_columns(sc, cols["throughput_tokens_per_s"], num_devices))
    return cols


def serving_inputs(sc, n: dict, input_len, output_len, concurrency) -> dict:
    """The input columns of serving rows (as ``inference_inputs``, with the concurrency)."""
    from llmsim.engine.speculative import draft_layers

    cols = inference_inputs(sc, n, input_len, output_len, concurrency)
    cols["concurrency"] = cols.pop("batch_size")
    const, w = _const(len(n["tp"])), sc.workload
    spec = sc.serving.speculative  # none: 0 drafted tokens, no acceptance rate
    cols.update(engine=const(sc.serving.engine), scheduler=const(sc.serving.scheduler), input_len_cv=const(w.input_len_cv),
                output_len_cv=const(w.output_len_cv),
                speculative_draft_tokens=const(spec.draft_tokens if spec else 0),
                speculative_draft_layers=const(draft_layers(sc)),
                speculative_draft_model=const(spec.draft_model.name if spec and spec.draft_model else None),
                speculative_acceptance_rate=const(spec.acceptance_rate if spec else np.nan))
    return cols


def serving_record(sc, split, num_devices, concurrency, input_len, output_len) -> dict:
    """Input, engine and cost columns (arrays) of the valid serving splits ``split`` of ``sc``."""
    from llmsim.engine.errors import DesignError
    from llmsim.engine.serving import serving_columns

    if sc.workload.request_rate_per_s is not None:  # estimate takes it (_open_loop_record), sweeps not yet
        raise DesignError("sweeps and search take workload.concurrency; a request rate is evaluated by "
                          "llmsim estimate", path="workload.request_rate_per_s")
    if sc.serving.disaggregation is not None:
        return _disaggregated_rows(sc, split, num_devices, concurrency, input_len, output_len)

    cols = serving_inputs(sc, _split_inputs(split, num_devices), input_len, output_len, concurrency)
    cols.update(serving_columns(sc, split, concurrency, input_len, output_len, num_devices))
    cols.update(_cost_columns(sc, cols["throughput_tokens_per_s"], num_devices))
    if sc.serving.has_slo:
        cols.update(_slo_columns(sc, split, num_devices, input_len, output_len))
    return with_slo_cost(cols)


def _disaggregated_rows(sc, split, num_devices, concurrency, input_len, output_len) -> dict:
    """Disaggregated pools in a sweep, one row at a time (engine.disaggregation evaluates one deployment:
    its pool splits, rate curves and KV transfer): each row's devices, co-located split (the comparison
    column), concurrency and lengths. A row the pools cannot take (e.g. ``prefill_devices`` leaves no whole
    decode replica of that many devices) gets its reason in ``infeasible_reason``."""
    import dataclasses

    from llmsim.engine.columns import first_row
    from llmsim.engine.errors import DesignError

    n = len(np.atleast_1d(split.tp))
    at = lambda v, i: np.broadcast_to(v, (n,))[i].item()
    rows = []
    for i in range(n):
        one = split.take([i])
        par = dataclasses.replace(sc.parallel, **{k: int(np.asarray(getattr(one, k))[0])
                                                  for k in ("tp", "pp", "dp", "cp", "ep")})
        w = dataclasses.replace(sc.workload, concurrency=at(concurrency, i), input_len=at(input_len, i),
                                output_len=at(output_len, i))
        row_sc = dataclasses.replace(sc, num_devices=int(at(num_devices, i)), parallel=par, workload=w)
        try:
            rows.append(with_slo_cost(_disaggregated_record(row_sc)))
        except DesignError as err:
            rows.append({**first_row(serving_inputs(row_sc, _split_inputs(one, np.array([row_sc.num_devices])),
                                                    np.array([w.input_len]), np.array([w.output_len]),
                                                    np.array([w.concurrency]))),
                         "fits_in_memory": False, "infeasible_reason": str(err)})
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {k: _column([r.get(k) for r in rows]) for k in keys}


def _column(values: list) -> np.ndarray:
    """One column of row dicts' values (None where a row lacks it): floats with NaN for missing numbers,
    else objects."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
                       for v in present):
        if len(present) == len(values):
            return np.array(values)
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.array(values, dtype=object) if len(present) < len(values) else np.array(values)


def _slo_columns(sc, split, num_devices, input_len, output_len) -> dict:
    """The SLO capacity (engine.serving.slo_capacity) of each row: a concurrency search per split, so a
    sweep with an SLO costs more per point than one without."""
    from llmsim.engine.serving import slo_capacity

    n = len(np.atleast_1d(split.tp))
    at = lambda v, i: np.broadcast_to(v, (n,))[i].item()
    rows = [slo_capacity(sc, split.take([i]), at(input_len, i), at(output_len, i), int(at(num_devices, i)))
            for i in range(n)]
    return {k: np.array([r[k] for r in rows]) for k in rows[0]} if rows else {}


def with_slo_cost(cols: dict) -> dict:
    """``cols`` (a row or arrays) with, when an SLO was given, ``slo_cost_per_million_tokens_usd``: the
    system's cost per hour over the output tokens it serves at the highest load that meets the SLO (NaN
    when no load meets it)."""
    if "slo_throughput_tokens_per_s_per_device" in cols:
        rate = np.asarray(cols["slo_throughput_tokens_per_s_per_device"], dtype=float) * cols["num_devices"]
        cost = np.asarray(cols["cost_per_hour_usd"]) / (np.where(rate > 0, rate, np.nan) * 3600) * 1e6
        cols["slo_cost_per_million_tokens_usd"] = cost if np.ndim(cost) else float(cost)
    return cols


def training_inputs(sc, n: dict) -> dict:
    """The input columns of training rows whose split inputs are the arrays ``n`` (split.SPLIT_INPUTS;
    dp may be missing: derived)."""
    p, w = sc.parallel, sc.workload
    const = _const(len(n["tp"]))
    return {**_system_inputs(sc, n, const), "microbatch_size": n["microbatch_size"], "virtual_stages": n["virtual_stages"],
            "sequence_parallel": const(p.sequence_parallel), "recompute": const(p.recompute),
            "zero_stage": const(p.zero_stage), "mode": const(w.mode), "precision": const(w.precision),
            "seq_len": const(w.seq_len), "global_batch_size": n["global_batch_size"]}


def training_record(sc, split, num_devices, global_batch_size) -> dict:
    """Input, engine and cost columns (arrays) of the feasible training splits ``split`` of ``sc``."""
    from llmsim.engine.training import training_columns

    inputs = {"num_devices": num_devices, "tp": split.tp, "pp": split.pp, "dp": split.dp, "cp": split.cp,
              "ep": split.ep, "microbatch_size": split.microbatch_size, "virtual_stages": split.virtual_stages,
              "global_batch_size": global_batch_size}
    cols = training_inputs(sc, inputs)
    cols.update(training_columns(sc, split, num_devices, global_batch_size))
    cols.update(_cost_columns(sc, cols["tokens_per_s"], num_devices))
    # the same hours buy only the goodput: work redone after failures and checkpoint pauses
    cols["cost_per_million_goodput_tokens_usd"] = (cols["cost_per_million_tokens_usd"]
                                                   / np.where(cols["goodput_fraction"] > 0, cols["goodput_fraction"], np.nan))
    return cols


def _cost_columns(sc, tokens_per_s, num_devices=None) -> dict:
    """Device manufacturing cost and the system's capex, power, $/hour and $ per million tokens
    (numbers, or arrays when ``num_devices`` is an array)."""
    from llmsim.engine.cost.system import system_cost, system_cost_columns

    acc = sc.accelerator
    price = acc.list_price_usd if acc.list_price_usd is not None else acc.device_cost_usd
    price = price if price is not None else float("nan")
    tdp = acc.tdp_w if acc.tdp_w is not None else float("nan")
    if num_devices is None:
        return {"device_cost_usd": acc.device_cost_usd,
                **system_cost(sc.num_devices, price, tdp, sc.network, sc.cost, tokens_per_s)}
    device_cost = np.full(len(num_devices), acc.device_cost_usd if acc.device_cost_usd is not None else np.nan)
    return {"device_cost_usd": device_cost,
            **system_cost_columns(num_devices, price, tdp, sc.network, sc.cost, tokens_per_s)}


def operator_rows(sc) -> list[dict]:
    """The per-operator table of ``llmsim estimate --ops``."""
    from llmsim.engine.op_table import operator_table

    return operator_table(resolve_auto(sc))
