"""Static-batch inference as one mode: a batch prefilled at once, then decoded (engine/inference.py), its
input and cost columns, and what ``llmsim search`` ranks by and tries."""

from __future__ import annotations

import numpy as np

from llmsim.study.modes.common import constant_column, cost_columns, split_inputs, system_inputs

SHOWN = ["tp", "pp", "dp", "ep", "ttft_s", "tpot_s", "throughput_tokens_per_s_per_device",
         "memory_per_device_gb", "cost_per_million_tokens_usd"]


class Inference:
    name = "inference"

    def point(self, sc) -> dict:
        from llmsim.engine.columns import first_row
        from llmsim.engine.inference import inference_point

        sp, batch, isl, osl = inference_point(sc)
        return first_row(inference_record(sc, sp, np.array([sc.num_devices]), batch, isl, osl))

    def group(self, sc, n: dict, varied: dict, split, ok, reasons, keep_all: bool):
        """(engine, input columns of refused rows, ok, reasons) of a sweep's group: ``batch_size: max``
        resolved per row (a row where not one sequence fits is refused with the reason)."""
        from llmsim.engine.inference import no_batch_message, resolve_batches

        w, rows = sc.workload, len(ok)
        isl = varied.get("input_len", np.full(rows, w.input_len))
        osl = varied.get("output_len", np.full(rows, w.output_len))
        asked = varied.get("batch_size", np.full(rows, w.batch_size, dtype=object))
        batch = asked[ok] if "batch_size" in varied else resolve_batches(sc, split.take(ok), isl[ok], osl[ok])
        if (batch < 1).any():  # batch max: not one sequence fits
            none = np.flatnonzero(ok)[batch < 1]
            reasons[none] = [no_batch_message(sc, int(t)) for t in isl[none] + osl[none]]
            batch, ok[none] = batch[batch >= 1], False
        engine = lambda sub: inference_record(sc, sub, n["num_devices"][ok], batch, isl[ok], osl[ok])
        # a refused row's batch: the one asked for, empty where that was max (a batch is a number; the
        # reason says what did not fit)
        refused_batch = lambda bad: np.where(asked[bad] == "max", None, asked[bad])
        return engine, lambda bad: inference_inputs(sc, {k: v[bad] for k, v in n.items()}, isl[bad], osl[bad],
                                                    refused_batch(bad)), ok, reasons

    def default_objective(self, sc) -> tuple[str, bool]:
        return "throughput_tokens_per_s_per_device", True

    def shown(self, sc) -> list[str]:
        return SHOWN

    def search_constraints(self, sc, data: dict) -> tuple[str, ...]:
        """Constraints (sweep expressions over a row's columns) on the splits a search tries: none."""
        return ()

    def search_axes(self, sc, data: dict, tps, pps, eps, cps) -> tuple:
        """The model split; the replicas (dp) fill the devices."""
        return ((("parallel", "tp"), tps), (("parallel", "pp"), pps), (("parallel", "ep"), eps))


def inference_inputs(sc, n: dict, input_len, output_len, batch_size) -> dict:
    """The input columns of inference rows whose split inputs are the arrays ``n`` (split.SPLIT_INPUTS;
    dp may be missing: derived) serving ``batch_size`` (ints, or ``max``) x (``input_len`` +
    ``output_len``) tokens."""
    w = sc.workload
    const = constant_column(len(n["tp"]))
    return {**system_inputs(sc, n, const), "mode": const(w.mode), "precision": const(w.precision_label), "kv_precision": const(w.kv_cache),
            "input_len": input_len, "output_len": output_len, "batch_size": batch_size}


def inference_record(sc, split, num_devices, batch, input_len, output_len) -> dict:
    """Input, engine and cost columns (arrays) of the valid inference splits ``split`` of ``sc``
    (``batch``: resolved, at least 1)."""
    from llmsim.engine.inference import inference_columns

    cols = inference_inputs(sc, split_inputs(split, num_devices), input_len, output_len, batch)
    cols.update(inference_columns(sc, split, batch, input_len, output_len, num_devices))
    cols.update(cost_columns(sc, cols["throughput_tokens_per_s"], num_devices))
    return cols
