"""One loop that holds training and inference predictions against the published runs, and the error
summaries (overall, per paper, framework and hardware; Korthikanti's recomputation pairs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from llmsim.engine.errors import DesignError
from llmsim.spec.declared import record_choices
from llmsim.validation import inference, serving_2026, training
from llmsim.validation.records import Skip, load_records, scenario_of


@dataclass(frozen=True)
class Kind:
    """How one kind of record is converted, measured and predicted."""

    name: str
    categories: tuple[str, ...]  # the record categories it takes
    convert: Callable[[dict], tuple[dict, list[str]]]  # record -> (scenario mapping, assumptions)
    measured: Callable[[dict], tuple[float, str]]  # record -> (measured value, how it was derived)
    estimate: Callable  # scenario -> output columns
    predicted: str  # the output column held against the measurement
    columns: tuple[str, str]  # row columns of the measured and the predicted value
    groups: Callable[[dict], dict]  # record -> paper, framework, hardware, source
    details: Callable[[dict, str], dict]  # (outputs, how measured) -> further row columns
    fitted: bool = True  # weighs in the fit of the calibrated constants (False: scored by validate alone)


def _estimate_training(sc) -> dict:
    from llmsim.engine.training import estimate_training
    from llmsim.study.modes.training import resolve_auto

    return estimate_training(resolve_auto(sc))


def _estimate_inference(sc) -> dict:
    from llmsim.engine.inference import estimate_inference

    return estimate_inference(sc)


def _estimate_serving(sc) -> dict:
    import numpy as np

    from llmsim.engine.columns import first_row
    from llmsim.engine.serving import serving_columns
    from llmsim.engine.split import resolve_split

    w = sc.workload
    return first_row(serving_columns(sc, resolve_split(sc).as_column(), np.array([w.concurrency]),
                                     np.array([w.input_len]), np.array([w.output_len]), np.array([sc.num_devices])))


THROUGHPUT = ("measured_tokens_per_s_per_device", "predicted_tokens_per_s_per_device")
TRAINING = Kind("training", ("training_scaling_study", "training_framework_benchmark", "training_microbenchmark"),
                training.convert, training.measured_tokens_per_s_per_device, _estimate_training,
                "tokens_per_s_per_device", THROUGHPUT, training.group_of, training.details)
INFERENCE = Kind("inference", ("inference_throughput", "inference_mlperf"), inference.scenario_dict,
                 inference.measured_per_device, _estimate_inference, "throughput_tokens_per_s_per_device",
                 THROUGHPUT, inference.groups, inference.details)
LATENCY = Kind("inference", ("inference_latency",), inference.scenario_dict, inference.measured_ttft,
               _estimate_inference, "ttft_s", ("measured_ttft_s", "predicted_ttft_s"), inference.groups,
               inference.ttft_details)
DECODE = Kind("inference", ("inference_decode_latency",), inference.scenario_dict, inference.measured_tpot,
              _estimate_inference, "tpot_s", ("measured_tpot_s", "predicted_tpot_s"), inference.groups,
              inference.ttft_details)
# closed-loop serving records (serving_runs.yaml), one per published metric
SERVING = tuple(Kind("inference", (f"serving_closed_loop_{key}",), inference.serving_dict, measured, _estimate_serving,
                     predicted, columns, inference.groups, inference.serving_details)
                for key, measured, predicted, columns in (
                    ("tput", inference.measured_per_device, "throughput_tokens_per_s_per_device", THROUGHPUT),
                    ("ttft", inference.measured_ttft, "ttft_s", ("measured_ttft_s", "predicted_ttft_s")),
                    ("tpot", inference.measured_tpot, "tpot_s", ("measured_tpot_s", "predicted_tpot_s"))))



_ROWS: dict = {}  # (id of a scenario, fitted constants) -> (the scenario, its serving row), within one pass


def forget_serving_rows() -> None:
    """Empty ``_estimate_serving_point``'s memo: each pass over the records (``calibrate.predictions``)
    starts afresh, so no row outlives a change of the engine's constants or functions between passes."""
    _ROWS.clear()


def _estimate_serving_point(sc) -> dict:
    """The row ``llmsim estimate`` prints for a serving scenario (closed loop or Poisson, start burst),
    computed once per scenario and fitted constants: the metrics of one published row share their
    scenario (``cases``), so a fit pass estimates each row once, not once per metric."""
    from llmsim.engine import calibration as cal
    from llmsim.study.modes import of

    key = (id(sc), tuple(getattr(cal, name) for name in cal.FITTED))
    hit = _ROWS.get(key)
    if hit is None or hit[0] is not sc:
        if len(_ROWS) > 4096:
            _ROWS.clear()
        hit = _ROWS[key] = (sc, of(sc).point(sc))
    return dict(hit[1])


def _estimate_serving_ttft(sc) -> dict:
    """``_estimate_serving_point``, refused where a Poisson rate exceeds llmsim's capacity (TTFT without
    bound: no steady state to hold against the measured one; the record is listed as not modelled)."""
    out = _estimate_serving_point(sc)
    if not math.isfinite(out["ttft_s"]):
        raise DesignError(f"{sc.workload.request_rate_per_s} requests/s exceed llmsim's capacity: no steady "
                          "state (time to first token without bound)")
    return out


# published 2025-2026 serving rows (serving_runs_2026.yaml), one per published metric: scored, not fitted
# (the three global constants are kernel rates and launch costs; these rows' errors come mostly from
# mechanisms they do not govern, TTFT's above all, and a fit pass over them costs 3x the rest together)
SERVING_2026 = tuple(Kind("inference", (f"serving_2026_{key}",), serving_2026.scenario_dict, serving_2026.measured(key),
                          estimate, predicted, columns, serving_2026.groups, inference.serving_details, False)
                     for key, estimate, predicted, columns in (
                         ("tput", _estimate_serving_point, "throughput_tokens_per_s_per_device", THROUGHPUT),
                         ("ttft", _estimate_serving_ttft, "ttft_s", ("measured_ttft_s", "predicted_ttft_s")),
                         ("tpot", _estimate_serving_point, "tpot_s", ("measured_tpot_s", "predicted_tpot_s"))))
KINDS = (TRAINING, INFERENCE, LATENCY, DECODE, *SERVING, *SERVING_2026)


# modelling choices a converter may fix from the record, its framework or its launch recipe rather than
# leave to llmsim's defaults (a user of llmsim gets the defaults): each declared a record_choice
CHOICES = record_choices()


def _without(data: dict, paths: tuple[str, ...]) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for path in paths:
        section, key = path.split(".")
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    return out


@dataclass(frozen=True)
class Case:
    """A converted record: its scenario (frozen values), the same with llmsim's defaults for the
    modelling choices fixed from the record (``choices``), and what was measured."""

    rec: dict
    kind: Kind
    scenario: object
    measured: float
    how: str
    notes: tuple[str, ...]
    choices: tuple[str, ...] = ()
    default_scenario: object = None

    @property
    def source(self) -> str:
        return self.kind.groups(self.rec)["source"]

    def row(self, out: dict) -> dict:
        pred = out[self.kind.predicted]
        return {"id": self.rec["id"], **self.kind.groups(self.rec), "metric": self.kind.predicted,
                "architecture": "MoE" if self.scenario.model.moe is not None else "dense",
                "record_set": self.rec.get("category", "").rsplit("_", 1)[0] if self.rec.get("category", "").startswith(
                    "serving_2026") else "-", self.kind.columns[0]: self.measured,
                self.kind.columns[1]: pred, "rel_error": pred / self.measured - 1,
                **self.kind.details(out, self.how), "assumptions": "; ".join(self.notes),
                "fixed_from_record": " ".join(c.split(".")[1] for c in self.choices)}

    def default_error(self) -> float:
        """The relative error with llmsim's defaults for the modelling choices fixed from the record."""
        if self.default_scenario is None:
            return math.nan
        try:
            pred = self.kind.estimate(self.default_scenario)[self.kind.predicted]
        except DesignError:
            return math.nan
        return pred / self.measured - 1


def cases(registry, kinds: tuple[Kind, ...] = KINDS) -> tuple[list[Case], list[dict]]:
    """(every record of ``kinds`` converted into a case, rows for the skipped ones with their reason)."""
    out, skipped, scenarios = [], [], {}
    for rec in load_records() + serving_2026.records():
        kind = next((k for k in kinds if rec["category"] in k.categories), None)
        if kind is None:
            continue
        try:
            data, notes = kind.convert(rec)
            measured, how = kind.measured(rec)
            choices = tuple(p for p in CHOICES if isinstance(data.get(p.split(".")[0]), dict)
                            and p.split(".")[1] in data[p.split(".")[0]])
            default = scenario_of(_without(data, choices), registry) if choices else None
            # one scenario object for records of the same scenario (a published row's metrics)
            key = repr(data)
            sc = scenarios[key] if key in scenarios else scenarios.setdefault(key, scenario_of(data, registry))
            out.append(Case(rec, kind, sc, measured, how, tuple(notes), choices, default))
        except (Skip, DesignError) as err:
            skipped.append({"id": rec["id"], "reason": str(err)})
    return out, skipped


def summary(rows: list[dict]) -> list[dict]:
    """Mean absolute relative error overall and per group."""
    out = [{"group": "all", "value": "all", "records": len(rows),
            "mean_abs_error": _mae(rows)}]
    for key in ("source", "paper", "framework", "hardware"):
        for value in sorted({r.get(key, "-") for r in rows} - {"-"}):
            sel = [r for r in rows if r.get(key) == value]
            out.append({"group": key, "value": value, "records": len(sel), "mean_abs_error": _mae(sel)})
    return out


def _mae(rows: list[dict]) -> float:
    return sum(abs(r["rel_error"]) for r in rows) / len(rows) if rows else math.nan


def recompute_pairs(rows: list[dict]) -> list[dict]:
    """Korthikanti Table 5: selective-vs-full throughput speed-up, predicted vs measured."""
    by_id = {r["id"]: r for r in rows}
    out = []
    for rid, r in by_id.items():
        if not (rid.startswith("korthikanti") and rid.endswith("_selective_sp")):
            continue
        full = by_id.get(re.sub("_selective_sp$", "_full_recompute", rid))
        if full is None:
            continue
        meas = r["measured_tokens_per_s_per_device"] / full["measured_tokens_per_s_per_device"] - 1
        pred = r["predicted_tokens_per_s_per_device"] / full["predicted_tokens_per_s_per_device"] - 1
        out.append({"pair": rid.replace("_selective_sp", ""), "measured_speedup": meas,
                    "predicted_speedup": pred, "difference_points": 100 * (pred - meas)})
    return out
