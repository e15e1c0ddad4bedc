"""Published 2025-2026 serving measurements (docs/research/serving_records_2026.yaml, collected 2026-11-28)
held against `llmsim estimate --mode serving`: the issue-36 baseline, MoE and dense apart.

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
import re
from pathlib import Path

import yaml
from error_table import print_table

from llmsim.engine.errors import DesignError
from llmsim.spec.engines import ENGINES
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "research" / "serving_records_2026.yaml"
# record's accelerator -> (accelerator preset, network preset)
HARDWARE = {"H100": ("h100-sxm", "dgx-h100"), "H200": ("h200-sxm", "dgx-h200"), "B200": ("b200", "dgx-b200"),
            "GB200": ("gb200", "gb200-nvl72"), "MI300X": ("mi300x", "mi300x-8"), "MI325X": ("mi325x", "mi325x-8"),
            "MI355X": ("mi355x", "mi355x-8")}
# substring of the record's model id (lower case) -> model preset, first match
MODELS = [("deepseek-r1", "deepseek-r1"), ("deepseek-v3", "deepseek-v3"), ("gpt-oss-120b", "gpt-oss-120b"),
          ("gpt-oss-20b", "gpt-oss-20b"), ("qwen3-235b", "qwen3-235b-a22b"), ("qwen3-30b", "qwen3-30b-a3b"),
          ("qwen3-8b", "qwen3-8b"), ("llama-3.3-70b", "llama3-70b"), ("llama-3.1-70b", "llama3-70b"),
          ("llama-2-70b", "llama2-70b"), ("llama2-70b", "llama2-70b"), ("mixtral-8x7b", "mixtral-8x7b"),
          ("llama-3.1-8b", "llama3.1-8b")]
MOE = ("deepseek", "gpt-oss", "qwen3-235b", "qwen3-30b", "mixtral")


def _precision(text: str, model: str) -> str | None:
    t = str(text or "").lower()
    if "mxfp4" in t and model.startswith("gpt-oss"):
        return "native"  # MXFP4 experts beside BF16 attention, as released
    for word, name in (("nvfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "bf16")):
        if word in t:
            return name
    return None


def scenario_overrides(rec: dict) -> tuple[list[str], list[str]] | None:
    """(`--set` overrides of the record's scenario, flags), or None when it cannot be modelled."""
    hw, p, w = rec["hardware"], rec["parallel"], rec["workload"]
    ident = f"{rec['model'].get('hf_id') or ''} {rec['model'].get('name') or ''}".lower()
    model = next((preset for key, preset in MODELS if key in ident), None)
    acc = HARDWARE.get(str(hw.get("accelerator")))
    conc, rate = w.get("concurrency"), w.get("request_rate_per_s")
    load = (f"workload.concurrency={conc}" if isinstance(conc, int) else
            f"workload.request_rate_per_s={rate}" if isinstance(rate, (int, float)) else None)
    if None in (model, acc, load, p.get("tp"), w.get("isl"), w.get("osl")) or w["osl"] < 2:
        return None
    prec = _precision(p.get("weight_precision"), model)
    if prec is None:
        return None
    kv = _precision(p.get("kv_cache_precision"), model)
    ep = p.get("ep") or 1
    flags = ["dp-attn"] if p.get("attention_dp") else []
    adp = ["parallel.attention_dp=true"] if p.get("attention_dp") else []
    budget = re.search(r"--max-num-batched-tokens[ =](\d+)", str(p.get("flags") or ""))
    sets = [f"model={model}", f"system.accelerator={acc[0]}", f"system.network={acc[1]}",
            f"system.num_devices={hw['count']}", f"parallel.tp={p['tp']}", f"parallel.pp={p.get('pp') or 1}",
            f"parallel.ep={ep}", "workload.mode=serving", f"workload.precision={prec}",
            *([f"workload.kv_precision={kv}"] if kv not in (None, "native") else []),
            f"workload.input_len={round(w['isl'])}", f"workload.output_len={round(w['osl'])}", load,
            # the client's start burst: its requests in all, where the record names them (closed loop)
            *([f"workload.num_prompts={w['num_prompts']}"] if isinstance(conc, int) and isinstance(
                w.get("num_prompts"), int) and w["num_prompts"] >= conc else []),
            *([f"serving.engine={p['engine']}"] if p.get("engine") in ENGINES else []),
            *([f"serving.max_batch_tokens={budget.group(1)}"] if budget else []), *adp]
    return sets, flags


def _measured(rec: dict) -> dict:
    m, w = rec.get("metrics") or {}, rec["workload"]
    out_tps = m.get("output_tokens_per_s")
    if out_tps is None and m.get("total_tokens_per_s") is not None:
        out_tps = m["total_tokens_per_s"] * w["osl"] / (w["isl"] + w["osl"])
    tpot = m.get("tpot_ms_mean") or m.get("itl_ms_mean")
    return {"tpot": tpot and tpot / 1e3, "ttft": m.get("ttft_ms_mean") and m["ttft_ms_mean"] / 1e3,
            "throughput": out_tps}


def rows() -> list[dict]:
    registry = PresetRegistry()
    out = []
    for rec in yaml.safe_load(RECORDS.read_text(encoding="utf-8")):
        conv = scenario_overrides(rec)
        if conv is None:
            continue
        sets, flags = conv
        row = {"id": rec["id"], "engine": rec["parallel"].get("engine"),
               "moe": any(k in sets[0] for k in MOE), "flags": " ".join(flags)}
        try:
            got = est.record(est.load(None, registry, sets))
        except (DesignError, SpecError) as err:
            out.append({**row, "error": str(err).splitlines()[0][:90]})
            continue
        measured = _measured(rec)
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
