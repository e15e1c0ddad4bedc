"""Continuous-batching serving as one mode (engine/serving.py): closed loop at a concurrency, open loop at
a request rate, disaggregated prefill and decode pools, the capacity under an SLO; its input and cost
columns, and what ``llmsim search`` ranks by and tries."""

from __future__ import annotations

import numpy as np

from llmsim.study.modes.common import constant_column, cost_columns, split_inputs, with_slo_cost
from llmsim.study.modes.inference import SHOWN as SHOWN_INFERENCE
from llmsim.study.modes.inference import inference_inputs

SHOWN_POOLS = ["prefill_devices", "prefill_tp", "decode_devices", "decode_tp"]
SHOWN_SLO = ["slo_throughput_tokens_per_s_per_device", "slo_cost_per_million_tokens_usd"]


class Serving:
    name = "serving"

    def point(self, sc) -> dict:
        from llmsim.engine.columns import first_row
        from llmsim.engine.split import resolve_split

        w = sc.workload
        if sc.serving.disaggregation is not None:
            return with_slo_cost(_disaggregated_record(sc))
        sp = resolve_split(sc).as_column()
        if w.request_rate_per_s is not None:
            return with_slo_cost(_open_loop_record(sc, sp))
        row = first_row(serving_record(sc, sp, np.array([sc.num_devices]), np.array([w.concurrency]),
                                       np.array([w.input_len]), np.array([w.output_len])))
        if sc.serving.has_slo:
            from llmsim.engine.serving import slo_capacity

            row.update(slo_capacity(sc, sp, w.input_len, w.output_len, sc.num_devices))
        return with_slo_cost(row)

    def group(self, sc, n: dict, varied: dict, split, ok, reasons, keep_all: bool):
        w, rows = sc.workload, len(ok)
        isl = varied.get("input_len", np.full(rows, w.input_len))
        osl = varied.get("output_len", np.full(rows, w.output_len))
        conc = varied.get("concurrency", np.full(rows, w.concurrency))
        if w.num_prompts is not None:  # as the scenario check refuses one point (spec/scenario.py)
            few = ok & (conc > w.num_prompts)
            reasons[few] = f"workload.num_prompts {w.num_prompts:,} is fewer than the concurrency"
            ok = ok & ~few
        engine = lambda sub: serving_record(sc, sub, n["num_devices"][ok], conc[ok], isl[ok], osl[ok])
        return engine, lambda bad: serving_inputs(sc, {k: v[bad] for k, v in n.items()}, isl[bad], osl[bad],
                                                  conc[bad]), ok, reasons

    def default_objective(self, sc) -> tuple[str, bool]:
        """With an SLO the cost per million tokens at the highest load meeting it (goodput per dollar),
        without one the throughput per device."""
        if sc.serving.has_slo:
            return "slo_cost_per_million_tokens_usd", False
        return "throughput_tokens_per_s_per_device", True

    def shown(self, sc) -> list[str]:
        slo = SHOWN_SLO if sc.serving.has_slo else []
        if sc.serving.disaggregation is not None:
            adp = ["decode_attention_dp"] if sc.model.moe is not None and sc.serving.speculative is None else []
            return SHOWN_POOLS + adp + SHOWN_INFERENCE[4:] + slo
        adp = ["attention_dp"] if sc.model.moe is not None and sc.serving.speculative is None else []
        return SHOWN_INFERENCE[:4] + adp + SHOWN_INFERENCE[4:] + slo

    def search_constraints(self, sc, data: dict) -> tuple[str, ...]:
        """Attention data-parallel only where it changes something: on more than one tp rank."""
        if sc.serving.disaggregation is not None:
            return (("decode_tp > 1 or not decode_attention_dp",)
                    if self._searches_attention_dp(sc, data, "serving.disaggregation.decode") else ())
        return ("tp > 1 or not attention_dp",) if self._searches_attention_dp(sc, data, "parallel") else ()

    def _searches_attention_dp(self, sc, data: dict, where: str) -> bool:
        """Whether a search tries attention data-parallel (``where``: the section holding it): a MoE model
        without speculative decoding, the scenario not setting it."""
        section = data
        for key in where.split("."):
            section = section.get(key) if isinstance(section, dict) else None
        return (sc.model.moe is not None and sc.serving.speculative is None
                and (section or {}).get("attention_dp") is None)

    def search_axes(self, sc, data: dict, tps, pps, eps, cps) -> tuple:
        """Co-located: the model split, the replicas (dp) filling the devices, and for a MoE model without
        speculative decoding attention data-parallel or not (unless the scenario sets it); disaggregated: each pool's tp (pp 1), the pool
        sizes chosen per pair (prefill_devices auto unless set)."""
        if sc.serving.disaggregation is not None:
            pools = ((("serving", "disaggregation", "prefill", "tp"), tps),
                     (("serving", "disaggregation", "decode", "tp"), tps))
            if self._searches_attention_dp(sc, data, "serving.disaggregation.decode"):
                pools += ((("serving", "disaggregation", "decode", "attention_dp"), (False, True)),)
            return pools
        axes = ((("parallel", "tp"), tps), (("parallel", "pp"), pps), (("parallel", "ep"), eps))
        if self._searches_attention_dp(sc, data, "parallel"):  # a value the scenario sets stays
            axes += ((("parallel", "attention_dp"), (False, True)),)
        return axes


def _open_loop_record(sc, sp) -> dict:
    """One serving point at a Poisson request rate (engine.serving.open_loop), with its input and cost
    columns."""
    from llmsim.engine.columns import first_row
    from llmsim.engine.serving import open_loop

    w = sc.workload
    out = open_loop(sc, sp, w.request_rate_per_s, w.input_len, w.output_len, sc.num_devices)
    inputs = first_row(serving_inputs(sc, split_inputs(sp, np.array([sc.num_devices])), np.array([w.input_len]),
                                      np.array([w.output_len]), np.array([out["concurrency"]])))
    row = {**inputs, "request_rate_per_s": w.request_rate_per_s, **out}
    row.update(cost_columns(sc, float(out["throughput_tokens_per_s"])))
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
             "dp": np.array([out["decode_replicas"]]), "cp": np.array([1]), "ep": np.array([d.decode_ep])}
    row = {**first_row(serving_inputs(sc, split, np.array([w.input_len]), np.array([w.output_len]),
                                      np.array([out["concurrency"]]))), **out}
    row.update(cost_columns(sc, float(out["throughput_tokens_per_s"])))
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


def serving_inputs(sc, n: dict, input_len, output_len, concurrency) -> dict:
    """The input columns of serving rows (as ``inference_inputs``, with the concurrency)."""
    from llmsim.engine.speculative import draft_layers

    cols = inference_inputs(sc, n, input_len, output_len, concurrency)
    cols["concurrency"] = cols.pop("batch_size")
    const, w = constant_column(len(n["tp"])), sc.workload
    spec = sc.serving.speculative  # none: 0 drafted tokens, no acceptance rate
    cols.update(attention_dp=const(sc.parallel.attention_dp), engine=const(sc.serving.engine),
                scheduler=const(sc.serving.scheduler), input_len_cv=const(w.input_len_cv),
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

    cols = serving_inputs(sc, split_inputs(split, num_devices), input_len, output_len, concurrency)
    cols.update(serving_columns(sc, split, concurrency, input_len, output_len, num_devices))
    cols.update(cost_columns(sc, cols["throughput_tokens_per_s"], num_devices))
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
            rows.append({**first_row(serving_inputs(row_sc, split_inputs(one, np.array([row_sc.num_devices])),
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
