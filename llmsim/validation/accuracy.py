"""What ``llmsim validate`` reports: every converted record's prediction with the shipped constants
(in-sample: the constants were fitted on these records), with llmsim's defaults for the modelling
choices fixed from the record, and, with cross-validation, by a fit that never saw its source: the
error a user should expect on a run llmsim has not seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsim.engine.errors import DesignError
from llmsim.validation.runs import Case, cases, forget_serving_rows


@dataclass(frozen=True)
class Assessment:
    training: list[dict]
    inference: list[dict]  # serving throughput and first-token latency
    skipped: list[dict]
    cross_validated: bool


def _mae(values: list[float]) -> float:
    vals = [abs(v) for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def assess(registry, cross_validate: bool = False, jobs: int = -1) -> Assessment:
    """Rows of every converted record (``runs.Case.row`` plus ``rel_error_defaults`` and, with
    ``cross_validate``, ``cv_predicted`` and ``cv_rel_error``)."""
    items, skipped = cases(registry)
    forget_serving_rows()
    kept: list[Case] = []
    rows = []
    for c in items:
        try:
            out = c.kind.estimate(c.scenario)
        except DesignError as err:
            skipped.append({"id": c.rec["id"], "reason": str(err)})
            continue
        kept.append(c)
        rows.append({**c.row(out), "rel_error_defaults": c.default_error()})
    if cross_validate:
        from llmsim.validation.calibrate import cross_validate as loso

        pred, _ = loso(kept, jobs=jobs)
        for r, c, p in zip(rows, kept, pred.tolist(), strict=True):
            r["cv_predicted"] = p
            r["cv_rel_error"] = p / c.measured - 1 if math.isfinite(p) else math.nan
    train = [r for r, c in zip(rows, kept, strict=True) if c.kind.name == "training"]
    infer = [r for r, c in zip(rows, kept, strict=True) if c.kind.name == "inference"]
    return Assessment(train, infer, skipped, cross_validate)


METRIC_LABELS = {"tpot_s": "TPOT", "ttft_s": "TTFT", "throughput_tokens_per_s_per_device": "output tok/s/GPU"}


def accuracy_table(a: Assessment) -> list[dict]:
    """Mean absolute error per mode, the fitted and the 2025-2026 serving records apart (the latter by
    metric, MoE and dense apart), then per source and per hardware: in-sample, with defaults and
    cross-validated."""
    out = []
    # the inference records the constants are fitted on, and the 2025-2026 serving ones (scored, never
    # fitted: serving_runs_2026.yaml), the latter also by metric, MoE and dense apart
    recent = [r for r in a.inference if r.get("record_set") == "serving_2026"]
    groups = [("training", "all", "all", a.training), ("inference", "all", "all", a.inference),
              ("inference", "set", "fitted records", [r for r in a.inference if r.get("record_set") != "serving_2026"]),
              ("inference", "set", "serving 2025-2026", recent)]
    for metric, label in METRIC_LABELS.items():
        for arch in ("MoE", "dense"):
            sel = [r for r in recent if r["metric"] == metric and r["architecture"] == arch]
            if sel:
                groups.append(("inference", "serving 2025-2026", f"{label} {arch}", sel))
    for by in ("source", "hardware"):
        for mode, rows in (("training", a.training), ("inference", a.inference)):
            for value in sorted({r[by] for r in rows}):
                groups.append((mode, by, value, [r for r in rows if r[by] == value]))
    for mode, by, value, rows in groups:
        row = {"mode": mode, "by": by, "value": value, "records": len(rows),
               "in_sample_mae": _mae([r["rel_error"] for r in rows]),
               "defaults_mae": _mae([r["rel_error_defaults"] if not math.isnan(r["rel_error_defaults"])
                                     else r["rel_error"] for r in rows])}
        if a.cross_validated:
            row["cross_validated_mae"] = _mae([r["cv_rel_error"] for r in rows])
        out.append(row)
    return out
