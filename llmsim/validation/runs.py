"""One loop that holds training and inference predictions against the published runs, and the error
summaries (overall, per paper, framework and hardware; Korthikanti's recomputation pairs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from llmsim.engine.errors import DesignError
from llmsim.validation import inference, training
from llmsim.validation.records import Skip, load_records, scenario_of


@dataclass(frozen=True)
class Kind:
    """How one kind of record (the prefix of its category) is converted, measured and predicted."""

    category: str
    convert: Callable[[dict], tuple[dict, list[str]]]  # record -> (scenario mapping, assumptions)
    measured: Callable[[dict], tuple[float, str]]  # record -> (tokens/s per device, how it was derived)
    estimate: Callable  # scenario -> output columns
    predicted: str  # the output column held against the measurement
    groups: Callable[[dict], dict]  # record -> paper, framework, hardware
    details: Callable[[dict, str], dict]  # (outputs, how measured) -> further row columns


def _estimate_training(sc) -> dict:
    from llmsim.engine.training import estimate_training

    return estimate_training(sc)


def _estimate_inference(sc) -> dict:
    from llmsim.engine.inference import estimate_inference

    return estimate_inference(sc)


TRAINING = Kind("training", training.convert, training.measured_tokens_per_s_per_device, _estimate_training,
                "tokens_per_s_per_device", training.group_of, training.details)
INFERENCE = Kind("inference", inference.scenario_dict, inference.measured_per_device, _estimate_inference,
                 "throughput_tokens_per_s_per_device", inference.groups, inference.details)


def run(registry, kind: Kind = TRAINING) -> tuple[list[dict], list[dict]]:
    """(rows for the modelled records of ``kind``, rows for skipped ones with their reason)."""
    rows, skipped = [], []
    for rec in load_records():
        if not rec["category"].startswith(kind.category):
            continue
        try:
            data, notes = kind.convert(rec)
            measured, how = kind.measured(rec)
            out = kind.estimate(scenario_of(data, registry))
        except (Skip, DesignError) as err:
            skipped.append({"id": rec["id"], "reason": str(err)})
            continue
        pred = out[kind.predicted]
        rows.append({"id": rec["id"], **kind.groups(rec), "measured_tokens_per_s_per_device": measured,
                     "predicted_tokens_per_s_per_device": pred, "rel_error": pred / measured - 1,
                     **kind.details(out, how), "assumptions": "; ".join(notes)})
    return rows, skipped


def summary(rows: list[dict]) -> list[dict]:
    """Mean absolute relative error overall and per group."""
    out = [{"group": "all", "value": "all", "records": len(rows),
            "mean_abs_error": _mae(rows)}]
    for key in ("paper", "framework", "hardware"):
        for value in sorted({r[key] for r in rows} - {"-"}):
            sel = [r for r in rows if r[key] == value]
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
