"""Published 2025-2026 serving measurements (llmsim/data/serving_runs_2026.yaml, collected 2026-11-28; in the
calibration set since issue 36, converted by llmsim/validation/serving_2026.py) held against `llmsim estimate
--mode serving` record by record, MoE and dense apart, with the p50/p99 spread (`llmsim validate` scores the
same records metric by metric).

    python benchmarks/serving_2026.py           # table and mean errors on stdout
    python benchmarks/serving_2026.py --csv     # one row per record

A record is used when it is a closed loop at a stated concurrency (a benchmark client keeping N requests
in flight) or an open loop at a stated Poisson rate (MLPerf Inference Server), on a model and accelerator
with a preset. Offline and burst rows (every prompt sent at once) wait for a model of the start burst.
Rows served with attention data parallelism (SGLang --enable-dp-attention, TensorRT-LLM attention DP) run
with ``parallel.attention_dp`` and are flagged ``dp-attn``. Lengths drawn from a data set (ShareGPT, MLPerf's)
run at their published means, fixed. Output throughput is the record's output tokens/s, or the total
tokens/s times O / (I + O) where only the total is published (ATOM's tables).
"""

from __future__ import annotations

import math

import yaml
from error_table import print_table

from llmsim.engine.errors import DesignError
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est
from llmsim.validation import serving_2026 as s26
from llmsim.validation.records import Skip, scenario_of

MOE = ("deepseek", "gpt-oss", "qwen3-235b", "qwen3-30b", "mixtral")


def rows() -> list[dict]:
    registry = PresetRegistry()
    out = []
    for rec in yaml.safe_load(s26.DATA.read_text(encoding="utf-8")):
        try:
            data, _ = s26.scenario_dict(rec)
        except Skip:
            continue
        flags = ["dp-attn"] if data["parallel"].get("attention_dp") else []
        row = {"id": rec["id"], "engine": rec["parallel"].get("engine"),
               "moe": any(k in data["model"] for k in MOE), "flags": " ".join(flags)}
        try:
            got = est.record(scenario_of(data, registry))
        except (DesignError, SpecError) as err:
            out.append({**row, "error": str(err).splitlines()[0][:90]})
            continue
        m26 = s26.measured_values(rec)  # output tokens/s of the deployment, not per GPU
        measured = {"tpot": m26["tpot"], "ttft": m26["ttft"],
                    "throughput": m26["tput"] and m26["tput"] * rec["hardware"]["count"]}
        for key, predicted in (("tpot", got.get("tpot_s")), ("ttft", got.get("ttft_s")),
                               ("throughput", got.get("throughput_tokens_per_s"))):
            row[f"{key}_measured"], row[f"{key}_predicted"] = measured[key], predicted
            finite = predicted is not None and math.isfinite(predicted)
            row[f"{key}_error"] = predicted / measured[key] - 1 if measured[key] and predicted and finite else None
            if measured[key] and not finite:  # an open loop past the predicted capacity: no steady state
                row["flags"] = f"{row['flags']} overloaded".strip()
        for key, name in (("ttft", "ttft_ms"), ("tpot", "tpot_ms")):  # the spread over requests, as printed
            for q, field in ((50, "median"), (99, "p99")):
                value = m.get(f"{name}_{field}") if (m := rec.get("metrics") or {}) else None
                row[f"{key}_p{q}_measured"] = value and value / 1e3
                row[f"{key}_p{q}_predicted"] = got.get(f"{key}_p{q}_s")
        out.append(row)
    return out


def spread_summary(table: list[dict]) -> list[str]:
    """p99 over median of TTFT and TPOT, measured and predicted, over the records that print both (the
    spread over requests, whatever the mean's error), and the p50 and p99 errors."""
    lines = []
    for key in ("ttft", "tpot"):
        both = [r for r in table if r.get(f"{key}_p50_measured") and r.get(f"{key}_p99_measured")
                and r.get(f"{key}_p50_predicted") and math.isfinite(r[f"{key}_p99_predicted"] or math.inf)]
        if not both:
            continue
        ratios = {side: sorted(r[f"{key}_p99_{side}"] / r[f"{key}_p50_{side}"] for r in both)
                  for side in ("measured", "predicted")}
        err = {q: 100 * sum(abs(r[f"{key}_p{q}_predicted"] / r[f"{key}_p{q}_measured"] - 1) for r in both) / len(both)
               for q in (50, 99)}
        lines.append(f"{key.upper()} p99/p50 over {len(both)} records: measured median "
                     f"{ratios['measured'][len(both) // 2]:.2f}, predicted median "
                     f"{ratios['predicted'][len(both) // 2]:.2f}; mean absolute error "
                     f"p50 {err[50]:.1f}%, p99 {err[99]:.1f}%")
    return lines


def main() -> None:
    table = rows()
    if print_table(table, "flags", "output tokens/s"):
        return
    print()
    for kind, pick in (("MoE", True), ("dense", False)):
        for key in ("tpot", "ttft", "throughput"):
            # an open loop offered more than llmsim's capacity has no steady state (llmsim's throughput there is
            # its capacity): its throughput is shown apart, with the figure over every row beside
            every = [r[f"{key}_error"] for r in table if r.get("moe") == pick and r.get(f"{key}_error") is not None]
            errs = [r[f"{key}_error"] for r in table if r.get("moe") == pick and r.get(f"{key}_error") is not None
                    and not (key == "throughput" and "overloaded" in r.get("flags", ""))]
            if errs:
                mean_abs = 100 * sum(abs(e) for e in errs) / len(errs)
                signed = 100 * sum(errs) / len(errs)
                over = sum(1 for r in table if r.get("moe") == pick and "overloaded" in r.get("flags", "")
                           and r.get(f"{key}_measured") and (key == "throughput" or r.get(f"{key}_error") is None))
                with_all = (f" (with them: {100 * sum(abs(e) for e in every) / len(every):.1f}% over {len(every)})"
                            if len(every) > len(errs) else "")
                print(f"{kind:5s} {key:10s}: mean absolute error {mean_abs:5.1f}% (signed {signed:+.1f}%) "
                      f"over {len(errs)} records" + (f"; {over} more predicted past capacity" if over else "")
                      + with_all)
    print()
    print("\n".join(spread_summary(table)))


if __name__ == "__main__":
    main()
